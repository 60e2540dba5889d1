package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// TestWriteOnlyTwinsOfEveryWriteOnlyField: every field the registry marks write-only, in every kind the
// provider serves, has a sensitive write-only twin of the same type and a version attribute, and
// neither is in the kind's data sources.
func TestWriteOnlyTwinsOfEveryWriteOnlyField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := New("test")()
	resources := map[string]resource.Resource{}
	for _, f := range p.Resources(ctx) {
		r := f()
		var resp resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "qleet"}, &resp)
		resources[resp.TypeName] = r
	}
	dataSources := map[string]datasource.DataSource{}
	for _, f := range p.DataSources(ctx) {
		d := f()
		var resp datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "qleet"}, &resp)
		dataSources[resp.TypeName] = d
	}
	fields := 0
	for _, ki := range api.Kinds() {
		if len(ki.WriteOnly) == 0 {
			continue
		}
		r := resources["qleet_"+ki.Kind]
		require.NotNil(t, r, ki.Kind)
		var sresp resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sresp)
		require.False(t, sresp.Diagnostics.HasError(), "%v", sresp.Diagnostics)
		require.False(t, sresp.Schema.ValidateImplementation(ctx).HasError())
		for _, f := range ki.WriteOnly {
			fields++
			plain, wo, version := sresp.Schema.Attributes[f], sresp.Schema.Attributes[f+"_wo"], sresp.Schema.Attributes[f+"_wo_version"]
			require.NotNil(t, plain, "%s.%s", ki.Kind, f)
			require.NotNil(t, wo, "%s.%s_wo", ki.Kind, f)
			require.NotNil(t, version, "%s.%s_wo_version", ki.Kind, f)
			require.True(t, plain.IsOptional() && !plain.IsRequired(), "%s.%s: optional, so that the write-only twin can replace it", ki.Kind, f)
			require.True(t, wo.IsWriteOnly() && wo.IsSensitive() && wo.IsOptional(), "%s.%s_wo", ki.Kind, f)
			require.True(t, wo.GetType().Equal(plain.GetType()), "%s.%s_wo has the type of %s", ki.Kind, f, f)
			require.True(t, version.GetType().Equal(types.Int64Type) && version.IsOptional() && !version.IsWriteOnly(), "%s.%s_wo_version", ki.Kind, f)
			require.Contains(t, wo.GetDescription(), f+"_wo_version", "the twin says a version change sends the value")
			require.Contains(t, plain.GetDescription(), f+"_wo", "the plain attribute points at its twin")
			for _, ds := range []string{"qleet_" + ki.Kind, "qleet_" + ki.Plural} {
				var dresp datasource.SchemaResponse
				dataSources[ds].Schema(ctx, datasource.SchemaRequest{}, &dresp)
				attrs := dresp.Schema.Type().(types.ObjectType).AttrTypes
				if items, ok := attrs["items"]; ok { // the list data source
					attrs = items.(types.ListType).ElemType.(types.ObjectType).AttrTypes
				}
				for _, name := range []string{f, f + "_wo", f + "_wo_version"} {
					require.NotContains(t, attrs, name, "data source %s", ds)
				}
			}
		}
	}
	require.Equal(t, 4, fields, "secret values, the kubeconfig, and the cloud account's secret key and session token")
}

// configOf is a resource configuration: the given attribute values, every other attribute null.
func configOf(t *testing.T, r resource.Resource, values map[string]tftypes.Value) tfsdk.Config {
	t.Helper()
	ctx := context.Background()
	var resp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &resp)
	typ := resp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	for name, v := range values {
		_, ok := typ.AttributeTypes[name]
		require.True(t, ok, "no attribute %s", name)
		vals[name] = v
	}
	return tfsdk.Config{Schema: resp.Schema, Raw: tftypes.NewValue(typ, vals)}
}

// validate runs a resource's config validators and returns the errors, one "path: detail" each.
func validate(t *testing.T, r resource.Resource, cfg tfsdk.Config) []string {
	t.Helper()
	ctx := context.Background()
	var errs []string
	for _, v := range r.(resource.ResourceWithConfigValidators).ConfigValidators(ctx) {
		var resp resource.ValidateConfigResponse
		v.ValidateResource(ctx, resource.ValidateConfigRequest{Config: cfg}, &resp)
		for _, d := range resp.Diagnostics.Errors() {
			p := ""
			if wp, ok := d.(diag.DiagnosticWithPath); ok {
				p = wp.Path().String()
			}
			errs = append(errs, strings.TrimPrefix(p+": ", ": ")+d.Detail())
		}
	}
	return errs
}

