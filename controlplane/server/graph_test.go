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

// TestGraphRootedAtAnAppShowsAllItNeeds: the graph of an app holds everything it needs, by every
// reference field of every kind: its secret (which names it), its database and where that runs, its
// gateway (attached to it) with the support services and domain name the gateway uses, the runtimes and
// the profile they came from. Its root cause is a used instance placed where the app is not.
func TestGraphRootedAtAnAppShowsAllItNeeds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	prof, err := e.admin.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "eu"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west"}}})
	require.NoError(t, err)
	rtEU, err := e.ctrl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "eu-1",
		Owners: []api.ObjectRef{{Kind: api.KindRuntimeProfile, ID: prof.ID}}},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: "eu-west"}})
	require.NoError(t, err)
	rtUS, err := e.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "us-1"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: "us-east"}})
	require.NoError(t, err)
	for _, rt := range []*api.KubernetesRuntime{rtEU, rtUS} {
		rt.Status.Phase, rt.Status.ObservedGeneration = api.PhaseReady, rt.Generation
		_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, rt.Status)
		require.NoError(t, err)
	}
	def, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	rpc, err := e.admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "rpc"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rtUS.ID}})
	require.NoError(t, err)
	app, err := e.admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"}},
			Uses: []api.Use{{InstanceID: rpc.ID, EnvPrefix: "RPC"}}}})
	require.NoError(t, err)
	sec, err := e.admin.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "app-keys"},
		Spec: api.SecretSpec{InstanceIDs: []string{app.ID}, Values: map[string]string{"KEY": "v"}}})
	require.NoError(t, err)
	db, err := e.admin.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "orders"}, Spec: api.DatabaseSpec{InstanceID: app.ID}})
	require.NoError(t, err)
	db.Status.Runtimes = []api.DataRuntimeStatus{{RuntimeID: rtEU.ID, Runtime: rtEU.Name, Phase: api.PhaseReady}}
	_, err = e.ctrl.Databases().UpdateStatus(ctx, db.ID, 0, db.Status)
	require.NoError(t, err)
	dn, err := e.admin.DomainNames().Create(ctx, &api.DomainName{Meta: api.Meta{Name: "example"}, Spec: api.DomainNameSpec{Zone: "example.com"}})
	require.NoError(t, err)
	gw, err := e.admin.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "app"},
		Spec: api.GatewaySpec{InstanceID: app.ID, Hosts: []string{"app.example.com"}}})
	require.NoError(t, err)
	ss, err := e.ctrl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-eu-1",
		Owners: []api.ObjectRef{{Kind: api.KindGateway, ID: gw.ID}}},
		Spec: api.SupportServiceSpec{RuntimeID: rtEU.ID, Type: api.SupportIngress}})
	require.NoError(t, err)
	gw.Status.SupportServices = []api.ObjectRef{{Kind: api.KindSupportService, ID: ss.ID, Name: ss.Name}}
	gw.Status.DomainNames = []api.ObjectRef{{Kind: api.KindDomainName, ID: dn.ID, Name: dn.Name}}
	gw.Status.Runtimes = []api.GatewayRuntimeStatus{{RuntimeID: rtEU.ID, Runtime: rtEU.Name}}
	_, err = e.ctrl.Gateways().UpdateStatus(ctx, gw.ID, 0, gw.Status)
	require.NoError(t, err)
	// rpc runs in us-east only; app, placed in eu-west, waits on it there.
	rpc.Status.Placements = []api.PlacementStatus{{RuntimeID: rtUS.ID, Runtime: rtUS.Name, Phase: api.PhaseReady}}
	rpc.Status.Phase, rpc.Status.ObservedGeneration = api.PhaseReady, rpc.Generation
	_, err = e.ctrl.WorkloadInstances().UpdateStatus(ctx, rpc.ID, 0, rpc.Status)
	require.NoError(t, err)
	app.Status.Placements = []api.PlacementStatus{{RuntimeID: rtEU.ID, Runtime: rtEU.Name, Phase: api.PhasePending}}
	app.Status.Dependencies = []api.ObjectRef{{Kind: api.KindSecret, ID: sec.ID, Name: sec.Name}}
	app.Status.Phase = api.PhaseReconciling
	app.Status.SetCondition(api.Condition{Type: "Ready", Status: api.ConditionFalse, Reason: "UsedInstanceNotPlaced",
		WaitingOn: `workload_instance "rpc"`, Message: `waiting for workload_instance "rpc" (not placed on kubernetes_runtime "eu-1")`})
	_, err = e.ctrl.WorkloadInstances().UpdateStatus(ctx, app.ID, 0, app.Status)
	require.NoError(t, err)

	g, err := e.viewer.Graph(ctx, "workload_instance/app")
	require.NoError(t, err)

	t.Run("every reference field is an edge, whichever way it points", func(t *testing.T) {
		for _, want := range []api.GraphEdge{
			{From: app.ID, To: sec.ID, Type: api.EdgeReference, Why: "secret spec.instance_ids[0]"},
			{From: app.ID, To: db.ID, Type: api.EdgeReference, Why: "database spec.instance_id"},
			{From: db.ID, To: rtEU.ID, Type: api.EdgePlacement, Why: "status.runtimes[0].runtime_id"},
			{From: gw.ID, To: app.ID, Type: api.EdgeReference, Why: "spec.instance_id", Attached: true},
			{From: gw.ID, To: ss.ID, Type: api.EdgePlacement, Why: "status.support_services[0]"},
			{From: gw.ID, To: dn.ID, Type: api.EdgePlacement, Why: "status.domain_names[0]"},
			{From: gw.ID, To: rtEU.ID, Type: api.EdgePlacement, Why: "status.runtimes[0].runtime_id"},
			{From: ss.ID, To: rtEU.ID, Type: api.EdgeReference, Why: "spec.runtime_id"},
			{From: rtEU.ID, To: prof.ID, Type: api.EdgeOwner, Why: "owners"},
		} {
			require.Contains(t, g.Edges, want)
		}
	})

	t.Run("what the app needs reaches the support service, the domain name and the profile", func(t *testing.T) {
		needed := map[string]bool{}
		var walk func(id string)
		walk = func(id string) {
			for _, e := range g.Needs(id) {
				if o := e.Other(id); !needed[o] {
					needed[o] = true
					walk(o)
				}
			}
		}
		walk(app.ID)
		for _, id := range []string{def.ID, rpc.ID, sec.ID, db.ID, gw.ID, ss.ID, dn.ID, rtEU.ID, rtUS.ID, prof.ID} {
			require.True(t, needed[id], "%s is not among what the app needs", g.Node(id))
		}
	})

	t.Run("the root cause is the used instance, placed where the app is not", func(t *testing.T) {
		chain := g.RootCause(app.ID)
		require.Len(t, chain, 2)
		require.Equal(t, rpc.ID, chain[1].ID)
		missing := g.MissingPlacements(app.ID, rpc.ID)
		require.Len(t, missing, 1)
		require.Equal(t, rtEU.ID, missing[0].ID)
	})
}
