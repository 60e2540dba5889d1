package app_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// supportServicesOn lists the support services on a runtime, by type.
func supportServicesOn(t *testing.T, cl *client.Client, runtimeID string) map[string][]*api.SupportService {
	t.Helper()
	out := map[string][]*api.SupportService{}
	for ss, err := range cl.SupportServices().All(context.Background(), client.ListOptions{}) {
		require.NoError(t, err)
		if ss.Spec.RuntimeID == runtimeID {
			out[ss.Spec.Type] = append(out[ss.Spec.Type], ss)
		}
	}
	return out
}

// TestGatewaysWithTLS: gateways install ingress and cert-manager once per runtime, get an address and a
// real certificate, give a domain name its records, and leave nothing behind; support services go a
// grace period after their last gateway, and one an operator declared stays.
func TestGatewaysWithTLS(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("edge"), kubesimtest.WithRegion("eu-west"), kubesimtest.WithNodes(1))
	const grace = 3 * time.Second
	_, cl := cptest.Start(t, app.Config{ResyncInterval: 500 * time.Millisecond, DriftInterval: time.Second, OwnerGrace: grace})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rc, err := clientcmd.BuildConfigFromFlags("", sim.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	rt := readyRuntime(t, cl, "edge", sim.Kubeconfig)
	var declared *api.SupportService
	declared, err = cl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "metrics"},
		Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportMetricsServer}})
	require.NoError(t, err)
	zone, err := cl.DomainNames().Create(ctx, &api.DomainName{Meta: api.Meta{Name: "example"}, Spec: api.DomainNameSpec{Zone: "example.test"}})
	require.NoError(t, err)

	start := time.Now()
	def := webDefinition(t, cl, "web", 2, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	// Two gateways at once: one with a host and TLS, one without.
	specs := map[string]api.GatewaySpec{
		"web":      {InstanceID: inst.ID, Hosts: []string{"app.example.test"}},
		"internal": {InstanceID: inst.ID, Paths: []string{"/api"}},
	}
	gws := map[string]*api.Gateway{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: name}, Spec: spec})
			require.NoError(t, err)
			mu.Lock()
			gws[name] = gw
			mu.Unlock()
		}()
	}
	wg.Wait()

	t.Run("the gateways go Ready with an address and a valid certificate", func(t *testing.T) {
		for name, gw := range gws {
			got, err := cl.Gateways().WaitReconciled(cptest.Wait(t, 3*time.Minute), gw.ID)
			require.NoError(t, err, name)
			gws[name] = got
		}
		t.Logf("app + two gateways on a fresh cluster, create to Ready (ingress and cert-manager installed): %s", time.Since(start).Round(time.Millisecond))
		web := gws["web"]
		require.Len(t, web.Status.Runtimes, 1)
		rs := web.Status.Runtimes[0]
		require.NotEmpty(t, rs.Address)
		require.Equal(t, "https://app.example.test/", rs.URL)
		require.Equal(t, rs.URL, web.Status.URL)
		require.True(t, rs.CertificateReady)
		require.NotNil(t, rs.CertificateExpiry)
		require.WithinDuration(t, time.Now().Add(90*24*time.Hour), *rs.CertificateExpiry, 2*time.Hour)
		require.Equal(t, "http://"+rs.Address+"/api", gws["internal"].Status.URL)

		secret, err := cs.CoreV1().Secrets("web").Get(ctx, "web-tls", metav1.GetOptions{})
		require.NoError(t, err)
		block, _ := pem.Decode(secret.Data["tls.crt"])
		require.NotNil(t, block)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		require.Equal(t, []string{"app.example.test"}, cert.DNSNames)
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(secret.Data["ca.crt"]))
		_, err = cert.Verify(x509.VerifyOptions{DNSName: "app.example.test", Roots: roots})
		require.NoError(t, err, "the certificate is valid for the host")

		ing, err := cs.NetworkingV1().Ingresses("web").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, api.IngressClassName, *ing.Spec.IngressClassName)
		require.Equal(t, "true", ing.Annotations["nginx.ingress.kubernetes.io/ssl-redirect"])
		require.Equal(t, "web-tls", ing.Spec.TLS[0].SecretName)
	})

	t.Run("each support service is installed exactly once on the runtime", func(t *testing.T) {
		on := supportServicesOn(t, cl, rt.ID)
		for _, typ := range []string{api.SupportIngress, api.SupportCertManager, api.SupportExternalDNS, api.SupportMetricsServer} {
			require.Len(t, on[typ], 1, typ)
		}
		require.Equal(t, api.PhaseReady, on[api.SupportIngress][0].Status.Phase)
		require.Equal(t, 2, on[api.SupportIngress][0].Status.Consumers, "both gateways use the ingress")
		require.Contains(t, on[api.SupportIngress][0].Status.Chart, "local chart")
		ic, err := cs.NetworkingV1().IngressClasses().Get(ctx, api.IngressClassName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "qleetos.io/ingress", ic.Spec.Controller)
	})

	t.Run("the domain name lists the gateway's record", func(t *testing.T) {
		require.Equal(t, []api.ObjectRef{{Kind: api.KindDomainName, ID: zone.ID, Name: "example"}}, gws["web"].Status.DomainNames)
		await.True(t, 30*time.Second, func() bool {
			d, err := cl.DomainNames().Get(ctx, zone.ID)
			require.NoError(t, err)
			return len(d.Status.Records) == 1 && d.Status.Records[0].Name == "app.example.test" &&
				d.Status.Records[0].Targets[0] == gws["web"].Status.Runtimes[0].Address
		}, "condition")
	})

	t.Run("the graph shows the gateway waiting on nothing, using its support services", func(t *testing.T) {
		g, err := cl.Graph(ctx, "gateway/web")
		require.NoError(t, err)
		var whys []string
		for _, e := range g.Providers(gws["web"].ID) {
			whys = append(whys, e.Why)
		}
		require.Contains(t, whys, "spec.instance_id")
		require.Contains(t, whys, "status.support_services[0]")
		require.Contains(t, whys, "status.domain_names[0]")
	})

	t.Run("support services stay while a gateway uses them, and go a grace after the last", func(t *testing.T) {
		require.NoError(t, cl.Gateways().Delete(cptest.Wait(t, time.Minute), gws["internal"].ID, client.DeleteOptions{Wait: true}))
		_, err := cs.NetworkingV1().Ingresses("web").Get(ctx, "internal", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "its route is gone: %v", err)
		time.Sleep(2 * grace) // no signal: the other gateway still uses them: nothing may go
		on := supportServicesOn(t, cl, rt.ID)
		require.Len(t, on[api.SupportIngress], 1)
		require.Len(t, on[api.SupportCertManager], 1)

		ingressID := on[api.SupportIngress][0].ID
		require.NoError(t, cl.Gateways().Delete(cptest.Wait(t, time.Minute), gws["web"].ID, client.DeleteOptions{Wait: true}))
		gone := time.Now()
		_, err = cs.NetworkingV1().Ingresses("web").Get(ctx, "web", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the route is gone: %v", err)
		_, err = dyn.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}).Namespace("web").Get(ctx, "web", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the certificate is gone: %v", err)
		_, err = cs.CoreV1().Secrets("web").Get(ctx, "web-tls", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the TLS secret issued for it is gone: %v", err)
		_, err = cl.SupportServices().Get(ctx, ingressID)
		require.NoError(t, err, "not before the grace")
		await.True(t, time.Minute, func() bool {
			on := supportServicesOn(t, cl, rt.ID)
			return len(on[api.SupportIngress]) == 0 && len(on[api.SupportCertManager]) == 0 && len(on[api.SupportExternalDNS]) == 0
		}, "removed after the grace")
		require.GreaterOrEqual(t, time.Since(gone), grace)
		t.Logf("support services removed %s after the last gateway (grace %s)", time.Since(gone).Round(time.Millisecond), grace)

		d, err := cl.DomainNames().Get(ctx, zone.ID)
		require.NoError(t, err)
		require.Empty(t, d.Status.Records, "the record went with the gateway")
	})

	t.Run("nothing is left in the cluster but what an operator declared", func(t *testing.T) {
		await.True(t, time.Minute, func() bool {
			for _, ns := range []string{"qleet-ingress", "qleet-cert-manager", "qleet-external-dns"} {
				if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			_, err := cs.NetworkingV1().IngressClasses().Get(ctx, api.IngressClassName, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "condition")
		crds, err := cs.Discovery().ServerResourcesForGroupVersion("cert-manager.io/v1")
		require.True(t, apierrors.IsNotFound(err) || len(crds.APIResources) == 0, "cert-manager's CRDs are gone: %v", err)
		got, err := cl.SupportServices().Get(ctx, declared.ID)
		require.NoError(t, err, "the declared support service stays")
		require.Equal(t, api.PhaseReady, got.Status.Phase)
		_, err = cs.AppsV1().Deployments("kube-system").Get(ctx, "qleet-metrics-server", metav1.GetOptions{})
		require.NoError(t, err)
	})
}

// TestDeletingTheInstanceWithCascadeLeavesNothing: the instance deleted with cascade takes its gateway
// first, and the support services the gateway installed follow after the grace; the runtime can then be
// deleted at once, although the grace is long.
func TestDeletingTheInstanceWithCascadeLeavesNothing(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("cascade"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: 500 * time.Millisecond, DriftInterval: time.Second, OwnerGrace: time.Hour})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "cascade", sim.Kubeconfig)
	def := webDefinition(t, cl, "web", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "web"},
		Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{"web.example.test"}}})
	require.NoError(t, err)
	_, err = cl.Gateways().WaitReconciled(cptest.Wait(t, 2*time.Minute), gw.ID)
	require.NoError(t, err)

	err = cl.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{})
	require.True(t, api.IsConflict(err), "the gateway depends on it: %v", err)
	require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, 2*time.Minute), inst.ID, client.DeleteOptions{Cascade: true, Wait: true}))
	_, err = cl.Gateways().Get(ctx, gw.ID)
	require.True(t, api.IsNotFound(err), "the gateway went first: %v", err)
	require.Len(t, supportServicesOn(t, cl, rt.ID)[api.SupportIngress], 1, "within the grace the support services stay")

	// The runtime goes at once, taking the unused support services first, whatever the grace.
	require.NoError(t, cl.KubernetesRuntimes().Delete(cptest.Wait(t, 2*time.Minute), rt.ID, client.DeleteOptions{Wait: true}))
	require.Empty(t, supportServicesOn(t, cl, rt.ID))
	for _, ns := range []string{"web", "qleet-ingress", "qleet-cert-manager"} {
		await.True(t, time.Minute, func() bool {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "namespace %s is gone", ns)
	}
	_, err = cs.NetworkingV1().IngressClasses().Get(ctx, api.IngressClassName, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// TestAutoscalingOnSimulatedLoad: with the metrics-server support service installed, kubesim serves pod
// metrics, and the HorizontalPodAutoscaler QleetOS renders scales the workload on the load put on it.
func TestAutoscalingOnSimulatedLoad(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("hpa"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "hpa", sim.Kubeconfig)
	ms, err := cl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "metrics"},
		Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportMetricsServer}})
	require.NoError(t, err)
	_, err = cl.SupportServices().WaitReconciled(cptest.Wait(t, time.Minute), ms.ID)
	require.NoError(t, err)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "busy"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27",
			Resources: &api.Resources{Requests: api.ResourceList{CPU: "100m"}}}},
			Autoscaling: &api.Autoscaling{MinReplicas: 1, MaxReplicas: 4, TargetCPUPercent: 50}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "busy"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), inst.ID)
	require.NoError(t, err)

	// At rest (a tenth of the request, 10%) the autoscaler reads the metrics and keeps one replica.
	await.True(t, 2*time.Minute, func() bool {
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers("busy").Get(ctx, "busy", metav1.GetOptions{})
		require.NoError(t, err)
		return len(hpa.Status.CurrentMetrics) > 0 && hpa.Status.CurrentMetrics[0].Resource != nil &&
			hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != nil
	}, "the autoscaler reads pod metrics")

	// Load: 300m per pod is 300% of the request against a 50% target, so it scales to its maximum.
	d := deployment(t, cs, "busy", "busy")
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations["kubesim.qleet.io/cpu"] = "300m"
	_, err = cs.AppsV1().Deployments("busy").Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	loaded := time.Now()
	await.True(t, 2*time.Minute, func() bool {
		d := deployment(t, cs, "busy", "busy")
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 4 && d.Status.AvailableReplicas == 4
	}, "the autoscaler scales to its maximum")
	t.Logf("HPA: load applied -> 4 replicas available in %s", time.Since(loaded).Round(time.Millisecond))
	got, err := cl.WorkloadInstances().Get(ctx, inst.ID)
	require.NoError(t, err)
	await.True(t, time.Minute, func() bool {
		got, err = cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		return got.Status.Replicas == 4
	}, "the instance reports the autoscaled replicas")
}

