package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// kubernetesRuntimeModel is qleet_kubernetes_runtime.
type kubernetesRuntimeModel struct {
	objectMeta
	Provider   types.String `tfsdk:"provider_type"`
	Region     types.String `tfsdk:"region"`
	Zones      types.List   `tfsdk:"zones"`
	Nodes      types.Int64  `tfsdk:"nodes"`
	MinNodes   types.Int64  `tfsdk:"min_nodes"`
	MaxNodes   types.Int64  `tfsdk:"max_nodes"`
	Kubeconfig types.String `tfsdk:"kubeconfig"`
	KubeWO     types.String `tfsdk:"kubeconfig_wo"`
	KubeWOVer  types.Int64  `tfsdk:"kubeconfig_wo_version"`
	Context    types.String `tfsdk:"context"`
	Version    types.String `tfsdk:"kubernetes_version"`
	Account    types.String `tfsdk:"cloud_account_id"`
	NodeType   types.String `tfsdk:"node_type"`
	SubnetIDs  types.List   `tfsdk:"subnet_ids"`
}

var kubernetesRuntimeKind = &kind[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus, kubernetesRuntimeModel]{
	name: api.KindKubernetesRuntime,
	api:  (*client.Client).KubernetesRuntimes,
	attributes: map[string]rschema.Attribute{
		"provider_type": rschema.StringAttribute{
			Description: "Where the cluster comes from (the API's spec.provider; `provider` is reserved in Terraform): `local` (a kubesim cluster owned by the control plane), `kubeconfig` " +
				"(an existing cluster reached with `kubeconfig`) or `eks`. Changing it replaces the runtime.",
			Required:      true,
			Validators:    []validator.String{stringvalidator.OneOf(api.ProviderLocal, api.ProviderKubeconfig, api.ProviderEKS)},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"region": rschema.StringAttribute{
			Description: "The region the cluster lives in, e.g. `us-east-1` (required for eks). Local clusters label their nodes with it.",
			Optional:    true,
		},
		"zones": rschema.ListAttribute{
			Description: "Availability zones of a local cluster's nodes (or of an eks cluster, within region).",
			ElementType: types.StringType,
			Optional:    true,
			Validators:  []validator.List{listvalidator.UniqueValues()},
		},
		"nodes": rschema.Int64Attribute{
			Description:   "The node count of a local cluster, 0-100 (the API defaults it to 3), or the initial size of an eks cluster's node group (default 2, within min_nodes and max_nodes). Not valid for kubeconfig runtimes.",
			Optional:      true,
			Computed:      true,
			Validators:    []validator.Int64{int64validator.Between(0, 100)},
			PlanModifiers: []planmodifier.Int64{serverDefault{value: 3, when: path.Root("provider_type"), whenValue: api.ProviderLocal}},
		},
		"min_nodes": rschema.Int64Attribute{
			Description: "The lower node bound for autoscaling, where the provider supports it (an eks node group's minimum size).",
			Optional:    true,
			Validators:  []validator.Int64{int64validator.AtLeast(0)},
		},
		"max_nodes": rschema.Int64Attribute{
			Description: "The upper node bound for autoscaling, at least min_nodes.",
			Optional:    true,
			Validators:  []validator.Int64{int64validator.AtLeast(0)},
		},
		"kubeconfig": rschema.StringAttribute{
			Description: "The kubeconfig document of a kubeconfig runtime, e.g. `file(\"~/.kube/config\")`, with certificates and " +
				"tokens embedded (no file paths, no exec plugins). Write-only in the API, which returns it to controllers only: the " +
				"state keeps it from the configuration, and drift in it is not seen. A kubeconfig runtime needs exactly one of `kubeconfig` and " +
				"`kubeconfig_wo`; on Terraform 1.11 and later, `kubeconfig_wo` with `kubeconfig_wo_version` keeps it out of the plan and the state.",
			Optional:  true,
			Sensitive: true,
		},
		"context": rschema.StringAttribute{
			Description: "The kubeconfig context to use; the kubeconfig's current context when unset.",
			Optional:    true,
		},
		"kubernetes_version": rschema.StringAttribute{
			Description: "The Kubernetes version the cluster must run, e.g. `v1.31`; a cluster running another fails the runtime. Any when unset.",
			Optional:    true,
		},
		"cloud_account_id": rschema.StringAttribute{
			Description:   "The ID of the qleet_cloud_account an eks runtime is provisioned with. Required for eks. Changing it replaces the runtime.",
			Optional:      true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"node_type": rschema.StringAttribute{
			Description: "The EC2 instance type of an eks runtime's node group (the API defaults it to `t3.medium`). Only valid for eks.",
			Optional:    true,
			Computed:    true,
		},
		"subnet_ids": rschema.ListAttribute{
			Description:   "Existing subnets (in two zones at least) for an eks cluster; QleetOS makes a VPC with two subnets when unset. Only valid for eks. Changing them replaces the runtime.",
			Optional:      true,
			ElementType:   types.StringType,
			Validators:    []validator.List{listvalidator.UniqueValues()},
			PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"endpoint":    rschema.StringAttribute{Description: "The cluster's API server address.", Computed: true},
		"version":     rschema.StringAttribute{Description: "The Kubernetes server version, e.g. v1.31.4.", Computed: true},
		"nodes_ready": rschema.Int64Attribute{Description: "Nodes whose Ready condition is True.", Computed: true},
		"nodes_total": rschema.Int64Attribute{Description: "All nodes.", Computed: true},
		"region":      rschema.StringAttribute{Description: "The region the nodes report in their topology labels.", Computed: true},
	},
	renames:    map[string]string{"provider": "provider_type"},
	validators: []resource.ConfigValidator{kubernetesRuntimeRules},
	toSpec: func(ctx context.Context, m *kubernetesRuntimeModel) (api.KubernetesRuntimeSpec, diag.Diagnostics) {
		zones, diags := stringsOf(ctx, m.Zones)
		subnets, d := stringsOf(ctx, m.SubnetIDs)
		diags.Append(d...)
		return api.KubernetesRuntimeSpec{
			CloudAccountID: m.Account.ValueString(), NodeType: m.NodeType.ValueString(), SubnetIDs: subnets,
			Provider:   m.Provider.ValueString(),
			Region:     m.Region.ValueString(),
			Zones:      zones,
			Nodes:      int(m.Nodes.ValueInt64()),
			MinNodes:   int(m.MinNodes.ValueInt64()),
			MaxNodes:   int(m.MaxNodes.ValueInt64()),
			Kubeconfig: m.Kubeconfig.ValueString() + m.KubeWO.ValueString(), // at most one is set
			Context:    m.Context.ValueString(),

			KubernetesVersion: m.Version.ValueString(),
		}, diags
	},
	fromSpec: func(_ context.Context, s *api.KubernetesRuntimeSpec, m *kubernetesRuntimeModel) diag.Diagnostics {
		m.Provider = types.StringValue(s.Provider)
		m.Region = stringValue(m.Region, s.Region)
		m.Zones = stringListValue(m.Zones, s.Zones)
		m.Nodes = int64Value(m.Nodes, int64(s.Nodes))
		m.MinNodes = int64Value(m.MinNodes, int64(s.MinNodes))
		m.MaxNodes = int64Value(m.MaxNodes, int64(s.MaxNodes))
		// Only the controller role reads it back; keep the configured value, and none when it is
		// write-only (kubeconfig_wo_version set).
		if s.Kubeconfig != "" && m.KubeWOVer.IsNull() {
			m.Kubeconfig = types.StringValue(s.Kubeconfig)
		} else if m.Kubeconfig.IsUnknown() {
			m.Kubeconfig = types.StringNull()
		}
		m.Context = stringValue(m.Context, s.Context)
		m.Version = stringValue(m.Version, s.KubernetesVersion)
		m.Account = stringValue(m.Account, s.CloudAccountID)
		m.NodeType = stringValue(m.NodeType, s.NodeType)
		m.SubnetIDs = stringListValue(m.SubnetIDs, s.SubnetIDs)
		return nil
	},
	statusValues: func(t *api.KubernetesRuntimeStatus) attrValues {
		return attrValues{
			"endpoint":    types.StringValue(t.Endpoint),
			"version":     types.StringValue(t.Version),
			"nodes_ready": types.Int64Value(int64(t.NodesReady)),
			"nodes_total": types.Int64Value(int64(t.NodesTotal)),
			"region":      types.StringValue(t.Region),
		}
	},
	createTimeout: 20 * time.Minute,
	updateTimeout: 20 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}

// kubernetesRuntimeRules are the cross-attribute rules of a runtime the API enforces.
var kubernetesRuntimeRules = configRule{
	desc: "kubeconfig or kubeconfig_wo and context only (and one of kubeconfig and kubeconfig_wo always) with provider_type kubeconfig; nodes not with kubeconfig; region and cloud_account_id with eks, node_type and subnet_ids only with eks; min_nodes <= max_nodes",
	check: func(ctx context.Context, cfg tfsdk.Config) diag.Diagnostics {
		var m kubernetesRuntimeModel
		var diags diag.Diagnostics
		for name, target := range map[string]any{
			"provider_type": &m.Provider, "kubeconfig": &m.Kubeconfig, "kubeconfig_wo": &m.KubeWO, "context": &m.Context, "region": &m.Region,
			"nodes": &m.Nodes, "min_nodes": &m.MinNodes, "max_nodes": &m.MaxNodes,
			"cloud_account_id": &m.Account, "node_type": &m.NodeType, "subnet_ids": &m.SubnetIDs,
		} {
			diags.Append(cfg.GetAttribute(ctx, path.Root(name), target)...)
		}
		if diags.HasError() || !known(m.Provider) {
			return diags
		}
		p := m.Provider.ValueString()
		onlyFor := func(attr string, v interface{ IsNull() bool }, provider string) {
			if !v.IsNull() && p != provider {
				diags.AddAttributeError(path.Root(attr), "Invalid attribute for this provider",
					attr+" is only valid for "+provider+" runtimes, not "+p)
			}
		}
		onlyFor("kubeconfig", m.Kubeconfig, api.ProviderKubeconfig)
		onlyFor("kubeconfig_wo", m.KubeWO, api.ProviderKubeconfig)
		onlyFor("context", m.Context, api.ProviderKubeconfig)
		if !m.Nodes.IsNull() && p == api.ProviderKubeconfig {
			diags.AddAttributeError(path.Root("nodes"), "Invalid attribute for this provider", "nodes is only valid for local and eks runtimes, not kubeconfig")
		}
		onlyFor("cloud_account_id", m.Account, api.ProviderEKS)
		onlyFor("node_type", m.NodeType, api.ProviderEKS)
		onlyFor("subnet_ids", m.SubnetIDs, api.ProviderEKS)
		if p == api.ProviderEKS && m.Account.IsNull() {
			diags.AddAttributeError(path.Root("cloud_account_id"), "Missing cloud_account_id", "cloud_account_id is required for eks runtimes")
		}
		if p == api.ProviderKubeconfig && m.Kubeconfig.IsNull() && m.KubeWO.IsNull() {
			diags.AddAttributeError(path.Root("kubeconfig"), "Missing kubeconfig",
				"kubeconfig is required for kubeconfig runtimes (or kubeconfig_wo, on Terraform 1.11 and later)")
		}
		if p == api.ProviderEKS && m.Region.IsNull() {
			diags.AddAttributeError(path.Root("region"), "Missing region", "region is required for eks runtimes")
		}
		if known(m.MinNodes) && known(m.MaxNodes) && m.MaxNodes.ValueInt64() > 0 && m.MinNodes.ValueInt64() > m.MaxNodes.ValueInt64() {
			diags.AddAttributeError(path.Root("min_nodes"), "Invalid node bounds",
				"min_nodes must not exceed max_nodes")
		}
		return diags
	},
}
