package workload_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// env is a real API server on SQLite, one kubesim cluster registered as a Ready kubeconfig runtime, and
// the reconcilers under test (called directly; the runtime wiring is tested elsewhere).
type env struct {
	admin, ctrl *client.Client
	rt          *api.KubernetesRuntime
	cl          *kube.Cluster
	inst        *workload.InstanceReconciler
	def         *workload.DefinitionReconciler
}

func setup(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	svc := apitest.Start(t)
	e := &env{admin: svc.Client(t, server.RoleAdmin), ctrl: svc.Client(t, server.RoleController)}

	sim := kubesimtest.Start(t)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rt, err := e.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{
		Meta: api.Meta{Name: "sim"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: string(raw)},
	})
	require.NoError(t, err)
	e.rt, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, rt.ResourceVersion, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: rt.Generation}, Version: "v1.31.4",
	})
	require.NoError(t, err)

	conn := kube.NewConnector(kube.ConnectorConfig{})
	e.inst = &workload.InstanceReconciler{Client: e.ctrl, Connector: conn, Renderer: &render.Renderer{HelmCacheDir: t.TempDir(), ChartDir: os.TempDir()}, PollInterval: 200 * time.Millisecond}
	e.def = &workload.DefinitionReconciler{Client: e.ctrl, Renderer: e.inst.Renderer}
	full, err := e.ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
	require.NoError(t, err)
	e.cl, err = conn.Connect(ctx, full)
	require.NoError(t, err)
	return e
}

func (e *env) definition(t *testing.T, name string, spec api.WorkloadDefinitionSpec) *api.WorkloadDefinition {
	t.Helper()
	d, err := e.admin.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: name}, Spec: spec})
	require.NoError(t, err)
	return d
}

func (e *env) instance(t *testing.T, name string, def *api.WorkloadDefinition, mod func(*api.WorkloadInstanceSpec)) *api.WorkloadInstance {
	t.Helper()
	spec := api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: e.rt.ID}
	if mod != nil {
		mod(&spec)
	}
	i, err := e.admin.WorkloadInstances().Create(context.Background(), &api.WorkloadInstance{Meta: api.Meta{Name: name}, Spec: spec})
	require.NoError(t, err)
	got, err := e.ctrl.WorkloadInstances().Get(context.Background(), i.ID)
	require.NoError(t, err)
	return got
}

// reconcileReady reconciles inst, as the runtime would, until it is done (Ready) or the deadline passes.
func (e *env) reconcileReady(t *testing.T, inst *api.WorkloadInstance) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		res, err := e.inst.Reconcile(context.Background(), inst)
		require.NoError(t, err)
		if res.RequeueAfter == 0 {
			return
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "instance not ready", "%s: %s", inst.Name, inst.Status.Message)
		}
		// no signal: the test plays the runtime and honours the reconciler's own RequeueAfter
		time.Sleep(res.RequeueAfter)
	}
}

// finalizeGone finalizes inst, as the runtime would (Finalize never waits for objects to go: it asks to
// be called again), until it is done or the deadline passes, and returns the first pass's result.
func (e *env) finalizeGone(t *testing.T, inst *api.WorkloadInstance) reconcile.Result {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var first *reconcile.Result
	for {
		res, err := e.inst.Finalize(context.Background(), inst)
		require.NoError(t, err)
		if first == nil {
			first = &res
		}
		if res.RequeueAfter == 0 {
			require.Zero(t, res)
			return *first
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "instance not cleaned up", "%s: %s", inst.Name, inst.Status.Message)
		}
		// no signal: the test plays the runtime and honours the reconciler's own RequeueAfter
		time.Sleep(res.RequeueAfter)
	}
}

func webSpec() api.WorkloadDefinitionSpec {
	three := int32(3)
	return api.WorkloadDefinitionSpec{
		Replicas: &three,
		Containers: []api.Container{{
			Name: "app", Image: "nginx:1.27",
			Ports:     []api.ContainerPort{{ContainerPort: 8080}},
			Resources: &api.Resources{Requests: api.ResourceList{CPU: "50m", Memory: "32Mi"}},
		}},
	}
}

