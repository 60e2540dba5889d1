package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// objectResource is the resource of one kind: qleet_<kind>. Create and Update return once the object
// is reconciled; Read refreshes spec and status; Delete waits until the object is gone.
type objectResource[S, T, M any] struct {
	k *kind[S, T, M]
	c *client.Client
}

var (
	_ resource.ResourceWithConfigure        = (*objectResource[int, int, int])(nil)
	_ resource.ResourceWithImportState      = (*objectResource[int, int, int])(nil)
	_ resource.ResourceWithConfigValidators = (*objectResource[int, int, int])(nil)
	_ resource.ResourceWithModifyPlan       = (*objectResource[int, int, int])(nil)
)

// resource returns the kind's resource; its method value is a resource constructor.
func (k *kind[S, T, M]) resource() resource.Resource { return &objectResource[S, T, M]{k: k} }

// resourceSchema is the kind's resource schema: the model's attributes plus wait_for_ready and timeouts.
func (k *kind[S, T, M]) resourceSchema(ctx context.Context) rschema.Schema {
	attrs := k.modelAttributes()
	attrs["wait_for_ready"] = rschema.BoolAttribute{
		Description: "Wait, on create and update, until the controllers report the object reconciled (phase Ready at the " +
			"current generation), failing at once if it goes Failed. Set to false to return as soon as the API has stored the change.",
		Optional: true,
		Computed: true,
		Default:  booldefault.StaticBool(true),
	}
	to := timeouts.Attributes(ctx, timeouts.Opts{
		Create: true, Update: true, Delete: true,
		CreateDescription: fmt.Sprintf("How long create waits for the object to be reconciled (default %s), e.g. \"30m\".", k.createTimeout),
		UpdateDescription: fmt.Sprintf("How long update waits for the object to be reconciled (default %s).", k.updateTimeout),
		DeleteDescription: fmt.Sprintf("How long delete waits for the object to be gone (default %s).", k.deleteTimeout),
	}).(rschema.SingleNestedAttribute)
	to.Description = "How long create, update and delete may take, as durations such as \"30s\" or \"20m\"."
	attrs["timeouts"] = to
	return rschema.Schema{
		Description: k.description(),
		Attributes:  attrs,
	}
}

func (r *objectResource[S, T, M]) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.k.name
}

func (r *objectResource[S, T, M]) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.k.resourceSchema(ctx)
}

func (r *objectResource[S, T, M]) ConfigValidators(context.Context) []resource.ConfigValidator {
	return append(slices.Clip(r.k.validators), r.k.writeOnlyRule())
}

func (r *objectResource[S, T, M]) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClient(req.ProviderData, &resp.Diagnostics)
}

// options are the resource's own attributes, beyond the model.
type options struct {
	waitForReady bool
	timeouts     timeouts.Value
}

// getter is satisfied by tfsdk.Plan, tfsdk.State and tfsdk.Config.
type getter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
	GetAttribute(ctx context.Context, p path.Path, target any) diag.Diagnostics
}

// read returns the whole object (model and options) from a plan or state.
func (r *objectResource[S, T, M]) read(ctx context.Context, g getter) (types.Object, M, options, diag.Diagnostics) {
	var whole types.Object
	var opts options
	diags := g.Get(ctx, &whole)
	if diags.HasError() {
		var m M
		return whole, m, opts, diags
	}
	m, d := r.k.modelFrom(ctx, whole)
	diags.Append(d...)
	var wait types.Bool
	diags.Append(g.GetAttribute(ctx, path.Root("wait_for_ready"), &wait)...)
	opts.waitForReady = wait.IsNull() || wait.IsUnknown() || wait.ValueBool()
	diags.Append(g.GetAttribute(ctx, path.Root("timeouts"), &opts.timeouts)...)
	return whole, m, opts, diags
}

