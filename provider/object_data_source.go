package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// Data sources are derived from the resource's model schema: every attribute becomes computed (and
// write-only ones are left out), so that a kind is described once.

// computedAttribute converts a resource attribute to a computed data source attribute.
func computedAttribute(a rschema.Attribute) dschema.Attribute {
	desc := a.GetDescription()
	switch a := a.(type) {
	case rschema.StringAttribute:
		return dschema.StringAttribute{Description: desc, Computed: true, Sensitive: a.Sensitive}
	case rschema.Int64Attribute:
		return dschema.Int64Attribute{Description: desc, Computed: true, Sensitive: a.Sensitive}
	case rschema.BoolAttribute:
		return dschema.BoolAttribute{Description: desc, Computed: true, Sensitive: a.Sensitive}
	case rschema.MapAttribute:
		return dschema.MapAttribute{Description: desc, Computed: true, ElementType: a.ElementType, Sensitive: a.Sensitive}
	case rschema.ListAttribute:
		return dschema.ListAttribute{Description: desc, Computed: true, ElementType: a.ElementType, Sensitive: a.Sensitive}
	case rschema.SingleNestedAttribute:
		return dschema.SingleNestedAttribute{Description: desc, Computed: true, Attributes: computedAttributes(a.Attributes, nil)}
	case rschema.ListNestedAttribute:
		return dschema.ListNestedAttribute{Description: desc, Computed: true,
			NestedObject: dschema.NestedAttributeObject{Attributes: computedAttributes(a.NestedObject.Attributes, nil)}}
	}
	panic(fmt.Sprintf("provider: no data source equivalent of %T", a))
}

// computedAttributes converts resource attributes, leaving out the names in skip.
func computedAttributes(attrs map[string]rschema.Attribute, skip []string) map[string]dschema.Attribute {
	out := make(map[string]dschema.Attribute, len(attrs))
	for name, a := range attrs {
		if !slices.Contains(skip, name) {
			out[name] = computedAttribute(a)
		}
	}
	return out
}

// itemAttributes are the attributes of an object in a data source.
func (k *kind[S, T, M]) itemAttributes() map[string]dschema.Attribute {
	return computedAttributes(k.modelAttributes(), slices.Concat(k.writeOnly(), k.writeOnlyNames()))
}

// itemType is the object type of itemAttributes.
func (k *kind[S, T, M]) itemType() types.ObjectType {
	t := map[string]attr.Type{}
	for name, a := range k.itemAttributes() {
		t[name] = a.GetType()
	}
	return types.ObjectType{AttrTypes: t}
}

// item converts an API object to a data source object value.
func (k *kind[S, T, M]) item(ctx context.Context, obj *api.Object[S, T]) (types.Object, diag.Diagnostics) {
	var prior M
	m, diags := k.toModel(ctx, obj, prior)
	mo, d := k.modelObject(ctx, &m)
	diags.Append(d...)
	if diags.HasError() {
		return mo, diags
	}
	it := k.itemType()
	attrs := map[string]attr.Value{}
	for name := range it.AttrTypes {
		attrs[name] = mo.Attributes()[name]
	}
	v, d := types.ObjectValue(it.AttrTypes, attrs)
	diags.Append(d...)
	return v, diags
}

// objectDataSource looks one object up by id or by name: data "qleet_<kind>".
type objectDataSource[S, T, M any] struct {
	k *kind[S, T, M]
	c *client.Client
}

var _ datasource.DataSourceWithConfigValidators = (*objectDataSource[int, int, int])(nil)

// dataSource returns the kind's data source; its method value is a data source constructor.
func (k *kind[S, T, M]) dataSource() datasource.DataSource { return &objectDataSource[S, T, M]{k: k} }

func (d *objectDataSource[S, T, M]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + d.k.name
}

