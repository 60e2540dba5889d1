package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

func TestGraph(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	prof, err := e.admin.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west"}}})
	require.NoError(t, err)
	// A runtime provisioned from the profile (the controller role creates it, owned by the profile).
	rt, err := e.ctrl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "default-eu-west",
		Owners: []api.ObjectRef{{Kind: api.KindRuntimeProfile, ID: prof.ID}}},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: "eu-west"}})
	require.NoError(t, err)
	def, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	inst, err := e.admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"}}}})
	require.NoError(t, err)
	other, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "unrelated"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)

	// The controller places the instance on the runtime and says it waits for it.
	inst.Status.Placements = []api.PlacementStatus{{RuntimeID: rt.ID, Runtime: rt.Name, Region: "eu-west", Phase: api.PhasePending}}
	inst.Status.Phase = api.PhaseReconciling
	inst.Status.SetCondition(api.Condition{Type: "Ready", Status: api.ConditionFalse, Reason: "KubernetesRuntimeNotReady",
		WaitingOn: `kubernetes_runtime "default-eu-west"`, Message: "waiting"})
	_, err = e.ctrl.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, inst.Status)
	require.NoError(t, err)
	def.Status.Phase, def.Status.ObservedGeneration = api.PhaseReady, def.Generation
	_, err = e.ctrl.WorkloadDefinitions().UpdateStatus(ctx, def.ID, 0, def.Status)
	require.NoError(t, err)
	prof.Status.Phase, prof.Status.ObservedGeneration = api.PhaseReady, prof.Generation
	_, err = e.ctrl.RuntimeProfiles().UpdateStatus(ctx, prof.ID, 0, prof.Status)
	require.NoError(t, err)

	t.Run("the whole graph", func(t *testing.T) {
		g, err := e.viewer.Graph(ctx, "")
		require.NoError(t, err)
		require.Len(t, g.Nodes, 5)
		require.ElementsMatch(t, []api.GraphEdge{
			{From: inst.ID, To: def.ID, Type: api.EdgeReference, Why: "spec.definition_id"},
			{From: inst.ID, To: rt.ID, Type: api.EdgePlacement, Why: "status.placements[0].runtime_id"},
			{From: rt.ID, To: prof.ID, Type: api.EdgeOwner, Why: "owners"},
		}, g.Edges)
	})

	t.Run("rooted at the instance: what it depends on; rooted at the profile: what depends on it", func(t *testing.T) {
		g, err := e.viewer.Graph(ctx, "workload_instance/web")
		require.NoError(t, err)
		require.Equal(t, inst.ID, g.Root)
		var names []string
		for _, n := range g.Nodes {
			names = append(names, n.Kind+"/"+n.Name)
		}
		require.Equal(t, []string{"kubernetes_runtime/default-eu-west", "runtime_profile/default", "workload_definition/web", "workload_instance/web"}, names)
		require.Nil(t, g.Node(other.ID))
		n := g.Node(inst.ID)
		require.Equal(t, `kubernetes_runtime "default-eu-west"`, n.WaitingOn)
		require.WithinDuration(t, time.Now(), *n.WaitingSince, time.Minute)

		// The root cause: the instance waits on the runtime (Pending), whose profile is Ready.
		chain := g.RootCause(inst.ID)
		require.Len(t, chain, 2)
		require.Equal(t, "default-eu-west", chain[1].Name)

		byProfile, err := e.viewer.Graph(ctx, "runtime_profiles/"+prof.ID)
		require.NoError(t, err)
		require.Len(t, byProfile.Nodes, 3, "the profile, the runtime provisioned from it, and the instance placed there (not that instance's other providers)")
	})

	t.Run("a bad root names the parameter", func(t *testing.T) {
		for _, root := range []string{"nonsense", "gizmo/x", "workload_instance/"} {
			_, err := e.viewer.Graph(ctx, root)
			require.True(t, api.IsInvalid(err), "%s: %v", root, err)
			var ae *api.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "root", ae.Field)
		}
		_, err := e.viewer.Graph(ctx, "workload_instance/missing")
		require.True(t, api.IsNotFound(err), "got %v", err)
		code, _ := e.raw(t, "none", http.MethodGet, "/v1/graph", "", nil)
		require.Equal(t, http.StatusUnauthorized, code)
	})
}
