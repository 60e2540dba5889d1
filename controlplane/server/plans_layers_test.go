package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// TestPlanAssume: what other resources of one Terraform run create is assumed, so that one resource's
// preview sees it, and only that resource's own effects are reported.
func TestPlanAssume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	profile := &api.RuntimeProfile{Meta: api.Meta{Name: "default"}, Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}}}
	def := webDefinition("web")
	def.ID = "def"
	inst := &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: "def", Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}}}}

	t.Run("an instance sees the profile created in the same run, and reports the runtimes it provisions, not the profile's create", func(t *testing.T) {
		e := setup(t)
		before := snapshot(t, e.store)
		alone, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadInstance, inst)},
			Assume: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadDefinition, def)}})
		require.NoError(t, err)
		require.Empty(t, actionsOf(alone, api.ActionProvision), "without the profile nothing serves the regions")
		require.Len(t, alone.Warnings, 2, "one per region no runtime and no profile serves")

		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadInstance, inst)},
			Assume: []api.PlanChange{change(t, api.PlanCreate, api.KindRuntimeProfile, profile), change(t, api.PlanCreate, api.KindWorkloadDefinition, def)}})
		require.NoError(t, err)
		require.Empty(t, res.Warnings)
		require.Equal(t, []string{
			`will provision kubernetes_runtime "default-eu-west" in eu-west from runtime_profile "default"`,
			`will provision kubernetes_runtime "default-us-east" in us-east from runtime_profile "default"`,
		}, res.Summary())
		for _, a := range res.Actions {
			require.NotEqual(t, api.KindRuntimeProfile, a.Kind, "an assumed create is not reported: %s", a)
			require.NotEqual(t, api.KindWorkloadDefinition, a.Kind, "an assumed create is not reported: %s", a)
		}
		require.Equal(t, before, snapshot(t, e.store), "a plan writes nothing")
	})

	t.Run("a gateway reports the support services it installs on the runtimes an assumed instance is provisioned, not the provisioning", func(t *testing.T) {
		e := setup(t)
		inst := *inst
		inst.ID = "inst"
		res, err := e.dev.Plan(ctx, api.PlanRequest{
			Changes: []api.PlanChange{change(t, api.PlanCreate, api.KindGateway, &api.Gateway{Meta: api.Meta{Name: "web"},
				Spec: api.GatewaySpec{InstanceID: "inst", Hosts: []string{"web.example.com"}}})},
			Assume: []api.PlanChange{
				change(t, api.PlanCreate, api.KindWorkloadInstance, &inst),
				change(t, api.PlanCreate, api.KindRuntimeProfile, profile),
				change(t, api.PlanCreate, api.KindWorkloadDefinition, def),
			}})
		require.NoError(t, err)
		require.Equal(t, []string{
			`will install support_service ingress, cert-manager on kubernetes_runtime "default-eu-west"`,
			`will install support_service ingress, cert-manager on kubernetes_runtime "default-us-east"`,
		}, res.Summary())
		require.Equal(t, `create gateway "web": requested`, res.Actions[0].String())
	})

	t.Run("an invalid assumed change is named under assume", func(t *testing.T) {
		e := setup(t)
		bad := webDefinition("bad")
		bad.Spec.Containers[0].Image = "Not An Image"
		_, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadInstance, inst)},
			Assume: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadDefinition, bad)}})
		require.ErrorContains(t, err, "assume[0].spec.containers[0].image")
	})
}

// usesChain creates n instances on one runtime, each using the next: chain[0] uses chain[1], and so on.
func usesChain(t *testing.T, e *env, n int) []*api.WorkloadInstance {
	t.Helper()
	ctx := context.Background()
	rt, def, _ := e.world(t, "chain")
	chain := make([]*api.WorkloadInstance, n)
	for i := n - 1; i >= 0; i-- {
		spec := api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}
		if i < n-1 {
			spec.Uses = []api.Use{{InstanceID: chain[i+1].ID, EnvPrefix: "UP"}}
		}
		inst, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: fmt.Sprintf("link-%02d", i)}, Spec: spec})
		require.NoError(t, err)
		chain[i] = inst
	}
	return chain
}