func (d *objectDataSource[S, T, M]) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := d.k.itemAttributes()
	attrs["id"] = dschema.StringAttribute{
		Description: fmt.Sprintf("The ID of the %s to look up. Exactly one of id and name must be set.", d.k.title()),
		Optional:    true, Computed: true,
	}
	attrs["name"] = dschema.StringAttribute{
		Description: fmt.Sprintf("The name of the %s to look up. Exactly one of id and name must be set.", d.k.title()),
		Optional:    true, Computed: true,
		Validators: []validator.String{dns1123Label()},
	}
	resp.Schema = dschema.Schema{
		Description: fmt.Sprintf("Looks up one %s by ID or by name, with its spec and status.", d.k.title()),
		Attributes:  attrs,
	}
}

func (d *objectDataSource[S, T, M]) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{datasourcevalidator.ExactlyOneOf(path.MatchRoot("id"), path.MatchRoot("name"))}
}

func (d *objectDataSource[S, T, M]) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = configureClient(req.ProviderData, &resp.Diagnostics)
}

func (d *objectDataSource[S, T, M]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var id, name types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("id"), &id)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("name"), &name)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res := d.k.api(d.c)
	var obj *api.Object[S, T]
	var err error
	what := name.ValueString()
	if known(id) {
		what = id.ValueString()
		obj, err = res.Get(ctx, id.ValueString())
	} else {
		obj, err = res.GetByName(ctx, name.ValueString())
	}
	if err != nil {
		resp.Diagnostics.Append(apiDiagnostics(ctx, nil, nil, fmt.Sprintf("Cannot read %s %q", d.k.title(), what), err)...)
		return
	}
	v, diags := d.k.item(ctx, obj)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, v)...)
}

// objectListDataSource lists objects, optionally filtered by labels: data "qleet_<plural>".
type objectListDataSource[S, T, M any] struct {
	k *kind[S, T, M]
	c *client.Client
}

// listDataSource returns the kind's list data source; its method value is a data source constructor.
func (k *kind[S, T, M]) listDataSource() datasource.DataSource {
	return &objectListDataSource[S, T, M]{k: k}
}

type listModel struct {
	LabelSelector types.String `tfsdk:"label_selector"`
	Items         types.List   `tfsdk:"items"`
}

func (d *objectListDataSource[S, T, M]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + d.k.plural()
}

func (d *objectListDataSource[S, T, M]) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dschema.Schema{
		Description: fmt.Sprintf("Lists %ss, optionally only those whose labels match a selector.", d.k.title()),
		Attributes: map[string]dschema.Attribute{
			"label_selector": dschema.StringAttribute{
				Description: `Only list objects carrying every one of these labels: comma-separated key=value pairs, e.g. "env=prod,team=web". Lists every object when unset.`,
				Optional:    true,
				Validators:  []validator.String{labelSelector()},
			},
			"items": dschema.ListNestedAttribute{
				Description:  fmt.Sprintf("The matching %ss, ordered by the API.", d.k.title()),
				Computed:     true,
				NestedObject: dschema.NestedAttributeObject{Attributes: d.k.itemAttributes()},
			},
		},
	}
}

func (d *objectListDataSource[S, T, M]) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = configureClient(req.ProviderData, &resp.Diagnostics)
}

func (d *objectListDataSource[S, T, M]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m listModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	items := []attr.Value{}
	for obj, err := range d.k.api(d.c).All(ctx, client.ListOptions{LabelSelector: m.LabelSelector.ValueString()}) {
		if err != nil {
			resp.Diagnostics.Append(apiDiagnostics(ctx, nil, nil, fmt.Sprintf("Cannot list %ss", d.k.title()), err)...)
			return
		}
		v, diags := d.k.item(ctx, obj)
		resp.Diagnostics.Append(diags...)
		if resp.Diagnostics.HasError() {
			return
		}
		items = append(items, v)
	}
	list, diags := types.ListValue(d.k.itemType(), items)
	resp.Diagnostics.Append(diags...)
	m.Items = list
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// configureClient extracts the client the provider configured (nil before configuration).
func configureClient(data any, diags *diag.Diagnostics) *client.Client {
	if data == nil {
		return nil
	}
	c, ok := data.(*client.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("expected *client.Client, got %T", data))
	}
	return c
}
