package provider

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// kind describes one API kind to the generic resource and data sources. S and T are the kind's spec and
// status types in package api; M is the Terraform model, a struct with tfsdk tags that embeds objectMeta
// and holds one field per entry of attributes (plus status).
//
// A kind file supplies the schema of its spec attributes and the conversions between M and S; everything
// else (CRUD, waiting, import, drift, data sources, error mapping) is written once here and in
// object_resource.go and object_data_source.go.
type kind[S, T, M any] struct {
	// name is the singular kind, e.g. "kubernetes_runtime"; the resource is qleet_<name>.
	name string
	// api returns the typed collection of the kind.
	api func(*client.Client) *client.Resource[S, T]
	// attributes are the kind's spec attributes, at the top level of the resource.
	attributes map[string]rschema.Attribute
	// statusAttributes are the kind-specific attributes of the computed status object.
	statusAttributes map[string]rschema.Attribute
	// renames maps API spec field names to attribute names where they differ (for error paths).
	renames map[string]string
	// validators check the whole configuration at plan time, beyond per-attribute validators.
	validators []resource.ConfigValidator
	// toSpec converts the model to a spec.
	toSpec func(ctx context.Context, m *M) (S, diag.Diagnostics)
	// fromSpec sets the model's spec attributes from a spec. On entry m holds the prior values (plan or
	// state, or nulls on import): they decide between null and empty where the API does not, and
	// supply write-only values.
	fromSpec func(ctx context.Context, s *S, m *M) diag.Diagnostics
	// statusValues returns the values of statusAttributes.
	statusValues func(t *T) map[string]attr.Value
	// createTimeout, updateTimeout and deleteTimeout are the defaults of the timeouts attribute.
	createTimeout, updateTimeout, deleteTimeout time.Duration
}

// objectMeta holds the attributes every object has. Every model embeds it.
type objectMeta struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Labels    types.Map    `tfsdk:"labels"`
	CreatedAt types.String `tfsdk:"created_at"`
	Status    types.Object `tfsdk:"status"`
}

func (m *objectMeta) meta() *objectMeta { return m }

// metaOf returns the objectMeta embedded in a model.
func metaOf(m any) *objectMeta {
	return m.(interface{ meta() *objectMeta }).meta()
}

// info is the kind's definition in the registry, where the kind is described once: its title, its
// description and its write-only fields.
func (k *kind[S, T, M]) info() *api.KindInfo {
	ki, ok := api.LookupKind(k.name)
	if !ok {
		panic("provider: kind " + k.name + " is not registered")
	}
	return ki
}

// title is the kind for people, e.g. "Kubernetes runtime".
func (k *kind[S, T, M]) title() string { return k.info().Title }

// writeOnly names the spec attributes the API does not return to every role: they are kept from the
// configuration, and left out of data sources.
func (k *kind[S, T, M]) writeOnly() []string { return k.info().WriteOnly }

// description documents the resource: the kind's description, and what Terraform keeps of its
// write-only attributes.
func (k *kind[S, T, M]) description() string {
	d := k.info().Description
	if len(k.writeOnly()) > 0 {
		d += " In Terraform, the write-only attributes are sensitive: the state holds only what the configuration wrote." +
			" On Terraform 1.11 and later, their `_wo` twins keep them out of the plan and the state."
	}
	return d
}

// plural is the collection name, used for the list data source: qleet_<plural>.
func (k *kind[S, T, M]) plural() string { return api.Plural(k.name) }

