package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestAutoscaledInstanceGetsMetrics: an instance of an autoscaled definition, on a runtime with no
// metrics API, installs metrics-server there (owned by it) before its HorizontalPodAutoscaler, so that
// the autoscaler reads metrics from its first sync on and warns of none (the demo's quickstart once
// repeated FailedGetResourceMetric). kubesim plays the metrics API, pods and nodes.
func TestAutoscaledInstanceGetsMetrics(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("autoscaled"), kubesimtest.WithNodes(1))
	// No resync pass within the test: the instance waits on the metrics-server it owns, and must learn
	// of its readiness from the notification its owner gets (a pass once found it after 30 s in the demo).
	_, cl := cptest.Start(t, app.Config{ResyncInterval: 10 * time.Minute})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "autoscaled", sim.Kubeconfig)
	require.Empty(t, supportServicesOn(t, cl, rt.ID)[api.SupportMetricsServer])

	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "scaled"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27",
			Resources: &api.Resources{Requests: api.ResourceList{CPU: "100m"}}}},
			Autoscaling: &api.Autoscaling{MinReplicas: 1, MaxReplicas: 3, TargetCPUPercent: 50}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "scaled"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	start := time.Now()
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), inst.ID)
	require.NoError(t, err)
	t.Logf("the instance was Ready %s after its create", time.Since(start).Round(time.Millisecond))

	// The instance asked for metrics-server, which is Ready, owned by it.
	ms := supportServicesOn(t, cl, rt.ID)[api.SupportMetricsServer]
	require.Len(t, ms, 1)
	require.Equal(t, api.PhaseReady, ms[0].Status.Phase)
	require.Contains(t, ms[0].Owners, api.ObjectRef{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: inst.Name})

	// The autoscaler reads the pods' metrics.
	created := time.Now()
	await.True(t, 2*time.Minute, func() bool {
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers("scaled").Get(ctx, "scaled", metav1.GetOptions{})
		require.NoError(t, err)
		m := hpa.Status.CurrentMetrics
		return len(m) > 0 && m[0].Resource != nil && m[0].Resource.Current.AverageUtilization != nil
	}, "the autoscaler reads pod metrics")
	t.Logf("the autoscaler read metrics %s after the instance was Ready", time.Since(created).Round(time.Millisecond))
	// no signal: a warning that does not come has no event to wait for; three of kubesim's 5 s
	// autoscaler syncs pass.
	time.Sleep(15 * time.Second)
	evs, err := cs.CoreV1().Events("scaled").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler"})
	require.NoError(t, err)
	for _, e := range evs.Items {
		require.NotEqual(t, "Warning", e.Type, "the autoscaler warned: %s: %s", e.Reason, e.Message)
	}

	// Nodes have metrics too (kubectl top nodes).
	nodes, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
	require.NoError(t, err)
	require.Contains(t, string(nodes), `"kind":"NodeMetricsList"`)
	require.Contains(t, string(nodes), "autoscaled-node-0")
}