func TestInstanceReconciler(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	t.Run("containers deploy and become ready with pods running", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "web", webSpec())
		inst := e.instance(t, "web-a", def, nil)
		e.reconcileReady(t, inst)

		require.Equal(t, "web-a", inst.Status.Namespace)
		require.EqualValues(t, 3, inst.Status.Replicas)
		require.EqualValues(t, 3, inst.Status.ReadyReplicas)
		require.EqualValues(t, 3, inst.Status.AvailableReplicas)
		var kinds []string
		for _, o := range inst.Status.Objects {
			require.True(t, o.Ready, "%+v", o)
			kinds = append(kinds, o.Kind+"/"+o.Name)
		}
		require.Equal(t, []string{"Namespace/web-a", "Service/web-a", "Deployment/web-a"}, kinds)
		pods, err := e.cl.Clientset.CoreV1().Pods("web-a").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, pods.Items, 3)
		for _, p := range pods.Items {
			require.Equal(t, "Running", string(p.Status.Phase))
		}
	})

	t.Run("a replica override is applied", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "web-override", webSpec())
		two := int32(2)
		inst := e.instance(t, "web-two", def, func(s *api.WorkloadInstanceSpec) { s.Replicas = &two })
		e.reconcileReady(t, inst)
		dep, err := e.cl.Clientset.AppsV1().Deployments("web-two").Get(ctx, "web-two", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 2, *dep.Spec.Replicas)
		require.EqualValues(t, 2, inst.Status.AvailableReplicas)
	})

	t.Run("autoscaling creates the HPA with the right bounds", func(t *testing.T) {
		t.Parallel()
		spec := webSpec()
		spec.Autoscaling = &api.Autoscaling{MinReplicas: 2, MaxReplicas: 5, TargetCPUPercent: 70}
		// The autoscaler needs the metrics API: the test plays a Ready metrics-server support service
		// (controlplane/app's TestAutoscaledInstanceGetsMetrics installs a real one).
		ms, err := e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "metrics"},
			Spec: api.SupportServiceSpec{RuntimeID: e.rt.ID, Type: api.SupportMetricsServer}})
		require.NoError(t, err)
		_, err = e.ctrl.SupportServices().UpdateStatus(ctx, ms.ID, ms.ResourceVersion, api.SupportServiceStatus{
			Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: ms.Generation}})
		require.NoError(t, err)
		def := e.definition(t, "web-hpa", spec)
		inst := e.instance(t, "web-hpa", def, nil)
		e.reconcileReady(t, inst)
		hpa, err := e.cl.Clientset.AutoscalingV2().HorizontalPodAutoscalers("web-hpa").Get(ctx, "web-hpa", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 2, *hpa.Spec.MinReplicas)
		require.EqualValues(t, 5, hpa.Spec.MaxReplicas)
		require.EqualValues(t, 70, *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization)
	})

	t.Run("manifests deploy and become ready", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "raw", api.WorkloadDefinitionSpec{Manifests: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: prod}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: svc}
spec:
  replicas: 2
  selector: {matchLabels: {app: svc}}
  template:
    metadata: {labels: {app: svc}}
    spec:
      containers: [{name: svc, image: "nginx:1.27"}]