func TestWriteOnlyConfigRules(t *testing.T) {
	t.Parallel()
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, n) }
	strMap := tftypes.Map{ElementType: tftypes.String}
	values := tftypes.NewValue(strMap, map[string]tftypes.Value{"K": str("v")})
	ids := tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{str("i")})
	secret := secretKind.resource()
	runtime := kubernetesRuntimeKind.resource()
	account := newCloudAccountResource()
	cases := []struct {
		name   string
		r      resource.Resource
		config map[string]tftypes.Value
		want   []string // substrings of the errors, in any order; none when empty
	}{
		{"secret with values", secret, map[string]tftypes.Value{"name": str("s"), "instance_ids": ids, "values": values}, nil},
		{"secret with values_wo and its version", secret,
			map[string]tftypes.Value{"name": str("s"), "instance_ids": ids, "values_wo": values, "values_wo_version": num(1)}, nil},
		{"secret with both", secret,
			map[string]tftypes.Value{"name": str("s"), "instance_ids": ids, "values": values, "values_wo": values, "values_wo_version": num(1)},
			[]string{"values_wo: values and values_wo are the same value: set only one of them", "Exactly one of these attributes must be configured"}},
		{"secret with neither", secret, map[string]tftypes.Value{"name": str("s"), "instance_ids": ids},
			[]string{"Exactly one of these attributes must be configured: [values,values_wo]"}},
		{"values_wo without its version", secret,
			map[string]tftypes.Value{"name": str("s"), "instance_ids": ids, "values_wo": values},
			[]string{"values_wo_version: values_wo_version is required with values_wo"}},
		{"a version without values_wo", secret,
			map[string]tftypes.Value{"name": str("s"), "instance_ids": ids, "values": values, "values_wo_version": num(1)},
			[]string{"values_wo_version: values_wo_version is only valid with values_wo"}},
		{"kubeconfig runtime with kubeconfig_wo", runtime,
			map[string]tftypes.Value{"name": str("r"), "provider_type": str("kubeconfig"), "kubeconfig_wo": str("k"), "kubeconfig_wo_version": num(1)}, nil},
		{"kubeconfig runtime with neither", runtime, map[string]tftypes.Value{"name": str("r"), "provider_type": str("kubeconfig")},
			[]string{"kubeconfig: kubeconfig is required for kubeconfig runtimes (or kubeconfig_wo"}},
		{"kubeconfig runtime with both", runtime,
			map[string]tftypes.Value{"name": str("r"), "provider_type": str("kubeconfig"), "kubeconfig": str("k"), "kubeconfig_wo": str("k"), "kubeconfig_wo_version": num(1)},
			[]string{"kubeconfig_wo: kubeconfig and kubeconfig_wo are the same value"}},
		{"kubeconfig_wo on a local runtime", runtime,
			map[string]tftypes.Value{"name": str("r"), "provider_type": str("local"), "kubeconfig_wo": str("k"), "kubeconfig_wo_version": num(1)},
			[]string{"kubeconfig_wo: kubeconfig_wo is only valid for kubeconfig runtimes, not local"}},
		{"cloud account with write-only keys", account,
			map[string]tftypes.Value{"name": str("a"), "provider_type": str("aws"), "region": str("us-east-1"), "access_key_id": str("AKIA"),
				"secret_access_key_wo": str("s"), "secret_access_key_wo_version": num(1), "session_token_wo": str("t"), "session_token_wo_version": num(3)}, nil},
		{"cloud account with both secret keys", account,
			map[string]tftypes.Value{"name": str("a"), "provider_type": str("aws"), "region": str("us-east-1"), "access_key_id": str("AKIA"),
				"secret_access_key": str("s"), "secret_access_key_wo": str("s"), "secret_access_key_wo_version": num(1)},
			[]string{"secret_access_key_wo: secret_access_key and secret_access_key_wo are the same value"}},
		{"cloud account session token version alone", account,
			map[string]tftypes.Value{"name": str("a"), "provider_type": str("aws"), "region": str("us-east-1"), "session_token_wo_version": num(1)},
			[]string{"session_token_wo_version: session_token_wo_version is only valid with session_token_wo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := validate(t, tc.r, configOf(t, tc.r, tc.config))
			require.Len(t, errs, len(tc.want), "%q", errs)
			for _, w := range tc.want {
				found := false
				for _, e := range errs {
					found = found || strings.Contains(e, w)
				}
				require.True(t, found, "want an error with %q, got %q", w, errs)
			}
		})
	}
}