// modelAttributes is the schema of the model M: the common attributes, the kind's spec attributes and
// the status.
func (k *kind[S, T, M]) modelAttributes() map[string]rschema.Attribute {
	attrs := map[string]rschema.Attribute{
		"id": rschema.StringAttribute{
			Description:   fmt.Sprintf("The %s's server-assigned ID (a UUID).", k.title()),
			Computed:      true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"name": rschema.StringAttribute{
			Description: fmt.Sprintf("The %s's name: a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters), "+
				"unique among %ss. Changing it replaces the object.", k.title(), k.title()),
			Required:      true,
			Validators:    []validator.String{dns1123Label()},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"labels": rschema.MapAttribute{
			Description: "Labels: key/value pairs with Kubernetes label syntax, used by the list data sources' label_selector.",
			ElementType: types.StringType,
			Optional:    true,
			Validators:  labelsValidators(),
		},
		"created_at": rschema.StringAttribute{
			Description:   "When the object was created (RFC 3339).",
			Computed:      true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"status": rschema.SingleNestedAttribute{
			Description: "The observed state, as the controllers report it. Refreshed on every read.",
			Computed:    true,
			Attributes:  k.statusSchema(),
		},
	}
	for name, a := range k.withWriteOnlyAttributes() {
		if _, dup := attrs[name]; dup {
			panic(fmt.Sprintf("provider: kind %s: attribute %q shadows a common attribute", k.name, name))
		}
		attrs[name] = a
	}
	return attrs
}

// statusSchema is the schema of the status object: the common fields and the kind's own.
func (k *kind[S, T, M]) statusSchema() map[string]rschema.Attribute {
	attrs := map[string]rschema.Attribute{
		"phase": rschema.StringAttribute{
			Description: "The lifecycle phase: Pending, Reconciling, Ready, Failed or Deleting.",
			Computed:    true,
		},
		"message": rschema.StringAttribute{
			Description: "Explains the phase in one line.",
			Computed:    true,
		},
		"observed_generation": rschema.Int64Attribute{
			Description: "The spec generation the controller last acted on. The object is reconciled when the phase is Ready at the current generation.",
			Computed:    true,
		},
		"conditions": rschema.ListNestedAttribute{
			Description:  "Details of the state, one entry per aspect.",
			Computed:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: conditionAttributes},
		},
	}
	maps.Copy(attrs, k.statusAttributes)
	return attrs
}

var conditionAttributes = map[string]rschema.Attribute{
	"type":       rschema.StringAttribute{Description: "The aspect, e.g. Ready or Connected.", Computed: true},
	"status":     rschema.StringAttribute{Description: "True, False or Unknown.", Computed: true},
	"reason":     rschema.StringAttribute{Description: "A CamelCase machine-readable cause.", Computed: true},
	"message":    rschema.StringAttribute{Description: "A human-readable explanation.", Computed: true},
	"waiting_on": rschema.StringAttribute{Description: "The dependency this condition waits on, if any.", Computed: true},
}

// objectTypeOf returns the object type of a set of schema attributes.
func objectTypeOf(attrs map[string]rschema.Attribute) types.ObjectType {
	t := make(map[string]attr.Type, len(attrs))
	for name, a := range attrs {
		t[name] = a.GetType()
	}
	return types.ObjectType{AttrTypes: t}
}

// modelType is the object type of the model M.
func (k *kind[S, T, M]) modelType() types.ObjectType { return objectTypeOf(k.modelAttributes()) }

// modelFrom reads the model out of a whole resource or data source object, ignoring other attributes
// (wait_for_ready, timeouts).
func (k *kind[S, T, M]) modelFrom(ctx context.Context, whole types.Object) (M, diag.Diagnostics) {
	var m M
	mt := k.modelType()
	attrs := whole.Attributes()
	sub := make(map[string]attr.Value, len(mt.AttrTypes))
	for name, t := range mt.AttrTypes {
		v, ok := attrs[name]
		if !ok {
			v = nullOf(ctx, t)
		}
		sub[name] = v
	}
	obj, diags := types.ObjectValue(mt.AttrTypes, sub)
	if diags.HasError() {
		return m, diags
	}
	diags.Append(obj.As(ctx, &m, basetypes.ObjectAsOptions{})...)
	return m, diags
}

// modelObject converts the model to an object value.
func (k *kind[S, T, M]) modelObject(ctx context.Context, m *M) (types.Object, diag.Diagnostics) {
	return types.ObjectValueFrom(ctx, k.modelType().AttrTypes, m)
}

// toObject converts the model to the API object to write: name, labels and spec.
func (k *kind[S, T, M]) toObject(ctx context.Context, m *M) (*api.Object[S, T], diag.Diagnostics) {
	meta := metaOf(m)
	labels, diags := stringMapOf(ctx, meta.Labels)
	spec, d := k.toSpec(ctx, m)
	diags.Append(d...)
	obj := &api.Object[S, T]{Spec: spec}
	obj.ID = meta.ID.ValueString()
	obj.Name = meta.Name.ValueString()
	obj.Labels = labels
	return obj, diags
}

// toModel converts an API object to the model, given the prior model (see kind.fromSpec).
func (k *kind[S, T, M]) toModel(ctx context.Context, obj *api.Object[S, T], prior M) (M, diag.Diagnostics) {
	m := prior
	meta := metaOf(&m)
	var diags diag.Diagnostics
	meta.ID = types.StringValue(obj.ID)
	meta.Name = types.StringValue(obj.Name)
	meta.Labels = stringMapValue(meta.Labels, obj.Labels)
	meta.CreatedAt = types.StringValue(obj.CreatedAt.UTC().Format(time.RFC3339))
	meta.Status, diags = k.statusObject(ctx, obj)
	diags.Append(k.fromSpec(ctx, &obj.Spec, &m)...)
	return m, diags
}

// statusObject converts an object's status to the status attribute.
func (k *kind[S, T, M]) statusObject(ctx context.Context, obj *api.Object[S, T]) (types.Object, diag.Diagnostics) {
	st := client.CommonStatus(obj)
	condType := objectTypeOf(conditionAttributes)
	conds := make([]attr.Value, 0, len(st.Conditions))
	var diags diag.Diagnostics
	for _, c := range st.Conditions {
		v, d := types.ObjectValue(condType.AttrTypes, map[string]attr.Value{
			"type":       types.StringValue(c.Type),
			"status":     types.StringValue(string(c.Status)),
			"reason":     types.StringValue(c.Reason),
			"message":    types.StringValue(c.Message),
			"waiting_on": types.StringValue(c.WaitingOn),
		})
		diags.Append(d...)
		conds = append(conds, v)
	}
	condList, d := types.ListValue(condType, conds)
	diags.Append(d...)
	vals := map[string]attr.Value{
		"phase":               types.StringValue(string(st.Phase)),
		"message":             types.StringValue(st.Message),
		"observed_generation": types.Int64Value(st.ObservedGeneration),
		"conditions":          condList,
	}
	if k.statusValues != nil {
		maps.Copy(vals, k.statusValues(&obj.Status))
	}
	v, d := types.ObjectValue(objectTypeOf(k.statusSchema()).AttrTypes, vals)
	diags.Append(d...)
	return v, diags
}

// nullOf returns the null value of a type.
func nullOf(ctx context.Context, t attr.Type) attr.Value {
	switch tt := t.(type) {
	case types.ObjectType:
		return types.ObjectNull(tt.AttrTypes)
	case types.ListType:
		return types.ListNull(tt.ElemType)
	case types.MapType:
		return types.MapNull(tt.ElemType)
	}
	v, err := t.ValueFromTerraform(ctx, tftypes.NewValue(t.TerraformType(ctx), nil))
	if err != nil {
		panic(fmt.Sprintf("provider: null of %s: %v", t, err))
	}
	return v
}

// sortedNames returns a map's keys in order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