// TestSupportServiceLeavesForeignObjects: an ingress support service whose IngressClass someone else made
// fails, naming it (without advising adopt, which support services do not have), and leaves it as it
// was, also when it is deleted. What it made before it failed (the Deployment and the LoadBalancer
// Service, which come before the IngressClass) goes on delete, found by its ownership labels though
// its status lists nothing; an object someone put in its namespace stays, and so does the namespace.
func TestSupportServiceLeavesForeignObjects(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("foreign"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "foreign", sim.Kubeconfig)
	theirs := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: api.IngressClassName, Labels: map[string]string{"team": "edge"}},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/their-controller"}}
	_, err := cs.NetworkingV1().IngressClasses().Create(ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)

	ss, err := cl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress"},
		Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportIngress}})
	require.NoError(t, err)
	_, err = cl.SupportServices().WaitReconciled(cptest.Wait(t, time.Minute), ss.ID)
	require.True(t, client.IsFailed(err), "%v", err)
	require.Contains(t, err.Error(), "IngressClass/qleet already exists and was not created by QleetOS")
	require.NotContains(t, err.Error(), "adopt", "a support service cannot adopt: the advice would mislead")

	ns := api.SupportCharts[api.SupportIngress].Namespace
	sel := metav1.ListOptions{LabelSelector: "qleetos.io/instance-id=" + ss.ID}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
	require.NoError(t, err)
	require.NotEmpty(t, deps.Items, "the install got as far as the Deployment before it failed")
	failed, err := cl.SupportServices().Get(ctx, ss.ID)
	require.NoError(t, err)
	require.Empty(t, failed.Status.Objects, "the failed install recorded nothing in its status")
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-qleets", Namespace: ns, Labels: map[string]string{"team": "edge"}},
		Data: map[string]string{"keep": "me"}}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, mine, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, cl.SupportServices().Delete(cptest.Wait(t, time.Minute), ss.ID, client.DeleteOptions{Wait: true}))
	got, err := cs.NetworkingV1().IngressClasses().Get(ctx, api.IngressClassName, metav1.GetOptions{})
	require.NoError(t, err, "their IngressClass is still there")
	require.Equal(t, "example.com/their-controller", got.Spec.Controller)
	require.Equal(t, map[string]string{"team": "edge"}, got.Labels, "unlabelled, unchanged")

	deps, err = cs.AppsV1().Deployments(ns).List(ctx, sel)
	require.NoError(t, err)
	require.Empty(t, deps.Items, "the Deployment it made is gone")
	svcs, err := cs.CoreV1().Services(ns).List(ctx, sel)
	require.NoError(t, err)
	require.Empty(t, svcs.Items, "the LoadBalancer Service it made is gone")
	kept, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, mine.Name, metav1.GetOptions{})
	require.NoError(t, err, "the ConfigMap someone put in its namespace is still there")
	require.Equal(t, map[string]string{"keep": "me"}, kept.Data)
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "a namespace that holds someone else's object stays")
	require.Nil(t, nsObj.DeletionTimestamp)
}

