package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// change builds a plan change for a typed object.
func change[S any, T any](t testing.TB, op, kind string, o *api.Object[S, T]) api.PlanChange {
	t.Helper()
	ch, err := api.ChangeOf(op, kind, o)
	require.NoError(t, err)
	return ch
}

// snapshot is every object's resource version and the pending outbox: what a write would change.
func snapshot(t testing.TB, st store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, ki := range api.Kinds() {
		page, err := st.List(ctx, &store.ListParams{Kind: ki.Kind, Limit: 1000})
		require.NoError(t, err)
		for _, o := range page.Objects {
			fmt.Fprintf(&b, "%s/%s rv=%d gen=%d deleting=%v\n", o.Kind, o.Name, o.ResourceVersion, o.Generation, o.DeletionRequestedAt != nil)
		}
	}
	out, err := st.PendingOutbox(ctx, 10000)
	require.NoError(t, err)
	fmt.Fprintf(&b, "outbox=%d\n", len(out))
	return b.String()
}

// profile creates a local runtime profile serving regions.
func (e *env) profile(t testing.TB, name string, regions ...string) *api.RuntimeProfile {
	t.Helper()
	p, err := e.admin.RuntimeProfiles().Create(context.Background(), &api.RuntimeProfile{Meta: api.Meta{Name: name},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: regions}})
	require.NoError(t, err)
	return p
}

// ready marks a runtime reconciled, as its controller would.
func (e *env) ready(t testing.TB, rt *api.KubernetesRuntime) {
	t.Helper()
	st := rt.Status
	st.Phase, st.ObservedGeneration = api.PhaseReady, rt.Generation
	_, err := e.ctrl.KubernetesRuntimes().UpdateStatus(context.Background(), rt.ID, 0, st)
	require.NoError(t, err)
}