`})
		inst := e.instance(t, "raw-a", def, nil)
		e.reconcileReady(t, inst)
		require.EqualValues(t, 2, inst.Status.AvailableReplicas)
		_, err := e.cl.Clientset.CoreV1().ConfigMaps("raw-a").Get(ctx, "settings", metav1.GetOptions{})
		require.NoError(t, err)
	})

	t.Run("a local helm chart deploys and becomes ready", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "demo")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: demo\nversion: 0.1.0\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("replicas: 1\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "deploy.yaml"), []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: "{{ .Release.Name }}-demo"}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers: [{name: demo, image: "nginx:1.27"}]
`), 0o644))
		def := e.definition(t, "chart", api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: dir, Values: "replicas: 2\n"}})
		res, err := e.def.Reconcile(ctx, def)
		require.NoError(t, err, "the chart renders")
		require.Zero(t, res)
		inst := e.instance(t, "chart-a", def, nil)
		e.reconcileReady(t, inst)
		dep, err := e.cl.Clientset.AppsV1().Deployments("chart-a").Get(ctx, "chart-a-demo", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 2, dep.Status.AvailableReplicas)
	})

	t.Run("an unknown kind fails terminally with the cluster's error", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "widget", api.WorkloadDefinitionSpec{Manifests: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: foo}\n"})
		inst := e.instance(t, "widget-a", def, nil)
		_, err := e.inst.Reconcile(ctx, inst)
		require.Error(t, err)
		require.True(t, reconcile.IsTerminal(err), "%v", err)
		require.Contains(t, err.Error(), `Widget/foo: no matches for kind "Widget"`)
		require.Len(t, inst.Status.Objects, 1, "the namespace that was applied is recorded: %+v", inst.Status.Objects)
	})

	t.Run("an unschedulable instance says why", func(t *testing.T) {
		t.Parallel()
		spec := webSpec()
		spec.Containers[0].Resources = &api.Resources{Requests: api.ResourceList{CPU: "1000"}}
		def := e.definition(t, "huge", spec)
		inst := e.instance(t, "huge-a", def, nil)
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(inst.Status.Message, "Insufficient cpu") {
			res, err := e.inst.Reconcile(ctx, inst)
			require.NoError(t, err)
			require.NotZero(t, res.RequeueAfter, "not ready means requeue")
			require.True(t, time.Now().Before(deadline), "message: %s", inst.Status.Message)
			// no signal: the test plays the runtime and honours the reconciler's own RequeueAfter
			time.Sleep(res.RequeueAfter)
		}
		require.Contains(t, inst.Status.Message, `Deployment "huge-a" is not ready`)
		require.Contains(t, inst.Status.Message, "Unschedulable: 0/")
	})

	t.Run("drift is corrected and recorded", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "drifty", webSpec())
		inst := e.instance(t, "drifty-a", def, nil)
		e.reconcileReady(t, inst)

		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale, err := e.cl.Clientset.AppsV1().Deployments("drifty-a").GetScale(ctx, "drifty-a", metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = 1
			_, err = e.cl.Clientset.AppsV1().Deployments("drifty-a").UpdateScale(ctx, "drifty-a", scale, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err)
		require.NoError(t, e.cl.Clientset.CoreV1().Services("drifty-a").Delete(ctx, "drifty-a", metav1.DeleteOptions{}))

		e.reconcileReady(t, inst)
		dep, err := e.cl.Clientset.AppsV1().Deployments("drifty-a").Get(ctx, "drifty-a", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 3, *dep.Spec.Replicas)
		_, err = e.cl.Clientset.CoreV1().Services("drifty-a").Get(ctx, "drifty-a", metav1.GetOptions{})
		require.NoError(t, err)
		var cond *api.Condition
		for i := range inst.Status.Conditions {
			if inst.Status.Conditions[i].Type == workload.ConditionDriftCorrected {
				cond = &inst.Status.Conditions[i]
			}
		}
		require.NotNil(t, cond)
		require.Contains(t, cond.Message, `Deployment "drifty-a": restored spec.replicas (1 -> 3)`)
		require.Contains(t, cond.Message, `Service "drifty-a": recreated`)
	})

	t.Run("a definition update rolls out and prunes what it dropped", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "evolving", webSpec())
		inst := e.instance(t, "evolving-a", def, nil)
		e.reconcileReady(t, inst)

		spec := webSpec()
		spec.Containers[0].Ports = nil
		spec.Containers[0].Image = "nginx:1.28"
		def.Spec = spec
		_, err := e.admin.WorkloadDefinitions().Update(ctx, def)
		require.NoError(t, err)
		e.reconcileReady(t, inst)

		dep, err := e.cl.Clientset.AppsV1().Deployments("evolving-a").Get(ctx, "evolving-a", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "nginx:1.28", dep.Spec.Template.Spec.Containers[0].Image)
		_, err = e.cl.Clientset.CoreV1().Services("evolving-a").Get(ctx, "evolving-a", metav1.GetOptions{})
		require.Error(t, err, "the service was pruned")
		for _, o := range inst.Status.Objects {
			require.NotEqual(t, "Service", o.Kind)
		}
	})

	t.Run("an instance in an existing namespace fails on a foreign object until it adopts it, and never deletes the namespace", func(t *testing.T) {
		t.Parallel()
		_, err := e.cl.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-data"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = e.cl.Clientset.CoreV1().ConfigMaps("team-data").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "by hand"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = e.cl.Clientset.CoreV1().ConfigMaps("team-data").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep-me"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		def := e.definition(t, "settings", api.WorkloadDefinitionSpec{Manifests: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: prod}\n"})
		inst := e.instance(t, "settings-a", def, func(s *api.WorkloadInstanceSpec) { s.Namespace = "team-data" })
		_, err = e.inst.Reconcile(ctx, inst)
		require.Error(t, err)
		require.True(t, reconcile.IsTerminal(err), "a foreign object fails the instance: %v", err)
		require.Contains(t, err.Error(), "ConfigMap/team-data/settings already exists and was not created by QleetOS")
		require.Contains(t, err.Error(), "adopt = true")
		cm, err := e.cl.Clientset.CoreV1().ConfigMaps("team-data").Get(ctx, "settings", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "by hand", cm.Data["mode"], "not overwritten")

		inst.Spec.Adopt = true
		e.reconcileReady(t, inst)
		cm, err = e.cl.Clientset.CoreV1().ConfigMaps("team-data").Get(ctx, "settings", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "prod", cm.Data["mode"], "adopted")

		e.finalizeGone(t, inst)
		_, err = e.cl.Clientset.CoreV1().ConfigMaps("team-data").Get(ctx, "settings", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the adopted object went with the instance: %v", err)
		ns, err := e.cl.Clientset.CoreV1().Namespaces().Get(ctx, "team-data", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, ns.DeletionTimestamp, "the namespace QleetOS did not create stays")
		_, err = e.cl.Clientset.CoreV1().ConfigMaps("team-data").Get(ctx, "keep-me", metav1.GetOptions{})
		require.NoError(t, err, "data put there by hand stays")
	})

	t.Run("finalize deletes everything the instance applied", func(t *testing.T) {
		t.Parallel()
		def := e.definition(t, "doomed", webSpec())
		inst := e.instance(t, "doomed-a", def, nil)
		e.reconcileReady(t, inst)
		first := e.finalizeGone(t, inst)
		// A namespace goes only after the namespace controller's 5s grace: the first pass asked for it to
		// be deleted and returned at once, rather than holding the worker until it was gone.
		require.NotZero(t, first.RequeueAfter, "the first pass does not wait for the namespace to go")
		owned, err := kube.Owned(ctx, e.cl, kube.Owner{InstanceID: inst.ID})
		require.NoError(t, err)
		require.Empty(t, owned)
		_, err = e.cl.Clientset.CoreV1().Namespaces().Get(ctx, "doomed-a", metav1.GetOptions{})
		require.Error(t, err, "the namespace is gone")
	})
}

func TestInstanceWaitsForRuntime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := &env{}
	e.admin = apitest.Start(t).Client(t, server.RoleAdmin)
	e.ctrl = e.admin
	var err error
	e.rt, err = e.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "us-east"}, Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
	require.NoError(t, err)
	e.inst = &workload.InstanceReconciler{Client: e.admin, Connector: kube.NewConnector(kube.ConnectorConfig{})}

	def := e.definition(t, "web", webSpec())
	inst := e.instance(t, "web-a", def, nil)
	_, err = e.inst.Reconcile(ctx, inst)
	var we *reconcile.WaitError
	require.True(t, errors.As(err, &we), "%v", err)
	require.Equal(t, `kubernetes_runtime "us-east"`, we.On)
	require.Equal(t, "KubernetesRuntimeNotReady", we.Reason)
	require.Equal(t, string(api.PhasePending), we.State)
	require.Equal(t, reconcile.OnNotification, we.After, "no timer: the runtime's status change notifies the instance")

	// A Failed runtime fails its instances with its reason instead of leaving them waiting in silence.
	_, err = e.admin.KubernetesRuntimes().UpdateStatus(ctx, e.rt.ID, 0, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseFailed, ObservedGeneration: e.rt.Generation, Message: "no kubesim binary"}})
	require.NoError(t, err)
	_, err = e.inst.Reconcile(ctx, inst)
	require.True(t, reconcile.IsTerminal(err), "%v", err)
	require.Contains(t, err.Error(), `kubernetes_runtime "us-east" failed: no kubesim binary`)
}

