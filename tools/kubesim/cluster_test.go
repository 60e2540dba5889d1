package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "web",
			Image: "nginx:1.27",
			Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
}

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func deploymentAvailable(cs kubernetes.Interface, ns, name string, replicas int32) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue &&
				d.Status.ReadyReplicas == replicas && d.Status.UpdatedReplicas == replicas {
				return true, nil
			}
		}
		return false, nil
	}
}

// TestCluster starts one cluster, checks what users rely on, stops it with
// SIGTERM (nothing may be left running), and starts it again on the same
// data dir (everything must still be there).
func TestCluster(t *testing.T) {
	dir := t.TempDir()
	p := startKubesim(t, dir, "--name", "east", "--region", "us-east-1", "--zones", "us-east-1a,us-east-1b", "--nodes", "3")
	cs := p.client(t)
	ctx := context.Background()
	ns := metav1.NamespaceDefault

	if p.ready.Name != "east" || !strings.HasPrefix(p.ready.Endpoint, "https://127.0.0.1:") || p.ready.Kubeconfig != dir+"/kubeconfig" {
		t.Fatalf("ready line = %+v", p.ready)
	}

	t.Run("nodes carry region and round-robin zones", func(t *testing.T) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 3 {
			t.Fatalf("got %d nodes, want 3", len(nodes.Items))
		}
		zones := map[string]int{}
		for _, n := range nodes.Items {
			if n.Labels[labelRegion] != "us-east-1" {
				t.Errorf("node %s region = %q", n.Name, n.Labels[labelRegion])
			}
			zones[n.Labels[labelZone]]++
		}
		if zones["us-east-1a"] != 2 || zones["us-east-1b"] != 1 {
			t.Errorf("zones = %v, want 2 in us-east-1a and 1 in us-east-1b", zones)
		}
		// No node lifecycle controller runs, so nothing would ever lift a not-ready taint.
		for _, n := range nodes.Items {
			if len(n.Spec.Taints) != 0 {
				t.Errorf("node %s has taints %v, want none", n.Name, n.Spec.Taints)
			}
		}
	})

	t.Run("a 3-replica Deployment becomes Available", func(t *testing.T) {
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("web", 3), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "deployment web Available", deploymentAvailable(cs, ns, "web", 3))
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range pods.Items {
			if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.Spec.NodeName == "" {
				t.Errorf("pod %s: phase %s, ip %q, node %q", pod.Name, pod.Status.Phase, pod.Status.PodIP, pod.Spec.NodeName)
			}
		}
	})

	t.Run("a StatefulSet and a DaemonSet roll out", func(t *testing.T) {
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](2), ServiceName: "db",
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				Template: podTemplate("db"),
			},
		}
		if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
				Template: podTemplate("agent"),
			},
		}
		if _, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "statefulset db ready", func(ctx context.Context) (bool, error) {
			s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
			return err == nil && s.Status.ReadyReplicas == 2, err
		})
		eventually(t, time.Minute, "daemonset agent ready on 3 nodes", func(ctx context.Context) (bool, error) {
			d, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			return err == nil && d.Status.DesiredNumberScheduled == 3 && d.Status.NumberReady == 3, err
		})
	})

	t.Run("a LoadBalancer Service gets a cluster IP and an ingress IP", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}},
			},
		}
		created, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip, err := netip.ParseAddr(created.Spec.ClusterIP); err != nil || !netip.MustParsePrefix(serviceCIDR).Contains(ip) {
			t.Errorf("cluster IP %q is not in %s", created.Spec.ClusterIP, serviceCIDR)
		}
		eventually(t, 30*time.Second, "load balancer ingress", func(ctx context.Context) (bool, error) {
			s, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
				return false, err
			}
			ip, err := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
			return err == nil && lbPool.Contains(ip), err
		})
	})

	t.Run("an autoscaling/v2 HPA is accepted", func(t *testing.T) {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MinReplicas:    ptr.To[int32](3),
				MaxReplicas:    10,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{
						Name:   corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)},
					},
				}},
			},
		}
		if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("garbage collection removes dependents", func(t *testing.T) {
		owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}}}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "dependent collected", func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
	})

	t.Run("a Namespace with a Deployment deletes", func(t *testing.T) {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "deployment in doomed", func(ctx context.Context) (bool, error) {
			_, err := cs.AppsV1().Deployments("doomed").Create(ctx, newDeployment("app", 2), metav1.CreateOptions{})
			return err == nil, err
		})
		eventually(t, time.Minute, "deployment doomed/app Available", deploymentAvailable(cs, "doomed", "app", 2))
		if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "namespace doomed gone", func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
	})

	// Stop: every process below kubesim must be gone.
	kids := descendants(p.cmd.Process.Pid)
	if len(kids) != 3 {
		t.Errorf("kubesim has %d child processes, want 3 (apiserver, controller manager, scheduler; etcd and kwok run inside kubesim)", len(kids))
	}
	p.stop(t)
	for _, pid := range kids {
		if alive(pid) {
			t.Errorf("process %d is still running after kubesim stopped", pid)
		}
	}

	// Restart on the same data dir: same endpoint, same objects.
	again := startKubesim(t, dir)
	if again.ready != p.ready {
		t.Errorf("after restart ready line = %+v, want %+v", again.ready, p.ready)
	}
	cs = again.client(t)
	eventually(t, time.Minute, "deployment web Available after restart", deploymentAvailable(cs, ns, "web", 3))
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("after restart: %d nodes, err %v", len(nodes.Items), err)
	}
	if nodes.Items[0].Labels[labelRegion] != "us-east-1" {
		t.Errorf("after restart region = %q, want us-east-1", nodes.Items[0].Labels[labelRegion])
	}
}

// TestTwoClustersAtOnce runs two clusters side by side on free ports.
func TestTwoClustersAtOnce(t *testing.T) {
	a := startKubesim(t, t.TempDir(), "--name", "a", "--nodes", "1")
	b := startKubesim(t, t.TempDir(), "--name", "b", "--nodes", "2")
	if a.ready.Endpoint == b.ready.Endpoint {
		t.Fatalf("both clusters serve on %s", a.ready.Endpoint)
	}
	ctx := context.Background()
	if _, err := a.client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client(t).CoreV1().Namespaces().Get(ctx, "only-in-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace created in a is visible in b (err %v)", err)
	}
	for name, p := range map[string]*proc{"a": a, "b": b} {
		nodes, err := p.client(t).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			if !strings.HasPrefix(n.Name, name+"-node-") {
				t.Errorf("cluster %s has node %s", name, n.Name)
			}
		}
	}
}