func actionsOf(res *api.PlanResult, action string) []api.PlanAction {
	var out []api.PlanAction
	for _, a := range res.Actions {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a two-region instance with a gateway provisions a runtime per region from the profile and installs ingress and cert-manager on each, writing nothing", func(t *testing.T) {
		e := setup(t)
		e.profile(t, "default", "eu-west", "us-east")
		before := snapshot(t, e.store)

		def := webDefinition("web")
		def.ID = "def"
		inst := &api.WorkloadInstance{Meta: api.Meta{ID: "inst", Name: "web"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: "def", Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}}}}
		gw := &api.Gateway{Meta: api.Meta{Name: "web"}, Spec: api.GatewaySpec{InstanceID: "inst", Hosts: []string{"web.example.com"}}}
		// Out of order on purpose: the plan orders creates from providers to consumers.
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindGateway, gw),
			change(t, api.PlanCreate, api.KindWorkloadInstance, inst),
			change(t, api.PlanCreate, api.KindWorkloadDefinition, def),
		}})
		require.NoError(t, err)

		var lines []string
		for _, a := range res.Actions {
			if a.Action != api.ActionDepend {
				lines = append(lines, a.String())
			}
		}
		require.Equal(t, []string{
			`create workload_definition "web": requested`,
			`create workload_instance "web": requested`,
			`create gateway "web": requested`,
			`provision kubernetes_runtime "default-eu-west" in eu-west from runtime_profile "default": workload_instance "web"'s placement needs a runtime in eu-west and none matches`,
			`provision kubernetes_runtime "default-us-east" in us-east from runtime_profile "default": workload_instance "web"'s placement needs a runtime in us-east and none matches`,
			`install support_service "ingress-default-eu-west" (ingress) on kubernetes_runtime "default-eu-west": gateway "web" needs ingress on kubernetes_runtime "default-eu-west", which has none`,
			`install support_service "cert-manager-default-eu-west" (cert-manager) on kubernetes_runtime "default-eu-west": gateway "web" needs cert-manager on kubernetes_runtime "default-eu-west", which has none`,
			`install support_service "ingress-default-us-east" (ingress) on kubernetes_runtime "default-us-east": gateway "web" needs ingress on kubernetes_runtime "default-us-east", which has none`,
			`install support_service "cert-manager-default-us-east" (cert-manager) on kubernetes_runtime "default-us-east": gateway "web" needs cert-manager on kubernetes_runtime "default-us-east", which has none`,
		}, lines)
		for _, a := range res.Actions {
			require.Equal(t, a.Action == api.ActionCreate, a.Requested, a.String())
		}
		depends := actionsOf(res, api.ActionDepend)
		require.Contains(t, depends, api.PlanAction{Action: api.ActionDepend, Kind: api.KindWorkloadInstance, ID: "inst", Name: "web",
			Provider: &api.ObjectRef{Kind: api.KindWorkloadDefinition, ID: "def", Name: "web"}, Cause: &api.ObjectRef{Kind: api.KindWorkloadInstance, ID: "inst", Name: "web"},
			Reason: "spec.definition_id references it"})
		require.NotNil(t, res.Graph.Node("planned:kubernetes_runtime/default-eu-west"))
		require.Len(t, res.Graph.Providers("inst"), 3, "the definition and the two runtimes")
		require.Len(t, res.Graph.Providers("planned:gateway/web"), 5, "the instance and four support services")

		require.Equal(t, before, snapshot(t, e.store), "a plan writes nothing")
	})

	t.Run("a Ready runtime in a region is used, and its support services too", func(t *testing.T) {
		e := setup(t)
		e.profile(t, "default", "eu-west", "us-east")
		rt := localRuntime("eu")
		rt.Spec.Region = "eu-west"
		eu, err := e.dev.KubernetesRuntimes().Create(ctx, rt)
		require.NoError(t, err)
		e.ready(t, eu)
		_, err = e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-eu"}, Spec: api.SupportServiceSpec{RuntimeID: eu.ID, Type: api.SupportIngress}})
		require.NoError(t, err)
		def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
		require.NoError(t, err)
		off := false
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{ID: "inst", Name: "web"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}}}}),
			change(t, api.PlanCreate, api.KindGateway, &api.Gateway{Meta: api.Meta{Name: "web"}, Spec: api.GatewaySpec{InstanceID: "inst", TLS: &off}}),
		}})
		require.NoError(t, err)
		prov := actionsOf(res, api.ActionProvision)
		require.Len(t, prov, 1)
		require.Equal(t, "us-east", prov[0].Region)
		inst := actionsOf(res, api.ActionInstall)
		require.Len(t, inst, 1, "eu has ingress already; only us-east gets one")
		require.Equal(t, "default-us-east", inst[0].Runtime)
		require.Contains(t, res.Graph.Providers("planned:gateway/web"), api.GraphEdge{From: "planned:gateway/web", To: mustID(t, e, "ingress-eu"), Type: api.EdgePlacement, Why: "status.support_services"})
	})

	t.Run("an instance that gains a region gets a runtime there, and its gateway the support services it lacks there", func(t *testing.T) {
		e := setup(t)
		e.profile(t, "default", "eu-west", "us-east")
		rt := localRuntime("eu")
		rt.Spec.Region = "eu-west"
		eu, err := e.dev.KubernetesRuntimes().Create(ctx, rt)
		require.NoError(t, err)
		e.ready(t, eu)
		def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
		require.NoError(t, err)
		inst, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"}}}})
		require.NoError(t, err)
		ist := inst.Status
		ist.Placements = []api.PlacementStatus{{RuntimeID: eu.ID, Runtime: "eu", Region: "eu-west", Phase: api.PhaseReady}}
		_, err = e.ctrl.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, ist)
		require.NoError(t, err)
		off := false
		gw, err := e.dev.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "web"}, Spec: api.GatewaySpec{InstanceID: inst.ID, TLS: &off}})
		require.NoError(t, err)
		ss, err := e.ctrl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-eu",
			Owners: []api.ObjectRef{{Kind: api.KindGateway, ID: gw.ID}}}, Spec: api.SupportServiceSpec{RuntimeID: eu.ID, Type: api.SupportIngress}})
		require.NoError(t, err)
		gst := gw.Status
		gst.SupportServices = []api.ObjectRef{{Kind: api.KindSupportService, ID: ss.ID, Name: ss.Name}}
		_, err = e.ctrl.Gateways().UpdateStatus(ctx, gw.ID, 0, gst)
		require.NoError(t, err)

		inst.Spec.Placement.Regions = []string{"eu-west", "us-east"}
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanUpdate, api.KindWorkloadInstance, inst)}})
		require.NoError(t, err)
		require.Equal(t, []string{
			`will provision kubernetes_runtime "default-us-east" in us-east from runtime_profile "default"`,
			`will install support_service ingress on kubernetes_runtime "default-us-east"`,
		}, res.Summary())
		require.Equal(t, `update workload_instance "web": spec changes (generation 1 → 2)`, res.Actions[0].String())
	})

	t.Run("a create without a placeholder is referenced as planned:<kind>/<name>", func(t *testing.T) {
		e := setup(t)
		e.profile(t, "default", "eu-west")
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: "planned:workload_definition/web", Placement: &api.Placement{Regions: []string{"eu-west"}}}}),
			change(t, api.PlanCreate, api.KindWorkloadDefinition, webDefinition("web")),
		}})
		require.NoError(t, err)
		require.Equal(t, "planned:workload_definition/web", res.Actions[0].ID)
		require.Len(t, actionsOf(res, api.ActionProvision), 1)
	})

	t.Run("a region nothing serves is a warning", func(t *testing.T) {
		e := setup(t)
		def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
		require.NoError(t, err)
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"ap-south"}}}}),
		}})
		require.NoError(t, err)
		require.Empty(t, actionsOf(res, api.ActionProvision))
		require.Equal(t, []string{`workload_instance "web": no runtime in region "ap-south" matches, and no runtime_profile serves that region`}, res.Warnings)
	})

	t.Run("a reference known only after apply is accepted, and the placement still decided", func(t *testing.T) {
		e := setup(t)
		e.profile(t, "default", "eu-west")
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: api.PlanUnknownPrefix, Placement: &api.Placement{Regions: []string{"eu-west"}}}}),
		}})
		require.NoError(t, err)
		require.Equal(t, []string{`will provision kubernetes_runtime "default-eu-west" in eu-west from runtime_profile "default"`}, res.Summary())
	})

	t.Run("validation errors are the real write's, under changes[i]", func(t *testing.T) {
		e := setup(t)
		bad := webDefinition("web")
		bad.Spec.Containers[0].Image = "Not An Image"
		_, realErr := e.dev.WorkloadDefinitions().Create(ctx, bad)
		require.True(t, api.IsInvalid(realErr))
		before := snapshot(t, e.store)

		_, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadDefinition, webDefinition("ok")),
			change(t, api.PlanCreate, api.KindWorkloadDefinition, bad),
		}})
		require.True(t, api.IsInvalid(err), "%v", err)
		var ce, re *api.Error
		require.ErrorAs(t, err, &ce)
		require.ErrorAs(t, realErr, &re)
		require.Equal(t, "changes[1]."+re.Field, ce.Field)
		require.Equal(t, re.Fields[0].Message, ce.Fields[0].Message)
		require.Len(t, ce.Fields, 1)

		// An instance of the bad definition (by its placeholder) reports only its own errors.
		bad.ID = "bad"
		_, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadDefinition, bad),
			change(t, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: "bad", Namespace: "Bad_NS", Placement: &api.Placement{Regions: []string{"eu-west"}}}}),
		}})
		require.ErrorAs(t, err, &ce)
		var fields []string
		for _, f := range ce.Fields {
			fields = append(fields, f.Field)
		}
		require.Equal(t, []string{"changes[0].spec.containers[0].image", "changes[1].spec.namespace"}, fields)
		require.Equal(t, before, snapshot(t, e.store))

		code, body := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/plans", `{"changes":[{"op":"create","kind":"workload_definition","name":"x","spec":{"containerz":[]}}]}`, nil)
		require.Equal(t, http.StatusBadRequest, code)
		require.Equal(t, "changes[0].spec.containerz", apiErr(t, body).Field)

		_, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: "upsert", Kind: api.KindWorkloadDefinition, Name: "x"}}})
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "changes[0].op", ce.Field)

		_, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{Name: "web"}, Spec: api.WorkloadInstanceSpec{DefinitionID: "nope", RuntimeID: "nope"}}),
		}})
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "changes[0].spec.definition_id", ce.Field, "a reference to nothing, neither stored nor planned")
	})

	t.Run("a name taken answers 409 as the create would", func(t *testing.T) {
		e := setup(t)
		_, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
		require.NoError(t, err)
		_, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanCreate, api.KindWorkloadDefinition, webDefinition("web"))}})
		require.True(t, api.IsConflict(err), "%v", err)
	})

	t.Run("a delete of an object others depend on is refused with its dependents, unless they go too or it cascades", func(t *testing.T) {
		e := setup(t)
		rt, def, inst := e.world(t, "a")

		before := snapshot(t, e.store)
		realErr := e.dev.WorkloadDefinitions().Delete(ctx, def.ID, client.DeleteOptions{})
		require.Equal(t, before, snapshot(t, e.store), "the refused delete wrote nothing")
		var re *api.Error
		require.ErrorAs(t, realErr, &re)
		_, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindWorkloadDefinition, ID: def.ID}}})
		require.True(t, api.IsConflict(err), "%v", err)
		var ce *api.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: inst.Name}}, ce.Dependents)
		require.Equal(t, re.Dependents, ce.Dependents, "the dependents the real delete names")
		require.Equal(t, re.Code, ce.Code)

		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			{Op: api.PlanDelete, Kind: api.KindWorkloadDefinition, Name: def.Name},
			{Op: api.PlanDelete, Kind: api.KindWorkloadInstance, ID: inst.ID},
		}})
		require.NoError(t, err)
		require.Equal(t, []string{`delete workload_instance "a-inst": requested`, `delete workload_definition "a-def": requested`}, strs(res.Actions))

		res, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindKubernetesRuntime, ID: rt.ID, Cascade: true}}})
		require.NoError(t, err)
		require.Equal(t, []string{
			`delete workload_instance "a-inst": it depends on kubernetes_runtime "a-rt", which is deleted with cascade`,
			`delete kubernetes_runtime "a-rt": requested`,
		}, strs(res.Actions))
		require.False(t, res.Actions[0].Requested)
		require.True(t, res.Graph.Node(inst.ID).Deleting)
		require.Equal(t, before, snapshot(t, e.store), "nor did the plans")
	})

	t.Run("changing a definition, a secret or a database rolls the instances that use them", func(t *testing.T) {
		e := setup(t)
		_, def, inst := e.world(t, "a")
		def.Spec.Containers[0].Image = "nginx:1.28"
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanUpdate, api.KindWorkloadDefinition, def)}})
		require.NoError(t, err)
		require.Equal(t, []string{
			`update workload_definition "a-def": spec changes (generation 1 → 2)`,
			`roll workload_instance "a-inst": its workload_definition "a-def" changes (generation 1 → 2)`,
		}, strs(res.Actions))
		require.Equal(t, &api.ObjectRef{Kind: api.KindWorkloadDefinition, ID: def.ID, Name: def.Name}, res.Actions[1].Cause)

		res, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindSecret, &api.Secret{Meta: api.Meta{Name: "creds"}, Spec: api.SecretSpec{InstanceIDs: []string{inst.ID}, Values: map[string]string{"K": "v"}}}),
		}})
		require.NoError(t, err)
		require.Contains(t, strs(res.Actions), `roll workload_instance "a-inst": secret "creds" is created: its values are delivered into the pods`)

		res, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{
			change(t, api.PlanCreate, api.KindDatabase, &api.Database{Meta: api.Meta{Name: "db"}, Spec: api.DatabaseSpec{InstanceID: inst.ID}}),
		}})
		require.NoError(t, err)
		require.Contains(t, strs(res.Actions), `roll workload_instance "a-inst": database "db" is created: its connection details are injected into the pods`)

		res, err = e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanUpdate, api.KindWorkloadDefinition, webDefinitionWithID(def))}})
		require.NoError(t, err)
		require.Len(t, res.Actions, 2, "an update is compared with the stored spec")
	})

	t.Run("an unchanged update is no action", func(t *testing.T) {
		e := setup(t)
		_, def, _ := e.world(t, "a")
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{change(t, api.PlanUpdate, api.KindWorkloadDefinition, def)}})
		require.NoError(t, err)
		require.Empty(t, res.Actions)
	})

	t.Run("deleting the gateway that installed a support service removes it once nothing uses it", func(t *testing.T) {
		e := setup(t)
		rt, _, inst := e.world(t, "a")
		gw, err := e.dev.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "web"}, Spec: api.GatewaySpec{InstanceID: inst.ID}})
		require.NoError(t, err)
		ss, err := e.ctrl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-a-rt",
			Owners: []api.ObjectRef{{Kind: api.KindGateway, ID: gw.ID}}}, Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportIngress}})
		require.NoError(t, err)
		st := gw.Status
		st.SupportServices = []api.ObjectRef{{Kind: api.KindSupportService, ID: ss.ID, Name: ss.Name}}
		_, err = e.ctrl.Gateways().UpdateStatus(ctx, gw.ID, 0, st)
		require.NoError(t, err)

		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindGateway, ID: gw.ID}}})
		require.NoError(t, err)
		require.Equal(t, []string{
			`delete gateway "web": requested`,
			`remove support_service "ingress-a-rt" (ingress) on kubernetes_runtime "a-rt": installed for gateway "web", which is deleted, and used by nothing else: garbage-collected after its grace period`,
		}, strs(res.Actions))
	})

	t.Run("deleting a profile removes the runtimes it provisioned that nothing runs on", func(t *testing.T) {
		e := setup(t)
		prof := e.profile(t, "default", "eu-west")
		rt := localRuntime("default-eu-west")
		rt.Owners = []api.ObjectRef{{Kind: api.KindRuntimeProfile, ID: prof.ID}}
		_, err := e.ctrl.KubernetesRuntimes().Create(ctx, rt)
		require.NoError(t, err)
		res, err := e.dev.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindRuntimeProfile, Name: "default"}}})
		require.NoError(t, err)
		require.Equal(t, []string{
			`delete runtime_profile "default": requested`,
			`delete kubernetes_runtime "default-eu-west": made for runtime_profile "default", which is deleted, and used by nothing else: garbage-collected after its grace period`,
		}, strs(res.Actions))
	})

	t.Run("a runtime's garbage does not block its delete: it goes first, as the real delete takes it", func(t *testing.T) {
		e := setup(t)
		_, _, inst := e.world(t, "a")
		spare, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("spare"))
		require.NoError(t, err)
		gw, err := e.dev.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: "web"}, Spec: api.GatewaySpec{InstanceID: inst.ID}})
		require.NoError(t, err)
		_, err = e.ctrl.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "ingress-spare",
			Owners: []api.ObjectRef{{Kind: api.KindGateway, ID: gw.ID}}}, Spec: api.SupportServiceSpec{RuntimeID: spare.ID, Type: api.SupportIngress}})
		require.NoError(t, err)
		del := api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: api.KindKubernetesRuntime, ID: spare.ID}}}

		_, err = e.dev.Plan(ctx, del)
		require.True(t, api.IsConflict(err), "its owner, the gateway, is still there: %v", err)

		require.NoError(t, e.dev.Gateways().Delete(ctx, gw.ID, client.DeleteOptions{}))
		res, err := e.dev.Plan(ctx, del)
		require.NoError(t, err)
		require.Equal(t, []string{
			`remove support_service "ingress-spare" (ingress) on kubernetes_runtime "spare": made for owners that are gone, and used by nothing: it goes before kubernetes_runtime "spare", which it depends on`,
			`delete kubernetes_runtime "spare": requested`,
		}, strs(res.Actions))
	})

	t.Run("the OpenAPI document describes the route, its request and its result", func(t *testing.T) {
		e := setup(t)
		code, body := e.raw(t, "", http.MethodGet, "/v1/openapi.json", "", nil)
		require.Equal(t, http.StatusOK, code)
		var doc struct {
			Paths map[string]struct {
				Post struct {
					OperationID string `json:"operationId"`
				} `json:"post"`
			} `json:"paths"`
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		require.NoError(t, json.Unmarshal(body, &doc))
		require.Equal(t, "plan", doc.Paths["/v1/plans"].Post.OperationID)
		require.Contains(t, doc.Components.Schemas, "PlanResult")
		require.Contains(t, doc.Components.Schemas, "PlanAction")
	})

	t.Run("a viewer may not plan", func(t *testing.T) {
		e := setup(t)
		_, err := e.viewer.Plan(ctx, api.PlanRequest{})
		require.True(t, api.IsForbidden(err), "%v", err)
	})
}