func TestDefinitionReconciler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, store.Config{URL: filepath.Join(t.TempDir(), "qleet.db"), Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	srv, err := server.New(server.Config{Store: st, Logger: quiet, Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tok, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, st.CreateToken(ctx, &store.Token{Hash: server.HashToken(tok), Name: "admin", Role: server.RoleAdmin}))
	admin, err := client.New(hs.URL, client.WithToken(tok))
	require.NoError(t, err)
	rec := &workload.DefinitionReconciler{Client: admin, Renderer: &render.Renderer{ChartDir: os.TempDir()}}
	rt, err := admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"}, Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
	require.NoError(t, err)

	t.Run("counts the definition's instances", func(t *testing.T) {
		def, err := admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "counted"}, Spec: webSpec()})
		require.NoError(t, err)
		other, err := admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "other"}, Spec: webSpec()})
		require.NoError(t, err)
		for i, d := range []*api.WorkloadDefinition{def, def, other} {
			_, err := admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{
				Meta: api.Meta{Name: "counted-" + string(rune('a'+i))},
				Spec: api.WorkloadInstanceSpec{DefinitionID: d.ID, RuntimeID: rt.ID},
			})
			require.NoError(t, err)
		}
		// A first generation has nothing to roll out: new instances render it from the start.
		_, err = rec.Reconcile(ctx, def)
		require.NoError(t, err)
		require.Equal(t, 2, def.Status.Instances)
	})

	t.Run("a new generation waits until every instance that rendered an older one has rolled it out", func(t *testing.T) {
		def, err := admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "rolled"}, Spec: webSpec()})
		require.NoError(t, err)
		ready := func(inst *api.WorkloadInstance, defGen int64) {
			t.Helper()
			_, err := admin.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, api.WorkloadInstanceStatus{
				Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: inst.Generation}, DefinitionGeneration: defGen})
			require.NoError(t, err)
		}
		var insts []*api.WorkloadInstance
		for _, name := range []string{"rolled-a", "rolled-b", "rolled-new"} {
			inst, err := admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name},
				Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
			require.NoError(t, err)
			insts = append(insts, inst)
		}
		ready(insts[0], 1)
		ready(insts[1], 1)
		_, err = admin.WorkloadDefinitions().UpdateStatus(ctx, def.ID, 0, api.WorkloadDefinitionStatus{
			Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 1}})
		require.NoError(t, err)
		changed, err := admin.WorkloadDefinitions().Patch(ctx, def.ID, map[string]any{"spec": map[string]any{"replicas": 2}})
		require.NoError(t, err)
		require.Equal(t, int64(2), changed.Generation)

		// Generation 2: "rolled-a" still runs generation 1, so the definition waits on it. "rolled-new"
		// never rendered anything and is not waited on.
		_, err = rec.Reconcile(ctx, changed)
		var we *reconcile.WaitError
		require.ErrorAs(t, err, &we)
		require.Equal(t, `workload_instance "rolled-a"`, we.On)
		require.Contains(t, we.State, "rolling out generation 2")
		require.Equal(t, "RollingOut", we.Reason)
		require.Equal(t, 3, changed.Status.Instances)

		ready(insts[0], 2)
		_, err = rec.Reconcile(ctx, changed)
		require.ErrorAs(t, err, &we)
		require.Equal(t, `workload_instance "rolled-b"`, we.On, "the next one that runs generation 1")

		ready(insts[1], 2)
		_, err = rec.Reconcile(ctx, changed)
		require.NoError(t, err, "every instance that ran generation 1 runs generation 2")

		// Once Ready at its generation the definition has nothing to roll out: an instance that is busy
		// with a change of its own does not hold it.
		_, err = admin.WorkloadInstances().UpdateStatus(ctx, insts[0].ID, 0, api.WorkloadInstanceStatus{
			Status: api.Status{Phase: api.PhaseReconciling, ObservedGeneration: insts[0].Generation}, DefinitionGeneration: 2})
		require.NoError(t, err)
		changed.Status.Phase, changed.Status.ObservedGeneration = api.PhaseReady, 2
		_, err = rec.Reconcile(ctx, changed)
		require.NoError(t, err)
		require.Equal(t, 3, changed.Status.Instances)
	})

	t.Run("a chart that fails to render fails terminally", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "broken")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: broken\nversion: 0.1.0\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "x.yaml"), []byte("kind: {{ .Values.nope.deeper }}\n"), 0o644))
		def, err := admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "broken"}, Spec: api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Chart: dir}}})
		require.NoError(t, err)
		_, err = rec.Reconcile(ctx, def)
		require.True(t, reconcile.IsTerminal(err), "%v", err)
		require.Contains(t, err.Error(), "x.yaml")
	})
}
