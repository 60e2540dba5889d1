package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

func clientset(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs
}

func ptr[T any](v T) *T { return &v }

// readyRuntime registers the kubeconfig file's cluster as a runtime and waits until it is Ready.
func readyRuntime(t *testing.T, cl *client.Client, name, kubeconfig string) *api.KubernetesRuntime {
	t.Helper()
	rt, err := cl.KubernetesRuntimes().Create(context.Background(), &api.KubernetesRuntime{Meta: api.Meta{Name: name},
		Spec: runtimeSpec(cptest.Kubeconfig(t, kubeconfig))})
	require.NoError(t, err)
	rt, err = cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, time.Minute), rt.ID)
	require.NoError(t, err)
	return rt
}

func deployment(t *testing.T, cs kubernetes.Interface, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

func runningPods(t *testing.T, cs kubernetes.Interface, ns string) int {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=qleet"})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func TestOneDefinitionOnTwoRuntimes(t *testing.T) {
	t.Parallel()
	us := kubesimtest.Start(t, kubesimtest.WithName("us"), kubesimtest.WithRegion("us-east"))
	eu := kubesimtest.Start(t, kubesimtest.WithName("eu"), kubesimtest.WithRegion("eu-west"))
	_, cl := cptest.Start(t, app.Config{DriftInterval: 3 * time.Second, ResyncInterval: time.Second})
	ctx := context.Background()
	clusters := map[string]kubernetes.Interface{"us": clientset(t, us.Kubeconfig), "eu": clientset(t, eu.Kubeconfig)}

	var insts []*api.WorkloadInstance
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Replicas: ptr(int32(3)), Containers: []api.Container{{
			Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}}})
	require.NoError(t, err)
	for name, c := range map[string]*kubesimCluster{"us": {us.Kubeconfig}, "eu": {eu.Kubeconfig}} {
		rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: name},
			Spec: runtimeSpec(cptest.Kubeconfig(t, c.kubeconfig))})
		require.NoError(t, err)
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web-" + name},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		insts = append(insts, inst)
	}

	t.Run("each instance goes Ready with its pods Running", func(t *testing.T) {
		for _, inst := range insts {
			got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 90*time.Second), inst.ID)
			require.NoError(t, err)
			require.Equal(t, int32(3), got.Status.AvailableReplicas)
			cs := clusters[inst.Name[len("web-"):]]
			require.Equal(t, int32(3), deployment(t, cs, got.Status.Namespace, "web-"+inst.Name[len("web-"):]).Status.AvailableReplicas)
			require.Equal(t, 3, runningPods(t, cs, got.Status.Namespace))
		}
	})

	t.Run("the CI image hook rolls out to every instance", func(t *testing.T) {
		var out struct {
			UpdatedInstances []api.ObjectRef `json:"updated_instances"`
		}
		require.NoError(t, cl.Do(ctx, "POST", "/v1/workload_definitions/"+def.ID+"/image", nil, nil,
			map[string]string{"container": "web", "image": "nginx:1.28"}, &out))
		require.Len(t, out.UpdatedInstances, 2)
		// The definition is reconciled only once every instance runs the new image.
		got, err := cl.WorkloadDefinitions().WaitReconciled(cptest.Wait(t, 90*time.Second), def.ID)
		require.NoError(t, err)
		require.Equal(t, int64(2), got.Generation)
		for _, inst := range insts {
			cur, err := cl.WorkloadInstances().Get(ctx, inst.ID)
			require.NoError(t, err)
			require.Equal(t, api.PhaseReady, cur.Status.Phase)
			require.Equal(t, int64(2), cur.Status.DefinitionGeneration)
			region := inst.Name[len("web-"):]
			d := deployment(t, clusters[region], cur.Status.Namespace, inst.Name)
			require.Equal(t, "nginx:1.28", d.Spec.Template.Spec.Containers[0].Image)
			require.Equal(t, int32(3), d.Status.UpdatedReplicas)
			rs, err := clusters[region].AppsV1().ReplicaSets(cur.Status.Namespace).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(rs.Items), 2, "a new ReplicaSet rolled out")
		}
	})

	t.Run("a Deployment scaled by hand is put back, with an event", func(t *testing.T) {
		inst, err := cl.WorkloadInstances().Get(ctx, insts[0].ID)
		require.NoError(t, err)
		cs := clusters[inst.Name[len("web-"):]]
		d := deployment(t, cs, inst.Status.Namespace, inst.Name)
		d.Spec.Replicas = ptr(int32(1))
		_, err = cs.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl"})
		require.NoError(t, err)
		await.True(t, 60*time.Second, func() bool {
			return *deployment(t, cs, inst.Status.Namespace, inst.Name).Spec.Replicas == 3
		}, "condition")
		await.True(t, 30*time.Second, func() bool {
			evs, err := cl.WorkloadInstances().Events(ctx, inst.ID)
			require.NoError(t, err)
			for _, e := range evs {
				if e.Reason == "DriftCorrected" {
					return true
				}
			}
			return false
		}, "condition")
	})

	t.Run("a definition with instances is protected; cascade deletes the instances and their objects", func(t *testing.T) {
		err := cl.WorkloadDefinitions().Delete(ctx, def.ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "got %v", err)
		require.Contains(t, err.Error(), `workload_instance "web-us"`)
		require.NoError(t, cl.WorkloadDefinitions().Delete(cptest.Wait(t, 2*time.Minute), def.ID, client.DeleteOptions{Cascade: true, Wait: true}))
		for region, cs := range clusters {
			_, err := cs.AppsV1().Deployments("web-"+region).Get(ctx, "web-"+region, metav1.GetOptions{})
			require.Error(t, err, "the Deployment is gone from %s", region)
			pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=qleet"})
			require.NoError(t, err)
			require.Empty(t, pods.Items)
		}
	})
}

