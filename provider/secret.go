package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// secretModel is qleet_secret.
type secretModel struct {
	objectMeta
	InstanceIDs types.List   `tfsdk:"instance_ids"`
	Values      types.Map    `tfsdk:"values"`
	ValuesWO    types.Map    `tfsdk:"values_wo"`
	ValuesWOVer types.Int64  `tfsdk:"values_wo_version"`
	MountPath   types.String `tfsdk:"mount_path"`
}

var secretKind = &kind[api.SecretSpec, api.SecretStatus, secretModel]{
	name: api.KindSecret,
	api:  (*client.Client).Secrets,
	attributes: map[string]rschema.Attribute{
		"instance_ids": rschema.ListAttribute{
			Description: "The IDs of the qleet_workload_instances the values serve.",
			Required:    true,
			ElementType: types.StringType,
			Validators:  []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues()},
		},
		"values": rschema.MapAttribute{
			Description: "The values by key; each key becomes an environment variable (or a file under mount_path). " +
				"Exactly one of `values` and `values_wo` must be set. `values` is kept in the Terraform state (sensitive); " +
				"on Terraform 1.11 and later, `values_wo` with `values_wo_version` keeps them out of the plan and the state.",
			Optional:    true,
			Sensitive:   true,
			ElementType: types.StringType,
			Validators:  []validator.Map{mapvalidator.SizeAtLeast(1)},
		},
		"mount_path": rschema.StringAttribute{
			Description: "Mount the values as files under this absolute path in every container, instead of env.",
			Optional:    true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"keys":      rschema.ListAttribute{Description: "The keys of the values (never the values).", Computed: true, ElementType: types.StringType},
		"instances": rschema.Int64Attribute{Description: "How many of the named instances exist.", Computed: true},
	},
	validators: []resource.ConfigValidator{resourcevalidator.ExactlyOneOf(path.MatchRoot("values"), path.MatchRoot("values_wo"))},
	toSpec: func(ctx context.Context, m *secretModel) (api.SecretSpec, diag.Diagnostics) {
		ids, diags := stringsOf(ctx, m.InstanceIDs)
		values, d := stringMapOf(ctx, m.Values)
		if !m.ValuesWO.IsNull() {
			values, d = stringMapOf(ctx, m.ValuesWO)
		}
		diags.Append(d...)
		return api.SecretSpec{InstanceIDs: ids, Values: values, MountPath: m.MountPath.ValueString()}, diags
	},
	fromSpec: func(_ context.Context, s *api.SecretSpec, m *secretModel) diag.Diagnostics {
		m.InstanceIDs = stringListValue(m.InstanceIDs, s.InstanceIDs)
		// Only the controller role reads them back; keep the configured values, and none when they are
		// write-only (values_wo_version set).
		if len(s.Values) > 0 && m.ValuesWOVer.IsNull() {
			m.Values = stringMapValue(m.Values, s.Values)
		} else if m.Values.IsUnknown() {
			m.Values = types.MapNull(types.StringType)
		}
		m.MountPath = stringValue(m.MountPath, s.MountPath)
		return nil
	},
	statusValues: func(t *api.SecretStatus) attrValues {
		return attrValues{"keys": stringListValue(types.ListUnknown(types.StringType), t.Keys), "instances": types.Int64Value(int64(t.Instances))}
	},
	createTimeout: time.Minute,
	updateTimeout: time.Minute,
	deleteTimeout: 5 * time.Minute,
}
