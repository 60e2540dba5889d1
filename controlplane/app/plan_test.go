package app_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// TestPlanThenApply is the quickstart's shape (a profile, then a definition, an instance placed in two
// regions and a gateway with TLS): the plan lists the two clusters and the support services before
// anything is written, and the apply then makes exactly those, no more, no fewer.
func TestPlanThenApply(t *testing.T) {
	t.Parallel()
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: 2 * time.Second, RuntimeRecheck: time.Second})
	ctx := context.Background()
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 1}})
	require.NoError(t, err)

	def := &api.WorkloadDefinition{Meta: api.Meta{Name: "hello"}, Spec: api.WorkloadDefinitionSpec{
		Containers: []api.Container{{Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}}}
	inst := &api.WorkloadInstance{Meta: api.Meta{Name: "hello"},
		Spec: api.WorkloadInstanceSpec{Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}}}}
	gw := &api.Gateway{Meta: api.Meta{Name: "hello"}, Spec: api.GatewaySpec{Hosts: []string{"hello.example.test"}}}

	// The plan: the definition and instance get placeholder ids that the instance and gateway reference.
	def.ID, inst.Spec.DefinitionID, inst.ID, gw.Spec.InstanceID = "def", "def", "inst", "inst"
	var changes []api.PlanChange
	for _, ch := range []func() (api.PlanChange, error){
		func() (api.PlanChange, error) {
			return api.ChangeOf(api.PlanCreate, api.KindWorkloadDefinition, def)
		},
		func() (api.PlanChange, error) {
			return api.ChangeOf(api.PlanCreate, api.KindWorkloadInstance, inst)
		},
		func() (api.PlanChange, error) { return api.ChangeOf(api.PlanCreate, api.KindGateway, gw) },
	} {
		c, err := ch()
		require.NoError(t, err)
		changes = append(changes, c)
	}
	plan, err := cl.Plan(ctx, api.PlanRequest{Changes: changes})
	require.NoError(t, err)
	var planned, plannedServices, plannedPlacements, plannedUses []string
	for _, a := range plan.Actions {
		switch {
		case a.Action == api.ActionProvision:
			planned = append(planned, a.Name+" in "+a.Region+" from "+a.Profile)
		case a.Action == api.ActionInstall:
			plannedServices = append(plannedServices, a.Name+": "+a.SupportType+" on "+a.Runtime)
			plannedUses = append(plannedUses, a.Name)
		case a.Action == api.ActionDepend && a.Provider.Kind == api.KindKubernetesRuntime:
			plannedPlacements = append(plannedPlacements, a.Region+"/"+a.Runtime)
		}
	}
	sort.Strings(planned)
	sort.Strings(plannedServices)
	sort.Strings(plannedPlacements)
	sort.Strings(plannedUses)
	t.Logf("plan: %d actions; runtimes %v; support services %v", len(plan.Actions), planned, plannedServices)
	require.Equal(t, []string{"default-eu-west in eu-west from default", "default-us-east in us-east from default"}, planned,
		"the plan lists the two clusters")
	require.Len(t, plannedServices, 4, "ingress and cert-manager on each cluster")
	all, err := cl.KubernetesRuntimes().List(ctx, client.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, all.Items, "the plan provisioned nothing")

	// The apply, in the order Terraform would take.
	def.ID, inst.ID = "", ""
	createdDef, err := cl.WorkloadDefinitions().Create(ctx, def)
	require.NoError(t, err)
	inst.Spec.DefinitionID = createdDef.ID
	createdInst, err := cl.WorkloadInstances().Create(ctx, inst)
	require.NoError(t, err)
	gw.Spec.InstanceID = createdInst.ID
	createdGW, err := cl.Gateways().Create(ctx, gw)
	require.NoError(t, err)
	start := time.Now()
	readyGW, err := cl.Gateways().WaitReconciled(cptest.Wait(t, 4*time.Minute), createdGW.ID)
	require.NoError(t, err)
	t.Logf("apply to Ready (two clusters, four support services): %s", time.Since(start).Round(time.Millisecond))

	var made, madeServices []string
	names := map[string]string{}
	for rt, err := range cl.KubernetesRuntimes().All(ctx, client.ListOptions{}) {
		require.NoError(t, err)
		made = append(made, rt.Name+" in "+rt.Spec.Region+" from "+rt.Labels[api.LabelProfile])
		names[rt.ID] = rt.Name
	}
	for ss, err := range cl.SupportServices().All(ctx, client.ListOptions{}) {
		require.NoError(t, err)
		madeServices = append(madeServices, ss.Name+": "+ss.Spec.Type+" on "+names[ss.Spec.RuntimeID])
	}
	sort.Strings(made)
	sort.Strings(madeServices)
	require.Equal(t, planned, made, "the controllers provisioned exactly the planned runtimes")
	require.Equal(t, plannedServices, madeServices, "and installed exactly the planned support services")

	readyInst, err := cl.WorkloadInstances().Get(ctx, createdInst.ID)
	require.NoError(t, err)
	var placements, uses []string
	for _, p := range readyInst.Status.Placements {
		placements = append(placements, p.Region+"/"+p.Runtime)
	}
	for _, r := range readyGW.Status.SupportServices {
		uses = append(uses, r.Name)
	}
	sort.Strings(placements)
	sort.Strings(uses)
	require.Equal(t, plannedPlacements, placements, "the instance runs where the plan placed it")
	require.Equal(t, plannedUses, uses, "the gateway uses the support services the plan installed for it")
}
