package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
)

// Conversions between Terraform values and API values.
//
// The API drops empty values (omitempty), so "unset" and "empty" look alike when read back. The
// *Value functions below take the prior value (from the plan, the state, or null on import) and keep
// it null when the API value is empty and the prior was null, so that an unset attribute stays unset
// and an attribute set to an empty value stays empty: no perpetual diff, and no "inconsistent result
// after apply". Every other API value wins over the prior, so drift shows up.

// known reports whether a value is neither null nor unknown.
func known(v attr.Value) bool { return !v.IsNull() && !v.IsUnknown() }

// stringValue converts an API string. An empty string is null when the prior was null, or unknown (a
// computed value the API left unset: import would read it as null too).
func stringValue(prior types.String, v string) types.String {
	if v == "" && (prior.IsNull() || prior.IsUnknown()) {
		return types.StringNull()
	}
	return types.StringValue(v)
}

// int64Value converts an API integer whose zero means unset; zero is null when the prior was null or
// unknown, as for stringValue.
func int64Value(prior types.Int64, v int64) types.Int64 {
	if v == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.Int64Null()
	}
	return types.Int64Value(v)
}

// boolValue converts an API boolean whose false means unset.
func boolValue(prior types.Bool, v bool) types.Bool {
	if !v && prior.IsNull() {
		return types.BoolNull()
	}
	return types.BoolValue(v)
}

// int32Ptr converts an optional integer attribute to an API pointer (nil when null or unknown).
func int32Ptr(v types.Int64) *int32 {
	if !known(v) {
		return nil
	}
	n := int32(v.ValueInt64())
	return &n
}

// int32PtrValue converts an API pointer: nil is null.
func int32PtrValue(v *int32) types.Int64 {
	if v == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*v))
}

// stringsOf converts a list of strings (nil when null or unknown).
func stringsOf(ctx context.Context, l types.List) ([]string, diag.Diagnostics) {
	if !known(l) {
		return nil, nil
	}
	var out []string
	diags := l.ElementsAs(ctx, &out, false)
	return out, diags
}

// stringListValue converts an API list of strings.
func stringListValue(prior types.List, v []string) types.List {
	if len(v) == 0 && prior.IsNull() {
		return types.ListNull(types.StringType)
	}
	elems := make([]attr.Value, len(v))
	for i, s := range v {
		elems[i] = types.StringValue(s)
	}
	return types.ListValueMust(types.StringType, elems)
}

// stringMapOf converts a map of strings (nil when null or unknown).
func stringMapOf(ctx context.Context, m types.Map) (map[string]string, diag.Diagnostics) {
	if !known(m) {
		return nil, nil
	}
	out := map[string]string{}
	diags := m.ElementsAs(ctx, &out, false)
	return out, diags
}

// stringMapValue converts an API map of strings.
func stringMapValue(prior types.Map, v map[string]string) types.Map {
	if len(v) == 0 && prior.IsNull() {
		return types.MapNull(types.StringType)
	}
	elems := make(map[string]attr.Value, len(v))
	for k, s := range v {
		elems[k] = types.StringValue(s)
	}
	return types.MapValueMust(types.StringType, elems)
}

// objectsOf decodes a list of nested objects into models (nil when null or unknown).
func objectsOf[E any](ctx context.Context, l types.List) ([]E, diag.Diagnostics) {
	if !known(l) {
		return nil, nil
	}
	var out []E
	diags := l.ElementsAs(ctx, &out, false)
	return out, diags
}

// objectListValue converts models to a list of nested objects, null when empty and the prior was null.
func objectListValue[E any](ctx context.Context, elem types.ObjectType, prior types.List, items []E) (types.List, diag.Diagnostics) {
	if len(items) == 0 && prior.IsNull() {
		return types.ListNull(elem), nil
	}
	if items == nil {
		items = []E{}
	}
	return types.ListValueFrom(ctx, elem, items)
}

// objectOf decodes a nested object into a model (nil when null or unknown).
func objectOf[E any](ctx context.Context, o types.Object) (*E, diag.Diagnostics) {
	if !known(o) {
		return nil, nil
	}
	out := new(E)
	diags := o.As(ctx, out, basetypes.ObjectAsOptions{})
	return out, diags
}

// objectValue converts a model to a nested object; nil is null.
func objectValue[E any](ctx context.Context, t types.ObjectType, e *E) (types.Object, diag.Diagnostics) {
	if e == nil {
		return types.ObjectNull(t.AttrTypes), nil
	}
	return types.ObjectValueFrom(ctx, t.AttrTypes, e)
}

// priorAt returns the i-th prior item, or a zero model (all nulls) past the end.
func priorAt[E any](items []E, i int) E {
	if i < len(items) {
		return items[i]
	}
	var zero E
	return zero
}