// TestPlanDeleteTruth: a delete that the real delete refuses is refused by the preview, with the same
// error, and one it cascades is previewed as the cascade it is.
func TestPlanDeleteTruth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a uses chain 20 deep: the preview of a cascade refuses it as the real delete does, and writes nothing", func(t *testing.T) {
		e := setup(t)
		chain := usesChain(t, e, 20)
		last := chain[len(chain)-1]
		before := snapshot(t, e.store)
		_, planErr := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindWorkloadInstance, ID: last.ID, Cascade: true}}})
		require.True(t, api.IsConflict(planErr), "got %v", planErr)
		require.ErrorContains(t, planErr, "cascading delete deeper than 16 levels")
		require.Equal(t, before, snapshot(t, e.store), "a plan writes nothing")

		realErr := e.dev.WorkloadInstances().Delete(ctx, last.ID, client.DeleteOptions{Cascade: true})
		require.True(t, api.IsConflict(realErr), "got %v", realErr)
		require.ErrorContains(t, realErr, "cascading delete deeper than 16 levels")
		require.Equal(t, before, snapshot(t, e.store), "the refused delete wrote nothing either")
	})

	t.Run("a uses chain 20 deep: without cascade both refuse, naming the same dependent", func(t *testing.T) {
		e := setup(t)
		chain := usesChain(t, e, 20)
		last := chain[len(chain)-1]
		_, planErr := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindWorkloadInstance, ID: last.ID}}})
		realErr := e.dev.WorkloadInstances().Delete(ctx, last.ID, client.DeleteOptions{})
		var pe, re *api.Error
		require.ErrorAs(t, planErr, &pe)
		require.ErrorAs(t, realErr, &re)
		require.Equal(t, re.Code, pe.Code)
		require.Equal(t, re.Dependents, pe.Dependents)
		require.Equal(t, chain[len(chain)-2].ID, pe.Dependents[0].ID)
	})

	t.Run("a uses chain 16 deep cascades: every link is deleted, consumers first", func(t *testing.T) {
		e := setup(t)
		chain := usesChain(t, e, 16)
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindWorkloadInstance, ID: chain[15].ID, Cascade: true}}})
		require.NoError(t, err)
		deletes := actionsOf(res, api.ActionDelete)
		require.Len(t, deletes, 16)
		for i, a := range deletes {
			require.Equal(t, chain[i].ID, a.ID, "consumers first: %s", a)
			require.Equal(t, i == 15, a.Requested)
		}
	})

	t.Run("a cycle of uses is refused at write time, and by the preview of that write", func(t *testing.T) {
		e := setup(t)
		chain := usesChain(t, e, 3)
		closing := *chain[2]
		closing.Spec.Uses = []api.Use{{InstanceID: chain[0].ID, EnvPrefix: "UP"}}
		_, planErr := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanUpdate, api.KindWorkloadInstance, &closing)}})
		require.ErrorContains(t, planErr, "changes[0].spec.uses[0].instance_id")
		require.ErrorContains(t, planErr, "makes a cycle of uses")
		_, realErr := e.dev.WorkloadInstances().Update(ctx, &closing)
		require.ErrorContains(t, realErr, "spec.uses[0].instance_id")
		require.ErrorContains(t, realErr, "makes a cycle of uses")
	})
}

// TestPlanKeeps: the preview of a delete says what outlives it.
func TestPlanKeeps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a runtime provisioned for a deleted instance runs on until its profile's reclaim_after", func(t *testing.T) {
		for _, reclaim := range []string{"30m", ""} {
			e := setup(t)
			prof, err := e.admin.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
				Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west"}, ReclaimAfter: reclaim}})
			require.NoError(t, err)
			rt := localRuntime("default-eu-west")
			rt.Spec.Region = "eu-west"
			rt.Owners = []api.ObjectRef{{Kind: api.KindRuntimeProfile, ID: prof.ID}}
			made, err := e.ctrl.KubernetesRuntimes().Create(ctx, rt)
			require.NoError(t, err)
			def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
			require.NoError(t, err)
			inst, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"}}}})
			require.NoError(t, err)
			ist := inst.Status
			ist.Placements = []api.PlacementStatus{{RuntimeID: made.ID, Runtime: made.Name, Region: "eu-west", Phase: api.PhaseReady}}
			_, err = e.ctrl.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, ist)
			require.NoError(t, err)

			res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindWorkloadInstance, Name: "web"}}})
			require.NoError(t, err)
			keeps := actionsOf(res, api.ActionKeep)
			require.Len(t, keeps, 1, "reclaim_after %q", reclaim)
			require.Equal(t, made.ID, keeps[0].ID)
			want := "the profile has no reclaim_after: it keeps running until it is deleted, or its profile is"
			if reclaim != "" {
				want = "it keeps running until it has been idle for the profile's reclaim_after (30m)"
			}
			require.Contains(t, keeps[0].Reason, want)
			require.Contains(t, res.Summary()[0], `will keep kubernetes_runtime "default-eu-west": provisioned from runtime_profile "default"`)

			// Deleting the profile too: the runtime is garbage, not kept.
			res, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
				{Op: api.PlanDelete, Kind: api.KindWorkloadInstance, Name: "web"}, {Op: api.PlanDelete, Kind: api.KindRuntimeProfile, Name: "default"}}})
			require.NoError(t, err)
			require.Empty(t, actionsOf(res, api.ActionKeep))
		}
	})

	t.Run("a database deleted with retain keeps its data; one without retain keeps nothing", func(t *testing.T) {
		e := setup(t)
		for _, retain := range []bool{true, false} {
			name := fmt.Sprintf("db-%v", retain)
			db, err := e.dev.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: name}, Spec: api.DatabaseSpec{Retain: retain}})
			require.NoError(t, err)
			res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindDatabase, ID: db.ID}}})
			require.NoError(t, err)
			keeps := actionsOf(res, api.ActionKeep)
			if !retain {
				require.Empty(t, keeps)
				continue
			}
			require.Len(t, keeps, 1)
			require.Contains(t, keeps[0].String(), fmt.Sprintf(`keep database %q: deleted with retain: its volume and credentials stay`, name))
		}
	})
}