type kubesimCluster struct{ kubeconfig string }

func TestRestartKeepsLocalRuntimesAndInstances(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	start := func() (*app.App, *client.Client) {
		a, err := app.Start(ctx, app.Config{DataDir: dir, Listen: "127.0.0.1:0", API: true, Controllers: true, Logger: cptest.Logger()})
		require.NoError(t, err)
		cl, err := a.Client()
		require.NoError(t, err)
		return a, cl
	}
	a1, cl := start()
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "local"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Nodes: 2}})
	require.NoError(t, err)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "api"},
		Spec: api.WorkloadDefinitionSpec{Replicas: ptr(int32(2)), Containers: []api.Container{{Name: "api", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "api"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	before, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 3*time.Minute), inst.ID)
	require.NoError(t, err)
	uid := deployment(t, clientset(t, dir+"/runtimes/"+rt.ID+"/kubeconfig"), before.Status.Namespace, "api").UID
	a1.Close(ctx)

	a2, cl := start()
	t.Cleanup(func() { a2.Close(context.Background()) })
	rt2, err := cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 2*time.Minute), rt.ID)
	require.NoError(t, err, "the local cluster is started again")
	require.Equal(t, 2, rt2.Status.NodesReady)
	after, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	require.NoError(t, err)
	require.Equal(t, before.Generation, after.Generation)
	require.Equal(t, int32(2), after.Status.AvailableReplicas)
	// The stored status was Ready before the restart; what matters is the cluster coming back with the
	// Deployment still in it.
	cs := clientset(t, dir+"/runtimes/"+rt.ID+"/kubeconfig")
	await.True(t, 2*time.Minute, func() bool {
		d, err := cs.AppsV1().Deployments(after.Status.Namespace).Get(ctx, "api", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2 && d.UID == uid
	}, "the local cluster is back with the same Deployment in it")
}

func TestAStalledRolloutEndsTheWaitWithItsReason(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("stall"))
	_, cl := cptest.Start(t, app.Config{ProgressDeadline: 2 * time.Second, ResyncInterval: time.Second})
	ctx := context.Background()
	rt := readyRuntime(t, cl, "stall", sim.Kubeconfig)

	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "huge"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.27",
			Resources: &api.Resources{Requests: api.ResourceList{CPU: "1000"}}}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "huge-a"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)

	start := time.Now()
	got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	var fe *client.FailedError
	require.ErrorAs(t, err, &fe, "the wait ends with the stall, not the timeout")
	require.NotNil(t, fe.Stalled)
	require.Equal(t, "Unschedulable", fe.Stalled.Reason)
	require.Contains(t, err.Error(), "Insufficient cpu", "the scheduler's message")
	require.Equal(t, api.PhaseReconciling, got.Status.Phase, "stalled is not Failed: the world may still heal")
	t.Logf("stalled after %s (deadline 2s)", time.Since(start).Round(time.Millisecond))

	// Give the instance a few more reconciles while stalled (a repeated event is counted on its record).
	await.True(t, 30*time.Second, func() bool {
		evs, err := cl.WorkloadInstances().Events(ctx, inst.ID)
		require.NoError(t, err)
		var happened int64
		for _, e := range evs {
			happened += max(e.Count, 1)
		}
		return happened >= 4
	}, "four events while stalled")
	evs, err := cl.WorkloadInstances().Events(ctx, inst.ID)
	require.NoError(t, err)
	var stalledEvents int
	for _, e := range evs {
		if e.Reason == api.ConditionStalled {
			stalledEvents++
		}
	}
	require.Equal(t, 1, stalledEvents, "one Stalled event, not one per reconcile")

	// A definition change rolls out to the stuck instance: the definition's wait follows the instance's
	// deadline instead of blocking until its own timeout.
	_, err = cl.WorkloadDefinitions().Patch(ctx, def.ID, map[string]any{"spec": map[string]any{"replicas": 2}})
	require.NoError(t, err)
	_, err = cl.WorkloadDefinitions().WaitReconciled(cptest.Wait(t, time.Minute), def.ID)
	require.ErrorAs(t, err, &fe, "the definition's wait follows its instance's deadline")
	require.NotNil(t, fe.Stalled)
	require.Contains(t, fe.Stalled.Message, `workload_instance "huge-a"`)

	// Fixing the spec clears the stall: the definition is reconciled once every instance rolled it out.
	_, err = cl.WorkloadDefinitions().Patch(ctx, def.ID, map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "app", "image": "nginx:1.27", "resources": map[string]any{"requests": map[string]any{"cpu": "10m"}}}}}})
	require.NoError(t, err)
	_, err = cl.WorkloadDefinitions().WaitReconciled(cptest.Wait(t, 2*time.Minute), def.ID)
	require.NoError(t, err)
	ready, err := cl.WorkloadInstances().Get(ctx, inst.ID)
	require.NoError(t, err)
	require.True(t, api.Reconciled(ready.Generation, &ready.Status.Status), "%+v", ready.Status)
	require.Nil(t, api.StalledCondition(ready.Generation, &ready.Status.Status))
}
