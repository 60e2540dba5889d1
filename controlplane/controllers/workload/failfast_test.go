package workload_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// readyKubeconfigRuntime registers a kubesim cluster as a kubeconfig runtime and waits until it is Ready.
func readyKubeconfigRuntime(t *testing.T, cl *client.Client, name, kubeconfig string) *api.KubernetesRuntime {
	t.Helper()
	rt, err := cl.KubernetesRuntimes().Create(context.Background(), &api.KubernetesRuntime{Meta: api.Meta{Name: name},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: cptest.Kubeconfig(t, kubeconfig)}})
	require.NoError(t, err)
	rt, err = cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, time.Minute), rt.ID)
	require.NoError(t, err)
	return rt
}

// TestUnschedulableStallsLongBeforeTheCreateTimeout runs the control plane with its defaults: a pod that
// no node can take stalls the rollout with reason Unschedulable within about a minute, so a wait (the
// provider's create, 10m by default) ends with the scheduler's reason, not at its timeout.
func TestUnschedulableStallsLongBeforeTheCreateTimeout(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, cptest.Config()) // default progress deadline and unschedulable grace
	ctx := context.Background()
	rt := readyKubeconfigRuntime(t, cl, "small", sim.Kubeconfig)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "huge"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.27",
			Resources: &api.Resources{Requests: api.ResourceList{CPU: "1000"}}}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "huge"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)

	start := time.Now()
	// Bounded well below the provider's 10m create timeout (and the 5m progress deadline).
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 3*time.Minute), inst.ID)
	var fe *client.FailedError
	require.ErrorAs(t, err, &fe, "the wait ends with the stall, not at its deadline")
	require.NotNil(t, fe.Stalled)
	require.Equal(t, "Unschedulable", fe.Stalled.Reason)
	require.Contains(t, err.Error(), "Insufficient cpu", "the scheduler's message")
	t.Logf("Stalled (Unschedulable) %s after create: %s", time.Since(start).Round(time.Second), err)
}

// TestDeletingWhenTheClusterDoesNotAnswerSaysSoAtOnce stops an instance's cluster: its deletion says at
// once (not after the cleanup grace) what blocks it and how to orphan, and orphaning ends it.
func TestDeletingWhenTheClusterDoesNotAnswerSaysSoAtOnce(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, cptest.Config()) // default cleanup grace: 2m
	ctx := context.Background()
	rt := readyKubeconfigRuntime(t, cl, "doomed", sim.Kubeconfig)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	require.NoError(t, err)

	require.NoError(t, sim.Stop(cptest.Wait(t, time.Minute))) // the cluster is gone
	require.NoError(t, cl.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{}))

	deleted := time.Now()
	var got *api.WorkloadInstance
	await.True(t, 30*time.Second, func() bool {
		got, err = cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		return strings.Contains(got.Status.Message, "--orphan")
	}, "the deletion does not say what blocks it within 30s")
	t.Logf("blocked deletion explained %s after the delete: %s", time.Since(deleted).Round(100*time.Millisecond), got.Status.Message)
	require.Contains(t, got.Status.Message, `kubernetes_runtime "doomed"`)
	require.Contains(t, got.Status.Message, "qleet delete instance web --orphan")
	var ready *api.Condition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == "Ready" {
			ready = &got.Status.Conditions[i]
		}
	}
	require.NotNil(t, ready)
	require.Equal(t, workload.ReasonRuntimeUnreachable, ready.Reason)

	// A cascading delete of the runtime stops at once with the same explanation, instead of waiting out
	// its 5-minute cascade timeout and saying "retry later".
	err = cl.KubernetesRuntimes().Delete(cptest.Wait(t, time.Minute), rt.ID, client.DeleteOptions{Cascade: true})
	require.True(t, api.IsConflict(err), "a cascade blocked by a dead cluster answers 409 at once: %v", err)
	require.Contains(t, err.Error(), "qleet delete instance web --orphan")

	require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), inst.ID, client.DeleteOptions{Orphan: true, Wait: true}))
}
