package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestSimulateComputeReportsReadyWithoutTouchingTheCluster: with SimulateCompute, an instance is Ready at
// its generation with the rendered objects listed, its definition's generation recorded, and nothing
// created in the runtime's cluster; an update is reconciled again, a placement is refused, and a delete
// completes at once.
func TestSimulateComputeReportsReadyWithoutTouchingTheCluster(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	cs := clientset(t, cluster.Kubeconfig)
	_, cl := cptest.Start(t, app.Config{SimulateCompute: true})
	ctx := context.Background()
	rt := readyRuntime(t, cl, "sim", cluster.Kubeconfig)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Replicas: ptr(int32(2)), Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)

	insts := cl.WorkloadInstances()
	inst, err := insts.Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web-1"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID, Namespace: "sim-ns"}})
	require.NoError(t, err)
	inst, err = insts.WaitReconciled(cptest.Wait(t, 30*time.Second), inst.ID)
	require.NoError(t, err)
	require.Equal(t, api.PhaseReady, inst.Status.Phase)
	require.Equal(t, def.Generation, inst.Status.DefinitionGeneration)
	require.Equal(t, int32(2), inst.Status.ReadyReplicas)
	require.Len(t, inst.Status.Placements, 1)
	require.Equal(t, rt.ID, inst.Status.Placements[0].RuntimeID)
	kinds := map[string]bool{}
	for _, o := range inst.Status.Objects {
		require.True(t, o.Ready, "%+v", o)
		kinds[o.Kind] = true
	}
	require.True(t, kinds["Namespace"] && kinds["Deployment"], "objects %+v", inst.Status.Objects)

	// Nothing reached the cluster.
	_, err = cs.CoreV1().Namespaces().Get(ctx, "sim-ns", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "namespace sim-ns exists in the cluster: %v", err)

	// An update is reconciled at its new generation.
	upd, err := insts.Patch(ctx, inst.ID, map[string]any{"spec": map[string]any{"env": []api.EnvVar{{Name: "A", Value: "1"}}}})
	require.NoError(t, err)
	require.Greater(t, upd.Generation, inst.Generation)
	got, err := insts.WaitReconciled(cptest.Wait(t, 30*time.Second), inst.ID)
	require.NoError(t, err)
	require.Equal(t, upd.Generation, got.Status.ObservedGeneration)

	// A placement is refused, naming why.
	placed, err := insts.Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web-placed"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"local"}}}})
	require.NoError(t, err)
	_, err = insts.WaitReconciled(cptest.Wait(t, 30*time.Second), placed.ID)
	require.True(t, client.IsFailed(err), "%v", err)
	require.ErrorContains(t, err, "pinned to a runtime")

	// Deletion completes at once: nothing was applied.
	require.NoError(t, insts.Delete(cptest.Wait(t, 30*time.Second), inst.ID, client.DeleteOptions{Wait: true}))
	_, err = insts.Get(ctx, inst.ID)
	require.True(t, api.IsNotFound(err), "%v", err)
}
