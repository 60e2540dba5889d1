package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/qleetos/terraform-provider-qleet/api"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Plan-time validators. They apply the rules the API applies, where they are known without the server,
// so that bad input fails at plan with the attribute underlined. The API's field errors remain the
// backstop (see apiDiagnostics).

// stringCheck is a string validator from a function that returns the problems with a known value.
type stringCheck struct {
	desc  string
	check func(string) []string
}

func (v stringCheck) Description(context.Context) string         { return v.desc }
func (v stringCheck) MarkdownDescription(context.Context) string { return v.desc }

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if !known(req.ConfigValue) {
		return
	}
	for _, msg := range v.check(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", fmt.Sprintf("%q %s", req.ConfigValue.ValueString(), msg))
	}
}

// dns1123Label accepts a DNS-1123 label, as object names, container names and namespaces must be.
func dns1123Label() validator.String {
	return stringCheck{
		desc: "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
		check: func(s string) []string {
			msgs := validation.IsDNS1123Label(s)
			for i := range msgs {
				msgs[i] = "is not a DNS-1123 label: " + msgs[i]
			}
			return msgs
		},
	}
}

// imageRef accepts an OCI image reference such as "nginx:1.27".
func imageRef() validator.String {
	return stringCheck{
		desc: "must be an OCI image reference, e.g. nginx:1.27 or ghcr.io/org/app@sha256:...",
		check: func(s string) []string {
			if err := api.ValidateImage(s); err != nil {
				return []string{err.Error()}
			}
			return nil
		},
	}
}

// labelSelector accepts "k=v,k2=v2".
func labelSelector() validator.String {
	return stringCheck{
		desc: `must be a comma-separated list of key=value pairs, e.g. "env=prod,team=web"`,
		check: func(s string) []string {
			var msgs []string
			for _, part := range strings.Split(s, ",") {
				k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
				if !ok || strings.TrimSpace(k) == "" {
					msgs = append(msgs, fmt.Sprintf("is not a label selector: %q is not key=value", part))
					continue
				}
				for _, fe := range api.ValidateMeta("x", map[string]string{strings.TrimSpace(k): strings.TrimSpace(v)}) {
					msgs = append(msgs, fmt.Sprintf("is not a label selector: %q: %s", part, fe.Message))
				}
			}
			return msgs
		},
	}
}

// labelsCheck validates labels with the API's own rules.
type labelsCheck struct{}

func (labelsCheck) Description(context.Context) string {
	return "keys and values must follow Kubernetes label syntax"
}
func (v labelsCheck) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (labelsCheck) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if !known(req.ConfigValue) {
		return
	}
	for k, v := range req.ConfigValue.Elements() {
		s, ok := v.(types.String)
		if !ok || !known(s) {
			continue
		}
		for _, fe := range api.ValidateMeta("x", map[string]string{k: s.ValueString()}) {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid label", fmt.Sprintf("label %q: %s", k, fe.Message))
		}
	}
}

func labelsValidators() []validator.Map { return []validator.Map{labelsCheck{}} }

// objectRule is an object validator from a function that returns the problems with a known object.
// The function sees the object's attributes; unknown ones are its to skip.
type objectRule struct {
	desc  string
	check func(attrs map[string]attr.Value) []string
}

func (v objectRule) Description(context.Context) string         { return v.desc }
func (v objectRule) MarkdownDescription(context.Context) string { return v.desc }

func (v objectRule) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if !known(req.ConfigValue) {
		return
	}
	for _, msg := range v.check(req.ConfigValue.Attributes()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", msg)
	}
}

// knownInt returns an integer attribute's value, and whether it is known.
func knownInt(v attr.Value) (int64, bool) {
	i, ok := v.(types.Int64)
	if !ok || !known(i) {
		return 0, false
	}
	return i.ValueInt64(), true
}

// configRule is a resource config validator from a function over the whole configuration.
type configRule struct {
	desc  string
	check func(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics
}

var _ resource.ConfigValidator = configRule{}

func (v configRule) Description(context.Context) string         { return v.desc }
func (v configRule) MarkdownDescription(context.Context) string { return v.desc }

func (v configRule) ValidateResource(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	resp.Diagnostics.Append(v.check(ctx, req.Config)...)
}