// save writes the object into state: the model converted from obj (with prior as the prior values),
// and the options kept from whole.
func (r *objectResource[S, T, M]) save(ctx context.Context, st *tfsdk.State, whole types.Object, prior M, obj *api.Object[S, T]) diag.Diagnostics {
	m, diags := r.k.toModel(ctx, obj, prior)
	mo, d := r.k.modelObject(ctx, &m)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	attrs := maps.Clone(whole.Attributes())
	maps.Copy(attrs, mo.Attributes())
	if w, ok := attrs["wait_for_ready"].(types.Bool); !ok || w.IsNull() || w.IsUnknown() {
		attrs["wait_for_ready"] = types.BoolValue(true) // after import: the default, so that no diff appears
	}
	v, d := types.ObjectValue(whole.AttributeTypes(ctx), attrs)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	diags.Append(st.Set(ctx, v)...)
	return diags
}

func (r *objectResource[S, T, M]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	whole, m, opts, diags := r.read(ctx, req.Plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := opts.timeouts.Create(ctx, r.k.createTimeout)
	resp.Diagnostics.Append(diags...)
	sent, diags := r.k.withWriteOnly(ctx, req.Config, m)
	resp.Diagnostics.Append(diags...)
	obj, diags := r.k.toObject(ctx, &sent)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.forgetPlanned(api.PlanCreate, "", obj.Name)
	created, err := r.k.api(r.c).Create(ctx, obj)
	if err != nil {
		resp.Diagnostics.Append(r.apiError(ctx, "create", obj.Name, err)...)
		return
	}
	// From here on the object exists: it is always saved, so that a failed wait leaves it in state,
	// where Terraform marks it tainted.
	final, waitDiags := r.wait(ctx, created, opts.waitForReady, "create", timeout.String())
	resp.Diagnostics.Append(r.save(ctx, &resp.State, whole, m, final)...)
	resp.Diagnostics.Append(waitDiags...)
}

func (r *objectResource[S, T, M]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	whole, m, _, diags := r.read(ctx, req.State)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	meta := metaOf(&m)
	obj, err := r.k.api(r.c).Get(ctx, meta.ID.ValueString())
	if api.IsNotFound(err) {
		resp.Diagnostics.AddWarning(
			fmt.Sprintf("%s %q no longer exists", r.k.title(), meta.Name.ValueString()),
			fmt.Sprintf("The %s %s (id %s) was deleted outside Terraform. It is removed from the state, and the next apply creates it again.",
				r.k.title(), meta.Name.ValueString(), meta.ID.ValueString()))
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.Append(r.apiError(ctx, "read", meta.Name.ValueString(), err)...)
		return
	}
	resp.Diagnostics.Append(r.save(ctx, &resp.State, whole, m, obj)...)
}

func (r *objectResource[S, T, M]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	whole, m, opts, diags := r.read(ctx, req.Plan)
	resp.Diagnostics.Append(diags...)
	var id types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("id"), &id)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := opts.timeouts.Update(ctx, r.k.updateTimeout)
	resp.Diagnostics.Append(diags...)
	sent, diags := r.k.withWriteOnly(ctx, req.Config, m)
	resp.Diagnostics.Append(diags...)
	obj, diags := r.k.toObject(ctx, &sent)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	obj.ID = id.ValueString()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.forgetPlanned(api.PlanUpdate, obj.ID, obj.Name)
	updated, err := r.k.api(r.c).Update(ctx, obj)
	if err != nil {
		resp.Diagnostics.Append(r.apiError(ctx, "update", obj.Name, err)...)
		return
	}
	final, waitDiags := r.wait(ctx, updated, opts.waitForReady, "update", timeout.String())
	resp.Diagnostics.Append(r.save(ctx, &resp.State, whole, m, final)...)
	resp.Diagnostics.Append(waitDiags...)
}

func (r *objectResource[S, T, M]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	_, m, opts, diags := r.read(ctx, req.State)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := opts.timeouts.Delete(ctx, r.k.deleteTimeout)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	meta := metaOf(&m)
	id, name := meta.ID.ValueString(), meta.Name.ValueString()
	r.forgetPlanned(api.PlanDelete, id, name)
	// What outlives the delete is read before it: a runtime kept until its profile's reclaim_after, the
	// data of a database or bucket deleted with retain.
	kept := keptBy(previewChange(ctx, r.c, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: r.k.name, ID: id}}}))
	diags = r.deleteAndWait(ctx, id, name)
	resp.Diagnostics.Append(diags...)
	if !diags.HasError() && len(kept) > 0 {
		resp.Diagnostics.AddWarning(fmt.Sprintf("%s %q was deleted; some of what it used stays", r.k.title(), name),
			"QleetOS "+strings.Join(kept, "\nQleetOS "))
	}
}