// TestGatewaySupportServicesInstallBesideTheApp: a gateway installs its support services as soon as its
// instance is placed, and its route as soon as the app is applied, not once the app is Ready, so that the
// layers come up side by side; the gateway is Ready only with its app, and says that it waits for it.
func TestGatewaySupportServicesInstallBesideTheApp(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("beside"), kubesimtest.WithRegion("eu-west"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: 500 * time.Millisecond, DriftInterval: time.Minute})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "beside", sim.Kubeconfig)

	// A CPU request no node can meet: the instance is placed, its pods stay Pending, it is not Ready.
	def := webDefinition(t, cl, "slow", 1, "500")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "slow"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "slow"}, Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{"slow.example.test"}}})
	require.NoError(t, err)

	await.True(t, 2*time.Minute, func() bool {
		on := supportServicesOn(t, cl, rt.ID)
		for _, typ := range []string{api.SupportIngress, api.SupportCertManager} {
			if len(on[typ]) != 1 || on[typ][0].Status.Phase != api.PhaseReady {
				return false
			}
		}
		return true
	}, "ingress and cert-manager Ready while the app is not")
	got, err := cl.WorkloadInstances().Get(ctx, inst.ID)
	require.NoError(t, err)
	require.False(t, api.Reconciled(got.Generation, &got.Status.Status), "the instance is still not Ready: its pods cannot be scheduled")
	var g *api.Gateway
	await.True(t, 30*time.Second, func() bool {
		g, err = cl.Gateways().Get(ctx, gw.ID)
		require.NoError(t, err)
		return strings.Contains(g.Status.Message, `workload_instance "slow"`)
	}, "the gateway says it waits for the app")
	require.NotEqual(t, api.PhaseReady, g.Status.Phase)
	// The route goes in beside the app's rollout: the Ingress gets its address and the certificate is
	// issued while the pods still cannot be scheduled.
	await.True(t, time.Minute, func() bool {
		ing, err := cs.NetworkingV1().Ingresses("slow").Get(ctx, "slow", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(t, err)
		return len(ing.Status.LoadBalancer.Ingress) > 0
	}, "the Ingress has an address before the app is Ready")
	got, err = cl.WorkloadInstances().Get(ctx, inst.ID)
	require.NoError(t, err)
	require.False(t, api.Reconciled(got.Generation, &got.Status.Status), "the instance is still not Ready")
	g, err = cl.Gateways().Get(ctx, gw.ID)
	require.NoError(t, err)
	require.NotEqual(t, api.PhaseReady, g.Status.Phase, "the gateway is not Ready before its app")

	// The app fits once its request is lowered; the gateway routes to it without another poke.
	d, err := cl.WorkloadDefinitions().Get(ctx, def.ID)
	require.NoError(t, err)
	d.Spec.Containers[0].Resources = nil
	_, err = cl.WorkloadDefinitions().Update(ctx, d)
	require.NoError(t, err)
	g, err = cl.Gateways().WaitReconciled(cptest.Wait(t, 2*time.Minute), gw.ID)
	require.NoError(t, err)
	require.Equal(t, "https://slow.example.test/", g.Status.URL)
	require.NotEmpty(t, g.Status.Runtimes[0].Address)
}