// TestWriteOnlySentFromConfigKeptFromState: create and update send the write-only value of the
// configuration (the plan holds it as null), and a read with a token that may see the value back keeps
// it out of the model when the write-only twin is in use.
func TestWriteOnlySentFromConfigKeptFromState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := secretKind
	r := k.resource()
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	values := tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{"TOKEN": str("marker")})
	cfg := configOf(t, r, map[string]tftypes.Value{"name": str("s"),
		"instance_ids":      tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{str("i")}),
		"values_wo":         values,
		"values_wo_version": tftypes.NewValue(tftypes.Number, 2),
	})
	planned := secretModel{objectMeta: objectMeta{Name: types.StringValue("s"), Labels: types.MapNull(types.StringType),
		ID: types.StringUnknown(), CreatedAt: types.StringUnknown(), Status: types.ObjectUnknown(objectTypeOf(k.statusSchema()).AttrTypes)},
		InstanceIDs: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("i")}),
		Values:      types.MapNull(types.StringType), ValuesWO: types.MapNull(types.StringType), ValuesWOVer: types.Int64Value(2),
		MountPath: types.StringNull()}

	obj, diags := k.toObject(ctx, &planned)
	require.False(t, diags.HasError(), "%v", diags)
	require.Empty(t, obj.Spec.Values, "the plan alone has no value")
	sent, diags := k.withWriteOnly(ctx, cfg, planned)
	require.False(t, diags.HasError(), "%v", diags)
	obj, diags = k.toObject(ctx, &sent)
	require.False(t, diags.HasError(), "%v", diags)
	require.Equal(t, map[string]string{"TOKEN": "marker"}, obj.Spec.Values, "the configuration's write-only value is sent")

	// The API answers with the values (a token with the read-secrets permission): the state keeps none.
	obj.ID = "0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e"
	m, diags := k.toModel(ctx, obj, planned)
	require.False(t, diags.HasError(), "%v", diags)
	require.True(t, m.Values.IsNull(), "values read back stay out of the state when values_wo is used: %v", m.Values)
	require.Equal(t, int64(2), m.ValuesWOVer.ValueInt64())
	// Without the twin, as before, the values read back are kept.
	planned.ValuesWOVer = types.Int64Null()
	m, diags = k.toModel(ctx, obj, planned)
	require.False(t, diags.HasError(), "%v", diags)
	require.False(t, m.Values.IsNull())

	// The runtime's kubeconfig and the account's keys take the write-only value alike.
	rm := kubernetesRuntimeModel{Provider: types.StringValue("kubeconfig"), KubeWO: types.StringValue("apiVersion: v1"), KubeWOVer: types.Int64Value(1)}
	spec, diags := kubernetesRuntimeKind.toSpec(ctx, &rm)
	require.False(t, diags.HasError(), "%v", diags)
	require.Equal(t, "apiVersion: v1", spec.Kubeconfig)
	rm.Kubeconfig = types.StringNull()
	require.False(t, kubernetesRuntimeKind.fromSpec(ctx, &spec, &rm).HasError())
	require.True(t, rm.Kubeconfig.IsNull(), "a kubeconfig read back stays out of the state when kubeconfig_wo is used")
	am := cloudAccountModel{SecretKeyWO: types.StringValue("sk"), SecretKeyWOVer: types.Int64Value(1), SessionWO: types.StringValue("st"), SessionWOVer: types.Int64Value(1)}
	aspec, diags := cloudAccountKind.toSpec(ctx, &am)
	require.False(t, diags.HasError(), "%v", diags)
	require.Equal(t, [2]string{"sk", "st"}, [2]string{aspec.SecretAccessKey, aspec.SessionToken})
	am.SecretAccessKey, am.SessionToken = types.StringNull(), types.StringNull()
	require.False(t, cloudAccountKind.fromSpec(ctx, &aspec, &am).HasError())
	require.True(t, am.SecretAccessKey.IsNull() && am.SessionToken.IsNull(), "keys read back stay out of the state when the _wo twins are used")
}