// keptBy returns what a delete's preview says outlives it, one line each ("will keep ...").
func keptBy(res *api.PlanResult) []string {
	if res == nil {
		return nil
	}
	var out []string
	for _, a := range res.Actions {
		if a.Action == api.ActionKeep {
			out = append(out, fmt.Sprintf("will keep %s %q: %s", a.Kind, a.Name, a.Reason))
		}
	}
	return out
}

// deleteAndWait deletes the object and waits until it is gone. When its cleanup is blocked (its cluster
// cannot be reached: the control plane sets ConditionCleanupBlocked after a grace period), it deletes
// it again with orphan, so that destroying an estate whose cluster died completes, and warns with what
// was left behind.
func (r *objectResource[S, T, M]) deleteAndWait(ctx context.Context, id, name string) diag.Diagnostics {
	var diags diag.Diagnostics
	res := r.k.api(r.c)
	// Detach: a data service that names its instance in spec.instance_id depends on it in Terraform's
	// graph, so Terraform deletes it first; the configuration's removal of it is the user's consent.
	err := res.Delete(ctx, id, client.DeleteOptions{Detach: true})
	if released, ok := r.releaseUsers(ctx, id, err); ok {
		// Terraform deletes a removed dependency before it updates the instances that used it (their
		// update depends on the delete), so a delete refused for those uses could never succeed in the
		// same apply: the uses go first, as the configuration that removed the resource asks.
		diags.AddWarning(fmt.Sprintf("%s %q was removed from the instances that used it", r.k.title(), name),
			fmt.Sprintf("Before deleting it, QleetOS removed it from %s, which still listed it: Terraform deletes a removed "+
				"dependency before it updates its users. If their configuration still names it, their next apply fails with its id not found.",
				strings.Join(released, ", ")))
		err = res.Delete(ctx, id, client.DeleteOptions{Detach: true})
	}
	if err != nil {
		return append(diags, r.apiError(ctx, "delete", name, err)...)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := res.WaitGone(wctx, id)
		cancel()
		if err == nil {
			return diags
		}
		if ctx.Err() != nil || wctx.Err() == nil {
			return append(diags, r.apiError(ctx, "delete", name, err)...)
		}
		obj, err := res.Get(ctx, id)
		if api.IsNotFound(err) {
			return diags
		}
		if err != nil {
			return append(diags, r.apiError(ctx, "delete", name, err)...)
		}
		blocked := conditionTrue(client.CommonStatus(obj), api.ConditionCleanupBlocked)
		if blocked == nil || obj.DeletionOrphan {
			continue
		}
		if err := res.Delete(ctx, id, client.DeleteOptions{Orphan: true}); err != nil {
			return append(diags, r.apiError(ctx, "delete", name, err)...)
		}
		diags.AddWarning(fmt.Sprintf("%s %q was deleted, leaving objects behind", r.k.title(), name),
			blocked.Message+"\n\nQleetOS abandoned them: remove them by hand if the cluster comes back.")
	}
}

// conditionTrue returns the condition of type t when it is True, or nil.
func conditionTrue(st *api.Status, t string) *api.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t && st.Conditions[i].Status == api.ConditionTrue {
			return &st.Conditions[i]
		}
	}
	return nil
}

// ModifyPlan marks the status unknown whenever the plan changes the object. Terraform marks computed
// attributes unknown by itself only when the configuration changed; a change that a plan modifier
// makes (an unset attribute going back to the API default, see serverDefault) must do so too, or the
// new status would contradict the plan.
//
// For a create, an update or a delete it also previews the change through the API (POST /v1/plans), in
// the world the run's other changes make (see the plan registry), and warns with what it implies beyond
// the resource itself: runtimes provisioned, support services installed or removed, dependencies placed,
// instances rolled, deletes cascading, and what outlives a delete. The preview never fails the plan:
// without an answer it says nothing.
func (r *objectResource[S, T, M]) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if !req.Plan.Raw.Equal(req.State.Raw) {
		r.previewWarning(ctx, req.Plan, req.State, &resp.Diagnostics)
	}
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() || req.Plan.Raw.Equal(req.State.Raw) {
		return
	}
	var st types.Object
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("status"), &st)...)
	if resp.Diagnostics.HasError() || st.IsUnknown() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("status"), types.ObjectUnknown(st.AttributeTypes(ctx)))...)
}

