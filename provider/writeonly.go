package provider

import (
	"context"
	"fmt"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Every write-only spec field of a kind (api.KindInfo.WriteOnly, e.g. a secret's values) has, beside its
// plain attribute, two more: <name>_wo, a Terraform write-only attribute (Terraform 1.11 and later keep
// its value out of the plan and the state), and <name>_wo_version, which a configuration changes to send
// a new value, since Terraform cannot see a change of a value it does not store. Each model declares the
// three fields; toSpec takes the write-only one when it is set. The generic resource reads the
// write-only values from the configuration on create and update (the plan holds them as null) and
// checks that the plain and the write-only attribute are not both set.

const (
	woSuffix        = "_wo"
	woVersionSuffix = "_wo_version"
)

// writeOnlyAttributes are the write-only twins and the version attributes of the kind's write-only
// spec attributes.
func (k *kind[S, T, M]) writeOnlyAttributes() map[string]rschema.Attribute {
	out := map[string]rschema.Attribute{}
	for _, name := range k.writeOnly() {
		plain, ok := k.attributes[name]
		if !ok {
			panic(fmt.Sprintf("provider: kind %s: write-only field %q has no attribute", k.name, name))
		}
		out[name+woSuffix] = writeOnlyTwin(name, plain)
		out[name+woVersionSuffix] = rschema.Int64Attribute{
			Description: fmt.Sprintf("The version of `%[1]s_wo`: any number, changed whenever `%[1]s_wo` changes (e.g. 1, then 2). "+
				"Terraform does not store `%[1]s_wo`, so it cannot see a new value: a change of this version is what makes it "+
				"update the resource and send the value to QleetOS. Required with `%[1]s_wo`, and only valid with it.", name),
			Optional: true,
		}
	}
	return out
}

// writeOnlyTwin is the write-only attribute of a plain one: the same type and validators, write-only.
func writeOnlyTwin(name string, plain rschema.Attribute) rschema.Attribute {
	desc := fmt.Sprintf("Write-only (Terraform 1.11 and later): the value of `%[1]s`, which Terraform sends to QleetOS and never "+
		"writes into the plan or the state. Set at most one of `%[1]s` and `%[1]s_wo`, and `%[1]s_wo_version` with `%[1]s_wo`. "+
		"Terraform cannot see a change of a write-only value: QleetOS receives a changed value only when `%[1]s_wo_version` "+
		"changes (or when another attribute of the resource does), so change the version with the value.", name)
	switch a := plain.(type) {
	case rschema.StringAttribute:
		return rschema.StringAttribute{Description: desc, Optional: true, Sensitive: true, WriteOnly: true, Validators: a.Validators}
	case rschema.MapAttribute:
		return rschema.MapAttribute{Description: desc, Optional: true, Sensitive: true, WriteOnly: true, ElementType: a.ElementType, Validators: a.Validators}
	}
	panic(fmt.Sprintf("provider: no write-only twin of %s (%T)", name, plain))
}

// writeOnlyNames are the names of the write-only attributes and their version attributes: never in
// data sources.
func (k *kind[S, T, M]) writeOnlyNames() []string {
	return sortedNames(k.writeOnlyAttributes())
}

// writeOnlyRule checks the write-only attributes of a configuration: not both the plain and the
// write-only attribute, and the version exactly with the write-only attribute.
func (k *kind[S, T, M]) writeOnlyRule() resource.ConfigValidator {
	return configRule{
		desc: "at most one of each write-only field's plain and _wo attribute; _wo_version exactly with _wo",
		check: func(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics {
			var whole types.Object
			diags := cfg.Get(ctx, &whole)
			if diags.HasError() {
				return diags
			}
			attrs := whole.Attributes()
			isNull := func(name string) bool { v, ok := attrs[name]; return !ok || v.IsNull() }
			for _, name := range k.writeOnly() {
				plainNull, woNull, versionNull := isNull(name), isNull(name+woSuffix), isNull(name+woVersionSuffix)
				switch {
				case !plainNull && !woNull:
					diags.AddAttributeError(path.Root(name+woSuffix), "Conflicting attributes",
						fmt.Sprintf("%[1]s and %[1]s_wo are the same value: set only one of them (%[1]s_wo, on Terraform 1.11 and later, keeps it out of the plan and the state)", name))
				case !woNull && versionNull:
					diags.AddAttributeError(path.Root(name+woVersionSuffix), "Missing "+name+woVersionSuffix,
						fmt.Sprintf("%[1]s_wo_version is required with %[1]s_wo: Terraform does not store %[1]s_wo, and a change of %[1]s_wo_version is what sends a new value", name))
				case woNull && !versionNull:
					diags.AddAttributeError(path.Root(name+woVersionSuffix), "Invalid attribute",
						fmt.Sprintf("%[1]s_wo_version is only valid with %[1]s_wo", name))
				}
			}
			return diags
		},
	}
}

// withWriteOnly returns the model m (from a plan, where write-only values are null) with the values of
// the write-only attributes from the configuration, the only place they are.
func (k *kind[S, T, M]) withWriteOnly(ctx context.Context, cfg tfsdk.Config, m M) (M, diag.Diagnostics) {
	if len(k.writeOnly()) == 0 {
		return m, nil
	}
	mo, diags := k.modelObject(ctx, &m)
	var whole types.Object
	diags.Append(cfg.Get(ctx, &whole)...)
	if diags.HasError() {
		return m, diags
	}
	attrs := maps.Clone(mo.Attributes())
	for _, name := range k.writeOnly() {
		attrs[name+woSuffix] = whole.Attributes()[name+woSuffix]
	}
	obj, d := types.ObjectValue(mo.AttributeTypes(ctx), attrs)
	diags.Append(d...)
	if diags.HasError() {
		return m, diags
	}
	return k.modelFrom(ctx, obj)
}

// withWriteOnlyAttributes are the kind's spec attributes and their write-only twins.
func (k *kind[S, T, M]) withWriteOnlyAttributes() map[string]rschema.Attribute {
	attrs := maps.Clone(k.attributes)
	for name, a := range k.writeOnlyAttributes() {
		if _, dup := attrs[name]; dup {
			panic(fmt.Sprintf("provider: kind %s: attribute %q is declared, and is a write-only twin", k.name, name))
		}
		attrs[name] = a
	}
	return attrs
}
