package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
)

func TestGraph(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	prof, err := e.admin.RuntimeProfiles().Create(ctx, &client.RuntimeProfile{Meta: client.Meta{Name: "default"},
		Spec: client.RuntimeProfileSpec{Provider: client.ProviderLocal, Regions: []string{"eu-west"}}})
	require.NoError(t, err)
	// A runtime provisioned from the profile (the controller role creates it, owned by the profile).
	rt, err := e.ctrl.KubernetesRuntimes().Create(ctx, &client.KubernetesRuntime{Meta: client.Meta{Name: "default-eu-west",
		Owners: []client.ObjectRef{{Kind: client.KindRuntimeProfile, ID: prof.ID}}},
		Spec: client.KubernetesRuntimeSpec{Provider: client.ProviderLocal, Region: "eu-west"}})
	require.NoError(t, err)
	def, err := e.admin.WorkloadDefinitions().Create(ctx, &client.WorkloadDefinition{Meta: client.Meta{Name: "web"},
		Spec: client.WorkloadDefinitionSpec{Containers: []client.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	inst, err := e.admin.WorkloadInstances().Create(ctx, &client.WorkloadInstance{Meta: client.Meta{Name: "web"},
		Spec: client.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &client.Placement{Regions: []string{"eu-west"}}}})
	require.NoError(t, err)
	other, err := e.admin.WorkloadDefinitions().Create(ctx, &client.WorkloadDefinition{Meta: client.Meta{Name: "unrelated"},
		Spec: client.WorkloadDefinitionSpec{Containers: []client.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)

	// The controller places the instance on the runtime and says it waits for it.
	inst.Status.Placements = []client.PlacementStatus{{RuntimeID: rt.ID, Runtime: rt.Name, Region: "eu-west", Phase: client.PhasePending}}
	inst.Status.Phase = client.PhaseReconciling
	inst.Status.SetCondition(client.Condition{Type: "Ready", Status: client.ConditionFalse, Reason: "KubernetesRuntimeNotReady",
		WaitingOn: `kubernetes_runtime "default-eu-west"`, Message: "waiting"})
	_, err = e.ctrl.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, inst.Status)
	require.NoError(t, err)
	def.Status.Phase, def.Status.ObservedGeneration = client.PhaseReady, def.Generation
	_, err = e.ctrl.WorkloadDefinitions().UpdateStatus(ctx, def.ID, 0, def.Status)
	require.NoError(t, err)
	prof.Status.Phase, prof.Status.ObservedGeneration = client.PhaseReady, prof.Generation
	_, err = e.ctrl.RuntimeProfiles().UpdateStatus(ctx, prof.ID, 0, prof.Status)
	require.NoError(t, err)

	t.Run("the whole graph", func(t *testing.T) {
		g, err := e.viewer.Graph(ctx, "")
		require.NoError(t, err)
		require.Len(t, g.Nodes, 5)
		require.ElementsMatch(t, []client.GraphEdge{
			{From: inst.ID, To: def.ID, Type: client.EdgeReference, Why: "spec.definition_id"},
			{From: inst.ID, To: rt.ID, Type: client.EdgePlacement, Why: "status.placements[0].runtime_id"},
			{From: rt.ID, To: prof.ID, Type: client.EdgeOwner, Why: "owners"},
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
			require.True(t, client.IsInvalid(err), "%s: %v", root, err)
			var ae *client.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "root", ae.Field)
		}
		_, err := e.viewer.Graph(ctx, "workload_instance/missing")
		require.True(t, client.IsNotFound(err), "got %v", err)
		code, _ := e.raw(t, "none", http.MethodGet, "/v1/graph", "", nil)
		require.Equal(t, http.StatusUnauthorized, code)
	})
}
