package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/stretchr/testify/require"
)

func validateString(v validator.String, s types.String) []string {
	var resp validator.StringResponse
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: s}, &resp)
	var out []string
	for _, d := range resp.Diagnostics {
		out = append(out, d.Detail())
	}
	return out
}

func TestStringValidators(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		v     validator.String
		value types.String
		ok    bool
	}{
		{"a DNS-1123 label passes", dns1123Label(), types.StringValue("web-1"), true},
		{"uppercase is not a DNS-1123 label", dns1123Label(), types.StringValue("Web"), false},
		{"a 64-character name is too long", dns1123Label(), types.StringValue("a234567890123456789012345678901234567890123456789012345678901234"), false},
		{"unknown values wait for apply", dns1123Label(), types.StringUnknown(), true},
		{"null values are left to Required", dns1123Label(), types.StringNull(), true},
		{"an image reference passes", imageRef(), types.StringValue("ghcr.io/org/app:1.2"), true},
		{"an image with a space fails", imageRef(), types.StringValue("nginx 1.27"), false},
		{"an image with uppercase fails", imageRef(), types.StringValue("NGINX"), false},
		{"a selector passes", labelSelector(), types.StringValue("env=prod,team=web"), true},
		{"a selector without = fails", labelSelector(), types.StringValue("env"), false},
		{"a selector with a bad value fails", labelSelector(), types.StringValue("env=a b"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := validateString(tc.v, tc.value)
			if tc.ok {
				require.Empty(t, msgs)
			} else {
				require.NotEmpty(t, msgs)
			}
		})
	}
}

func TestLabelsValidator(t *testing.T) {
	t.Parallel()
	check := func(m map[string]attr.Value) int {
		var resp validator.MapResponse
		labelsCheck{}.ValidateMap(context.Background(), validator.MapRequest{
			Path: path.Root("labels"), ConfigValue: types.MapValueMust(types.StringType, m),
		}, &resp)
		return resp.Diagnostics.ErrorsCount()
	}
	require.Zero(t, check(map[string]attr.Value{"app.kubernetes.io/name": types.StringValue("web")}))
	require.Equal(t, 1, check(map[string]attr.Value{"bad key!": types.StringValue("web")}))
	require.Equal(t, 1, check(map[string]attr.Value{"ok": types.StringValue("bad value!")}))
}

func objectOfInts(vals map[string]attr.Value, attrs map[string]attr.Type) types.Object {
	return types.ObjectValueMust(attrs, vals)
}

func TestObjectRules(t *testing.T) {
	t.Parallel()
	run := func(r objectRule, o types.Object) []string {
		var resp validator.ObjectResponse
		r.ValidateObject(context.Background(), validator.ObjectRequest{Path: path.Root("x"), ConfigValue: o}, &resp)
		var out []string
		for _, d := range resp.Diagnostics {
			out = append(out, d.Detail())
		}
		return out
	}
	as := func(lo, hi attr.Value) types.Object {
		return objectOfInts(map[string]attr.Value{"min_replicas": lo, "max_replicas": hi, "target_cpu_percent": types.Int64Null()}, autoscalingType.AttrTypes)
	}
	t.Run("autoscaling min above max fails", func(t *testing.T) {
		require.Len(t, run(autoscalingRule, as(types.Int64Value(5), types.Int64Value(2))), 1)
	})
	t.Run("autoscaling min equal to max passes", func(t *testing.T) {
		require.Empty(t, run(autoscalingRule, as(types.Int64Value(2), types.Int64Value(2))))
	})
	t.Run("autoscaling with an unknown bound waits for apply", func(t *testing.T) {
		require.Empty(t, run(autoscalingRule, as(types.Int64Unknown(), types.Int64Value(2))))
	})

	probe := func(httpPath types.String, port types.Int64, tcp types.Bool, exec types.List) types.Object {
		return types.ObjectValueMust(probeType.AttrTypes, map[string]attr.Value{
			"http_get_path": httpPath, "port": port, "tcp": tcp, "exec": exec,
			"initial_delay_seconds": types.Int64Null(), "period_seconds": types.Int64Null(),
		})
	}
	noExec := types.ListNull(types.StringType)
	t.Run("a probe with an HTTP path and a port passes", func(t *testing.T) {
		require.Empty(t, run(probeRule, probe(types.StringValue("/"), types.Int64Value(80), types.BoolNull(), noExec)))
	})
	t.Run("a probe with two actions fails", func(t *testing.T) {
		require.NotEmpty(t, run(probeRule, probe(types.StringValue("/"), types.Int64Value(80), types.BoolValue(true), noExec)))
	})
	t.Run("a probe with no action fails", func(t *testing.T) {
		require.NotEmpty(t, run(probeRule, probe(types.StringNull(), types.Int64Value(80), types.BoolNull(), noExec)))
	})
	t.Run("a TCP probe without a port fails", func(t *testing.T) {
		require.NotEmpty(t, run(probeRule, probe(types.StringNull(), types.Int64Null(), types.BoolValue(true), noExec)))
	})
	t.Run("an exec probe needs no port", func(t *testing.T) {
		exec := types.ListValueMust(types.StringType, []attr.Value{types.StringValue("true")})
		require.Empty(t, run(probeRule, probe(types.StringNull(), types.Int64Null(), types.BoolNull(), exec)))
	})
}
