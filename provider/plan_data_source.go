package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// planDataSource is qleet_plan: a preview of changes (POST /v1/plans) that writes nothing.
type planDataSource struct {
	c *client.Client
}

var _ datasource.DataSourceWithConfigure = (*planDataSource)(nil)

// newPlanDataSource returns the qleet_plan data source.
func newPlanDataSource() datasource.DataSource { return &planDataSource{} }

type planChangeModel struct {
	Op       types.String `tfsdk:"op"`
	Kind     types.String `tfsdk:"kind"`
	ID       types.String `tfsdk:"id"`
	Name     types.String `tfsdk:"name"`
	Labels   types.Map    `tfsdk:"labels"`
	SpecJSON types.String `tfsdk:"spec_json"`
	Cascade  types.Bool   `tfsdk:"cascade"`
}

type planActionModel struct {
	Action       types.String `tfsdk:"action"`
	Kind         types.String `tfsdk:"kind"`
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Requested    types.Bool   `tfsdk:"requested"`
	Region       types.String `tfsdk:"region"`
	Profile      types.String `tfsdk:"profile"`
	Runtime      types.String `tfsdk:"runtime"`
	SupportType  types.String `tfsdk:"support_type"`
	ProviderKind types.String `tfsdk:"provider_kind"`
	ProviderID   types.String `tfsdk:"provider_id"`
	ProviderName types.String `tfsdk:"provider_name"`
	CauseKind    types.String `tfsdk:"cause_kind"`
	CauseName    types.String `tfsdk:"cause_name"`
	Reason       types.String `tfsdk:"reason"`
	Description  types.String `tfsdk:"description"`
}

type planModel struct {
	Changes  []planChangeModel `tfsdk:"changes"`
	Actions  []planActionModel `tfsdk:"actions"`
	Summary  types.List        `tfsdk:"summary"`
	Warnings types.List        `tfsdk:"warnings"`
}

func (d *planDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_plan"
}

func (d *planDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) dschema.StringAttribute {
		return dschema.StringAttribute{Description: desc, Computed: true}
	}
	resp.Schema = dschema.Schema{
		Description: "Previews changes without making them: what the QleetOS controllers would do if the changes were applied " +
			"(`POST /v1/plans`). The actions list the runtimes provisioned (from which runtime profile, in which region), " +
			"support services installed or removed, dependencies created, workload instances rolled, deletes cascading and " +
			"what outlives a delete, in the order they would happen, each with its reason. A change the API would refuse fails the read with the same error.",
		Attributes: map[string]dschema.Attribute{
			"changes": dschema.ListNestedAttribute{
				Description: "The creates, updates and deletes to preview, in any order (the plan orders them as an apply would).",
				Required:    true,
				NestedObject: dschema.NestedAttributeObject{Attributes: map[string]dschema.Attribute{
					"op": dschema.StringAttribute{Description: "`create`, `update` or `delete`.", Required: true,
						Validators: []validator.String{stringvalidator.OneOf(api.PlanCreate, api.PlanUpdate, api.PlanDelete)}},
					"kind": dschema.StringAttribute{Description: "The object's kind, e.g. `workload_instance`.", Required: true,
						Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
					"id": dschema.StringAttribute{Description: "The object to update or delete (or `name`). For a create, an optional placeholder " +
						"that other changes may use as a reference (e.g. a `definition_id`).", Optional: true},
					"name":   dschema.StringAttribute{Description: "The object's name: required to create; names the object to update or delete when `id` is not set.", Optional: true},
					"labels": dschema.MapAttribute{Description: "The object's labels (create and update).", ElementType: types.StringType, Optional: true},
					"spec_json": dschema.StringAttribute{Description: "The object's spec as the API takes it, as JSON (`jsonencode({...})`), " +
						"with the API's field names (create and update).", Optional: true},
					"cascade": dschema.BoolAttribute{Description: "For a delete, delete what depends on the object too; without it a delete that " +
						"others depend on is refused, as the real delete would be.", Optional: true},
				}},
			},
			"actions": dschema.ListNestedAttribute{
				Description: "What would happen, in order.",
				Computed:    true,
				NestedObject: dschema.NestedAttributeObject{Attributes: map[string]dschema.Attribute{
					"action":        str("create, update, delete, provision, install, remove, depend, roll or keep (what outlives a delete)."),
					"kind":          str("The kind of the object the action is about."),
					"id":            str("The object's ID; for an object the plan creates, its placeholder or `planned:<kind>/<name>`."),
					"name":          str("The object's name (for a provisioned runtime or an installed support service, the name it would get)."),
					"requested":     dschema.BoolAttribute{Description: "True for the changes asked for, false for what they imply.", Computed: true},
					"region":        str("Where a runtime is provisioned, or a placement lands."),
					"profile":       str("The runtime profile a runtime is provisioned from."),
					"runtime":       str("The runtime a support service is installed on or removed from, or an instance is placed on."),
					"support_type":  str("The type of an installed or removed support service (ingress, cert-manager, ...)."),
					"provider_kind": str("For a `depend` action: the kind of the object depended on."),
					"provider_id":   str("For a `depend` action: the ID of the object depended on."),
					"provider_name": str("For a `depend` action: the name of the object depended on."),
					"cause_kind":    str("The kind of the object whose change implies the action (empty for requested ones)."),
					"cause_name":    str("The name of the object whose change implies the action."),
					"reason":        str("Why, in one sentence."),
					"description":   str("The action in one line, e.g. `provision kubernetes_runtime \"default-eu-west\" in eu-west from runtime_profile \"default\": ...`."),
				}},
			},
			"summary": dschema.ListAttribute{Description: "The implied actions (beyond the changes asked for), one line each, " +
				"e.g. `will install support_service ingress, cert-manager on kubernetes_runtime \"default-eu-west\"`.", ElementType: types.StringType, Computed: true},
			"warnings": dschema.ListAttribute{Description: "What the controllers could not do, e.g. a region that no runtime and no runtime profile serves.",
				ElementType: types.StringType, Computed: true},
		},
	}
}

