package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// TestPlanPreviewsHomesAndFollowers: the preview of an app placed in two regions shows what the
// controllers will do for its dependencies: the RPC node it uses with placement with_consumers is
// placed on both of its runtimes, and its database, with no home yet, gets one in the app's first region.
func TestPlanPreviewsHomesAndFollowers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	profile := &api.RuntimeProfile{Meta: api.Meta{Name: "default"}, Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}}}
	def := webDefinition("web")
	def.ID = "def"
	rpc := &api.WorkloadInstance{Meta: api.Meta{ID: "rpc", Name: "rpc"}, Spec: api.WorkloadInstanceSpec{DefinitionID: "def"}}
	db := &api.Database{Meta: api.Meta{ID: "db", Name: "orders"}}
	app := &api.WorkloadInstance{Meta: api.Meta{Name: "app"}, Spec: api.WorkloadInstanceSpec{DefinitionID: "def",
		Placement: &api.Placement{Regions: []string{"us-east", "eu-west"}},
		Uses:      []api.Use{{InstanceID: "rpc", EnvPrefix: "RPC", Placement: api.UseWithConsumers}}, Databases: []string{"db"}}}
	res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadInstance, app)},
		Assume: []api.PlanChange{change(t, api.PlanCreate, api.KindRuntimeProfile, profile), change(t, api.PlanCreate, api.KindWorkloadDefinition, def),
			change(t, api.PlanCreate, api.KindWorkloadInstance, rpc), change(t, api.PlanCreate, api.KindDatabase, db)}})
	require.NoError(t, err)
	placed := map[string][]string{}
	for _, a := range actionsOf(res, api.ActionDepend) {
		if a.Provider != nil && a.Provider.Kind == api.KindKubernetesRuntime {
			placed[a.Kind+" "+a.Name] = append(placed[a.Kind+" "+a.Name], a.Provider.Name)
		}
	}
	require.ElementsMatch(t, []string{"default-us-east", "default-eu-west"}, placed["workload_instance rpc"], "the node follows the app: %v", res.Actions)
	require.Equal(t, []string{"default-us-east"}, placed["database orders"], "the database's home is the app's first region: %v", res.Actions)
}