func strs(actions []api.PlanAction) []string {
	out := make([]string, len(actions))
	for i, a := range actions {
		out[i] = a.String()
	}
	return out
}

func mustID(t testing.TB, e *env, ssName string) string {
	t.Helper()
	ss, err := e.admin.SupportServices().GetByName(context.Background(), ssName)
	require.NoError(t, err)
	return ss.ID
}

// webDefinitionWithID is def with a changed replica count, sent as JSON the way a client would.
func webDefinitionWithID(def *api.WorkloadDefinition) *api.WorkloadDefinition {
	var out api.WorkloadDefinition
	data, _ := json.Marshal(def)
	_ = json.Unmarshal(data, &out)
	n := int32(3)
	out.Spec.Replicas = &n
	return &out
}

// BenchmarkPlan measures one resource's preview (what the provider's ModifyPlan asks for: an instance
// placed in two regions, behind a gateway) against estates of growing size, side by side with the
// whole-graph read it resembles (a plan reads every object once).
func BenchmarkPlan(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10, 300} {
		e := setup(b)
		e.profile(b, "default", "eu-west", "us-east")
		for i := range n / 3 {
			e.world(b, fmt.Sprintf("w%d", i)) // a runtime, a definition and an instance
		}
		def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("bench"))
		require.NoError(b, err)
		req := api.PlanRequest{Changes: []api.PlanChange{
			change(b, api.PlanCreate, api.KindWorkloadInstance, &api.WorkloadInstance{Meta: api.Meta{ID: "inst", Name: "bench"},
				Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}}}}),
			change(b, api.PlanCreate, api.KindGateway, &api.Gateway{Meta: api.Meta{Name: "bench"}, Spec: api.GatewaySpec{InstanceID: "inst", Hosts: []string{"a.example.com"}}}),
		}}
		b.Run(fmt.Sprintf("objects=%d/plan", n), func(b *testing.B) {
			for b.Loop() {
				res, err := e.dev.Plan(ctx, req)
				if err != nil || len(res.Actions) == 0 {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("objects=%d/graph", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := e.dev.Graph(ctx, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