// ImportState accepts an ID, "name:<name>", or a bare name (anything that is not a UUID).
func (r *objectResource[S, T, M]) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id := strings.TrimSpace(req.ID)
	name, byName := strings.CutPrefix(id, "name:")
	if !byName {
		if _, err := uuid.Parse(id); err != nil {
			byName = true
		}
	}
	if byName {
		obj, err := r.k.api(r.c).GetByName(ctx, name)
		if err != nil {
			if api.IsNotFound(err) {
				resp.Diagnostics.AddError(fmt.Sprintf("Cannot import %s %q", r.k.title(), name),
					fmt.Sprintf("No %s is named %q. Import takes an ID, or a name (optionally written name:<name>).", r.k.title(), name))
				return
			}
			resp.Diagnostics.Append(r.apiError(ctx, "import", name, err)...)
			return
		}
		id = obj.ID
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
}

// wait waits for the object to be reconciled, when asked to. It returns the latest object it saw and
// an error diagnostic when the object went Failed or did not become Ready in time.
func (r *objectResource[S, T, M]) wait(ctx context.Context, obj *api.Object[S, T], wait bool, op, timeout string) (*api.Object[S, T], diag.Diagnostics) {
	if !wait {
		return obj, nil
	}
	var diags diag.Diagnostics
	got, err := r.k.api(r.c).WaitReconciled(ctx, obj.ID)
	if got == nil {
		got = obj
	}
	if err == nil {
		return got, nil
	}
	st := client.CommonStatus(got)
	var failed *client.FailedError
	switch {
	case errors.As(err, &failed):
		detail := statusDetail(&failed.Status)
		if op == "create" {
			detail += "\n\nThe object was created and is kept in the state; Terraform marks it tainted and replaces it on the next apply."
		} else {
			detail += "\n\nThe new configuration was stored; fix it and apply again."
		}
		summary := fmt.Sprintf("%s %q failed", r.k.title(), got.Name)
		if failed.Stalled != nil {
			summary = fmt.Sprintf("%s %q stalled (%s)", r.k.title(), got.Name, failed.Stalled.Reason)
			detail = fmt.Sprintf("The rollout made no progress within the control plane's progress deadline: %s\n\n", failed.Stalled.Message) + detail
		}
		diags.AddError(summary, detail)
	case ctx.Err() != nil:
		diags.AddError(fmt.Sprintf("%s %q was not reconciled within %s", r.k.title(), got.Name, timeout),
			statusDetail(st)+fmt.Sprintf("\n\nRaise timeouts.%s, or set wait_for_ready = false to return without waiting.", op))
	default:
		diags.Append(r.apiError(ctx, "wait for", got.Name, err)...)
	}
	return got, diags
}

// statusDetail describes a status: phase, message and the conditions that do not hold.
func statusDetail(st *api.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Phase %s", st.Phase)
	if st.Message != "" {
		fmt.Fprintf(&b, ": %s", st.Message)
	}
	for _, c := range st.Conditions {
		if c.Status == api.ConditionTrue {
			continue
		}
		fmt.Fprintf(&b, "\n- %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, " (%s)", c.Reason)
		}
		if c.Message != "" {
			fmt.Fprintf(&b, ": %s", c.Message)
		}
		if c.WaitingOn != "" {
			fmt.Fprintf(&b, " [waiting on %s]", c.WaitingOn)
		}
	}
	return b.String()
}

// apiError turns an API error into diagnostics, pointing validation errors at their attributes.
func (r *objectResource[S, T, M]) apiError(ctx context.Context, op, name string, err error) diag.Diagnostics {
	return apiDiagnostics(ctx, schemaHasPath(r.k.resourceSchema(ctx)), r.k.renames, fmt.Sprintf("Cannot %s %s %q", op, r.k.title(), name), err)
}

// attrValues is a helper for kinds' statusValues.
type attrValues = map[string]attr.Value
