package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// runtimeProfileModel is qleet_runtime_profile.
type runtimeProfileModel struct {
	objectMeta
	Provider          types.String `tfsdk:"provider_type"`
	Regions           types.List   `tfsdk:"regions"`
	Nodes             types.Int64  `tfsdk:"nodes"`
	MinNodes          types.Int64  `tfsdk:"min_nodes"`
	MaxNodes          types.Int64  `tfsdk:"max_nodes"`
	KubernetesVersion types.String `tfsdk:"kubernetes_version"`
	RuntimeLabels     types.Map    `tfsdk:"runtime_labels"`
	Priority          types.Int64  `tfsdk:"priority"`
	ReclaimAfter      types.String `tfsdk:"reclaim_after"`
	CloudAccountID    types.String `tfsdk:"cloud_account_id"`
	NodeType          types.String `tfsdk:"node_type"`
}

var runtimeProfileKind = &kind[api.RuntimeProfileSpec, api.RuntimeProfileStatus, runtimeProfileModel]{
	name: api.KindRuntimeProfile,
	api:  (*client.Client).RuntimeProfiles,
	attributes: map[string]rschema.Attribute{
		"provider_type": rschema.StringAttribute{
			Description: "The provider of the clusters it provisions: `local` (kubesim clusters run by `qleet server`) or `eks` (EKS clusters provisioned with `cloud_account_id`).",
			Required:    true,
			Validators:  []validator.String{stringvalidator.OneOf(api.ProviderLocal, api.ProviderEKS)},
		},
		"regions": rschema.ListAttribute{
			Description: "The regions it may provision clusters in, DNS-1123 labels such as `eu-west` (AWS regions such as `us-east-1` for eks).",
			Required:    true,
			ElementType: types.StringType,
			Validators:  []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues()},
		},
		"nodes": rschema.Int64Attribute{
			Description:   "The initial node count of each cluster, 1-100 (the API defaults it to 3, or min_nodes when larger).",
			Optional:      true,
			Computed:      true,
			Validators:    []validator.Int64{int64validator.Between(1, 100)},
			PlanModifiers: []planmodifier.Int64{serverDefault{value: 3}},
		},
		"min_nodes": rschema.Int64Attribute{
			Description: "The lower node bound when node autoscaling is on (max_nodes set).",
			Optional:    true,
			Validators:  []validator.Int64{int64validator.AtLeast(0)},
		},
		"max_nodes": rschema.Int64Attribute{
			Description: "The upper node bound: nodes are added while pods cannot be scheduled for lack of capacity, and idle added nodes removed. Unset turns node autoscaling off.",
			Optional:    true,
			Validators:  []validator.Int64{int64validator.Between(0, 100)},
		},
		"kubernetes_version": rschema.StringAttribute{
			Description: "The Kubernetes version the clusters must run, e.g. `v1.31` (local clusters run kubesim's, v1.31).",
			Optional:    true,
		},
		"runtime_labels": rschema.MapAttribute{
			Description: "Labels given to every runtime it provisions; a placement's `runtime_selector` matches them.",
			Optional:    true,
			ElementType: types.StringType,
		},
		"priority": rschema.Int64Attribute{
			Description: "Orders profiles that could serve the same placement: the highest wins. Equal priorities of overlapping profiles are refused.",
			Optional:    true,
		},
		"cloud_account_id": rschema.StringAttribute{
			Description: "The ID of the qleet_cloud_account that eks clusters are provisioned with. Required for eks, invalid for local.",
			Optional:    true,
		},
		"node_type": rschema.StringAttribute{
			Description: "The EC2 instance type of eks clusters' node groups (default `t3.medium`). Only valid for eks.",
			Optional:    true,
		},
		"reclaim_after": rschema.StringAttribute{
			Description: "A duration such as `30m`: a runtime provisioned from the profile is deleted once nothing has been placed on it for that long. Unset: never.",
			Optional:    true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"runtimes": rschema.Int64Attribute{Description: "The runtimes provisioned from the profile that exist now.", Computed: true},
	},
	renames: map[string]string{"provider": "provider_type"},
	toSpec: func(ctx context.Context, m *runtimeProfileModel) (api.RuntimeProfileSpec, diag.Diagnostics) {
		regions, diags := stringsOf(ctx, m.Regions)
		labels, d := stringMapOf(ctx, m.RuntimeLabels)
		diags.Append(d...)
		return api.RuntimeProfileSpec{
			Provider: m.Provider.ValueString(), Regions: regions,
			Nodes: int(m.Nodes.ValueInt64()), MinNodes: int(m.MinNodes.ValueInt64()), MaxNodes: int(m.MaxNodes.ValueInt64()),
			KubernetesVersion: m.KubernetesVersion.ValueString(), RuntimeLabels: labels,
			Priority: int(m.Priority.ValueInt64()), ReclaimAfter: m.ReclaimAfter.ValueString(),
			CloudAccountID: m.CloudAccountID.ValueString(), NodeType: m.NodeType.ValueString(),
		}, diags
	},
	fromSpec: func(_ context.Context, s *api.RuntimeProfileSpec, m *runtimeProfileModel) diag.Diagnostics {
		m.Provider = types.StringValue(s.Provider)
		m.Regions = stringListValue(m.Regions, s.Regions)
		m.Nodes = types.Int64Value(int64(s.Nodes))
		m.MinNodes = int64Value(m.MinNodes, int64(s.MinNodes))
		m.MaxNodes = int64Value(m.MaxNodes, int64(s.MaxNodes))
		m.KubernetesVersion = stringValue(m.KubernetesVersion, s.KubernetesVersion)
		m.RuntimeLabels = stringMapValue(m.RuntimeLabels, s.RuntimeLabels)
		m.Priority = int64Value(m.Priority, int64(s.Priority))
		m.ReclaimAfter = stringValue(m.ReclaimAfter, s.ReclaimAfter)
		m.CloudAccountID = stringValue(m.CloudAccountID, s.CloudAccountID)
		m.NodeType = stringValue(m.NodeType, s.NodeType)
		return nil
	},
	statusValues: func(t *api.RuntimeProfileStatus) attrValues {
		return attrValues{"runtimes": types.Int64Value(int64(t.Runtimes))}
	},
	createTimeout: time.Minute,
	updateTimeout: time.Minute,
	deleteTimeout: 10 * time.Minute,
}