func (d *planDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = configureClient(req.ProviderData, &resp.Diagnostics)
}

func (d *planDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m planModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	preq := api.PlanRequest{Changes: make([]api.PlanChange, 0, len(m.Changes))}
	for i, ch := range m.Changes {
		labels, diags := stringMapOf(ctx, ch.Labels)
		resp.Diagnostics.Append(diags...)
		pc := api.PlanChange{Op: ch.Op.ValueString(), Kind: ch.Kind.ValueString(), ID: ch.ID.ValueString(), Name: ch.Name.ValueString(),
			Labels: labels, Cascade: ch.Cascade.ValueBool()}
		if s := ch.SpecJSON.ValueString(); s != "" {
			if !json.Valid([]byte(s)) {
				resp.Diagnostics.AddAttributeError(path.Root("changes").AtListIndex(i).AtName("spec_json"), "Invalid spec_json",
					"spec_json must be a JSON object, e.g. jsonencode({ containers = [...] }).")
				continue
			}
			pc.Spec = json.RawMessage(s)
		}
		preq.Changes = append(preq.Changes, pc)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := d.c.Plan(ctx, preq)
	if err != nil {
		resp.Diagnostics.AddError("Cannot plan the changes", planErrorDetail(err))
		return
	}
	m.Actions = make([]planActionModel, 0, len(res.Actions))
	for _, a := range res.Actions {
		am := planActionModel{
			Action: types.StringValue(a.Action), Kind: types.StringValue(a.Kind), ID: types.StringValue(a.ID), Name: types.StringValue(a.Name),
			Requested: types.BoolValue(a.Requested), Region: types.StringValue(a.Region), Profile: types.StringValue(a.Profile),
			Runtime: types.StringValue(a.Runtime), SupportType: types.StringValue(a.SupportType), Reason: types.StringValue(a.Reason),
			Description:  types.StringValue(a.String()),
			ProviderKind: types.StringValue(""), ProviderID: types.StringValue(""), ProviderName: types.StringValue(""),
			CauseKind: types.StringValue(""), CauseName: types.StringValue(""),
		}
		if a.Provider != nil {
			am.ProviderKind, am.ProviderID, am.ProviderName = types.StringValue(a.Provider.Kind), types.StringValue(a.Provider.ID), types.StringValue(a.Provider.Name)
		}
		if a.Cause != nil {
			am.CauseKind, am.CauseName = types.StringValue(a.Cause.Kind), types.StringValue(a.Cause.Name)
		}
		m.Actions = append(m.Actions, am)
	}
	var diags diag.Diagnostics
	m.Summary, diags = types.ListValueFrom(ctx, types.StringType, nonNilStrings(res.Summary()))
	resp.Diagnostics.Append(diags...)
	m.Warnings, diags = types.ListValueFrom(ctx, types.StringType, nonNilStrings(res.Warnings))
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// planErrorDetail explains a refused plan: every invalid field, or the dependents that block a delete.
func planErrorDetail(err error) string {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	if len(ae.Fields) > 0 {
		lines := make([]string, len(ae.Fields))
		for i, f := range ae.Fields {
			lines[i] = fmt.Sprintf("%s: %s", f.Field, f.Message)
		}
		return "The QleetOS API rejected the changes:\n" + strings.Join(lines, "\n")
	}
	return ae.Error() + conflictHint(ae)
}

// previewTimeout bounds the API call a resource's plan makes to preview its change.
const previewTimeout = 3 * time.Second

// previewUnavailable remembers the clients whose API did not answer a preview (unreachable, or too old
// to serve /v1/plans), so that one plan asks at most once.
var previewUnavailable sync.Map // *client.Client -> struct{}

// previewChange asks the API what a resource's change would imply beyond itself.
// It returns nil whenever it cannot tell: values unknown beyond references, the API unreachable or
// refusing; the plan must never fail for a preview.
func previewChange(ctx context.Context, c *client.Client, req api.PlanRequest) *api.PlanResult {
	if c == nil {
		return nil
	}
	if _, off := previewUnavailable.Load(c); off {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	res, err := c.Plan(ctx, req)
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code == api.CodeNotFound || ae.Code == api.CodeUnavailable || ae.Code == api.CodeInternal {
			previewUnavailable.Store(c, struct{}{})
		}
		return nil
	}
	return res
}

// previewSkip are the top-level attributes a preview ignores: computed ones, and the resource's options.
var previewSkip = map[string]bool{"id": true, "status": true, "created_at": true, "timeouts": true, "wait_for_ready": true}

// knownForPreview makes a planned resource value convertible to the object it would write: an unknown
// reference (an attribute named *_id or *_ids, or databases and buckets) becomes api.PlanUnknownPrefix
// followed by its path (e.g. "unknown:instance_id"), which the plan accepts as an object known after
// apply, and which resolveUnknown may resolve to a create of the same run; any other unknown value becomes null, which the
// API defaults. Computed attributes stay as they are.
func knownForPreview(raw tftypes.Value) (tftypes.Value, error) {
	return tftypes.Transform(raw, func(p *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		steps := p.Steps()
		if len(steps) == 0 || v.IsKnown() {
			return v, nil
		}
		if top, ok := steps[0].(tftypes.AttributeName); ok && previewSkip[string(top)] {
			return v, nil
		}
		last := ""
		var where []string
		for i, s := range steps {
			switch s := s.(type) {
			case tftypes.AttributeName:
				last = string(s)
				where = append(where, stepString(i == 0, string(s), 0, false))
			case tftypes.ElementKeyInt:
				where = append(where, stepString(false, "", int64(s), true))
			case tftypes.ElementKeyString:
				where = append(where, fmt.Sprintf("[%q]", string(s)))
			default:
				where = append(where, "[?]")
			}
		}
		isRef := strings.HasSuffix(last, "_id") || strings.HasSuffix(last, "_ids") || last == "databases" || last == "buckets"
		if isRef && v.Type().Is(tftypes.String) {
			return tftypes.NewValue(tftypes.String, unknownMarker(where)), nil
		}
		return tftypes.NewValue(v.Type(), nil), nil
	})
}

// previewWarning previews a resource's create, update or delete in the world the other resources of the
// run make (the plan registry), records it there for the others, and when it implies more than the
// resource itself, warns with a summary of it: runtimes provisioned (from which profile, in which
// region), support services installed or removed, dependencies placed, instances rolled, deletes
// cascading, and what outlives a delete.
func (r *objectResource[S, T, M]) previewWarning(ctx context.Context, plan tfsdk.Plan, state tfsdk.State, diags *diag.Diagnostics) {
	if r.c == nil {
		return
	}
	ch, ok := r.plannedChange(ctx, plan, state)
	if !ok {
		return
	}
	reg := registryOf(r.c)
	reg.record(ch)
	others := reg.others(ch)
	if ch.Op != api.PlanDelete {
		ch = resolveUnknown(ch, others)
	}
	res := previewChange(ctx, r.c, api.PlanRequest{Changes: []api.PlanChange{ch}, Assume: others})
	if res == nil && len(others) > 0 {
		// What the others plan may be refused where this change alone is not: preview it alone.
		res = previewChange(ctx, r.c, api.PlanRequest{Changes: []api.PlanChange{ch}})
	}
	if res == nil {
		return
	}
	name := ch.Name
	if name == "" {
		name = ch.ID
	}
	if lines := previewLines(res); len(lines) > 0 {
		what := "change"
		if ch.Op == api.PlanDelete {
			what = "delete"
		}
		diags.AddWarning(fmt.Sprintf("%s %q: the QleetOS controllers will do more than this %s", r.k.title(), name, what),
			strings.Join(lines, "; "))
	}
}

// previewLines are the summary of a preview, and where it places instances: `will place
// workload_instance "web" on kubernetes_runtime "default-eu-west" in eu-west`.
func previewLines(res *api.PlanResult) []string {
	lines := res.Summary()
	for _, a := range res.Actions {
		if a.Action == api.ActionDepend && a.Provider != nil && a.Provider.Kind == api.KindKubernetesRuntime {
			lines = append(lines, fmt.Sprintf("will place %s %q on %s %q in %s", a.Kind, a.Name, a.Provider.Kind, a.Provider.Name, a.Region))
		}
	}
	return lines
}

// plannedChange is the change a resource's plan makes, as the API would be asked for it: a create (a
// placeholder id that other resources' previews resolve their unknown references to), an update, or
// a delete (the plan is null).
func (r *objectResource[S, T, M]) plannedChange(ctx context.Context, plan tfsdk.Plan, state tfsdk.State) (api.PlanChange, bool) {
	stateID := ""
	if !state.Raw.IsNull() {
		var id types.String
		if d := state.GetAttribute(ctx, path.Root("id"), &id); d.HasError() || id.ValueString() == "" {
			return api.PlanChange{}, false
		}
		stateID = id.ValueString()
	}
	if plan.Raw.IsNull() {
		var name types.String
		_ = state.GetAttribute(ctx, path.Root("name"), &name)
		return api.PlanChange{Op: api.PlanDelete, Kind: r.k.name, ID: stateID, Name: name.ValueString()}, stateID != ""
	}
	raw, err := knownForPreview(plan.Raw)
	if err != nil {
		return api.PlanChange{}, false
	}
	_, m, _, d := r.read(ctx, tfsdk.Plan{Schema: plan.Schema, Raw: raw})
	if d.HasError() {
		return api.PlanChange{}, false
	}
	obj, d := r.k.toObject(ctx, &m)
	if d.HasError() {
		return api.PlanChange{}, false
	}
	op := api.PlanCreate
	obj.ID = plannedID(r.k.name, obj.Name)
	if stateID != "" {
		op, obj.ID = api.PlanUpdate, stateID
	}
	ch, err := api.ChangeOf(op, r.k.name, obj)
	return ch, err == nil
}

// forgetPlanned drops a change from the plan registry once it is applied: the API has it from then on.
func (r *objectResource[S, T, M]) forgetPlanned(op, id, name string) {
	if r.c != nil {
		registryOf(r.c).forget(api.PlanChange{Op: op, Kind: r.k.name, ID: id, Name: name})
	}
}
