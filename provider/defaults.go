package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// serverDefault is the plan modifier of an Optional+Computed attribute whose API default is known: when
// the configuration leaves the attribute unset, the plan holds the default. Without it Terraform keeps
// the prior state's value, so removing e.g. `replicas = 3` from a configuration silently kept 3 instead
// of going back to the API's default.
type serverDefault struct {
	value int64
	// when, if set, names a string attribute and the value it must have for the default to apply (e.g.
	// nodes defaults only for provider_type "local").
	when      path.Path
	whenValue string
}

func (m serverDefault) Description(context.Context) string {
	if m.whenValue != "" {
		return fmt.Sprintf("When unset, plans the API default %d (when %s is %q).", m.value, m.when, m.whenValue)
	}
	return fmt.Sprintf("When unset, plans the API default %d.", m.value)
}

func (m serverDefault) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (m serverDefault) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	if !req.ConfigValue.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	if m.whenValue != "" {
		var v types.String
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, m.when, &v)...)
		if v.IsUnknown() {
			resp.PlanValue = types.Int64Unknown()
			return
		}
		if v.ValueString() != m.whenValue {
			return
		}
	}
	resp.PlanValue = types.Int64Value(m.value)
}
