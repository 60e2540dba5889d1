package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// workloadInstanceModel is qleet_workload_instance.
type workloadInstanceModel struct {
	objectMeta
	DefinitionID types.String `tfsdk:"definition_id"`
	RuntimeID    types.String `tfsdk:"runtime_id"`
	Namespace    types.String `tfsdk:"namespace"`
	Replicas     types.Int64  `tfsdk:"replicas"`
	Env          types.Map    `tfsdk:"env"`
	Images       types.Map    `tfsdk:"images"`
	Adopt        types.Bool   `tfsdk:"adopt"`
	Placement    types.Object `tfsdk:"placement"`
	Uses         types.List   `tfsdk:"uses"`
	Databases    types.List   `tfsdk:"databases"`
	Buckets      types.List   `tfsdk:"buckets"`
}

// useModel is one element of qleet_workload_instance.uses.
type useModel struct {
	InstanceID types.String `tfsdk:"instance_id"`
	EnvPrefix  types.String `tfsdk:"env_prefix"`
	Placement  types.String `tfsdk:"placement"`
}

var useAttributes = map[string]rschema.Attribute{
	"instance_id": rschema.StringAttribute{Description: "The ID of the qleet_workload_instance used.", Required: true},
	"env_prefix":  rschema.StringAttribute{Description: "The prefix of the variables this instance gets, e.g. `RPC` for RPC_HOST, RPC_PORT and RPC_URL.", Required: true},
	"placement": rschema.StringAttribute{
		Description: "Where the used instance runs: `own` (the default: where its own runtime_id or placement puts it) or `with_consumers` (QleetOS also places it on every runtime this instance runs on, rolled out there first, and removes it from a runtime when no consumer is left there).",
		Optional:    true,
		Validators:  []validator.String{stringvalidator.OneOf(api.UseOwnPlacement, api.UseWithConsumers)},
	},
}

var useType = objectTypeOf(useAttributes)

// placementModel is qleet_workload_instance.placement.
type placementModel struct {
	Regions            types.List   `tfsdk:"regions"`
	RuntimeSelector    types.Map    `tfsdk:"runtime_selector"`
	Spread             types.String `tfsdk:"spread"`
	Runtimes           types.Int64  `tfsdk:"runtimes"`
	ReplicasMode       types.String `tfsdk:"replicas_mode"`
	Weights            types.Map    `tfsdk:"weights"`
	Failover           types.Bool   `tfsdk:"failover"`
	FailoverToleration types.Int64  `tfsdk:"failover_toleration_seconds"`
}

var placementAttributes = map[string]rschema.Attribute{
	"regions": rschema.ListAttribute{
		Description: "The regions the instance runs in, e.g. `[\"eu-west\", \"us-east\"]`.",
		Required:    true,
		ElementType: types.StringType,
		Validators:  []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues()},
	},
	"runtime_selector": rschema.MapAttribute{
		Description: "Only runtimes (and runtime profiles' runtime_labels) carrying all these labels are used.",
		Optional:    true,
		ElementType: types.StringType,
	},
	"spread": rschema.StringAttribute{
		Description: "`region` (one runtime per region, the default) or `runtimes` (`runtimes` runtimes in all, spread over the regions).",
		Optional:    true,
		Validators:  []validator.String{stringvalidator.OneOf(api.SpreadRegion, api.SpreadRuntimes)},
	},
	"runtimes": rschema.Int64Attribute{
		Description: "With spread `runtimes`: how many runtimes in all, at least the number of regions.",
		Optional:    true,
		Validators:  []validator.Int64{int64validator.Between(1, 64)},
	},
	"replicas_mode": rschema.StringAttribute{
		Description: "`duplicated` (every placement runs all the replicas, the default) or `weighted` (the replicas are split over the regions by `weights`).",
		Optional:    true,
		Validators:  []validator.String{stringvalidator.OneOf(api.ReplicasDuplicated, api.ReplicasWeighted)},
	},
	"weights": rschema.MapAttribute{
		Description: "With replicas_mode `weighted`: a positive weight per region, e.g. `{ eu-west = 3, us-east = 1 }`.",
		Optional:    true,
		ElementType: types.Int64Type,
	},
	"failover": rschema.BoolAttribute{
		Description: "Move a placement off a runtime that has been unreachable for longer than `failover_toleration_seconds` (default true).",
		Optional:    true,
	},
	"failover_toleration_seconds": rschema.Int64Attribute{
		Description: "How long a runtime may be unreachable before its replicas move (default 60).",
		Optional:    true,
		Validators:  []validator.Int64{int64validator.Between(1, 86400)},
	},
}

var placementType = objectTypeOf(placementAttributes)

var placementStatusAttributes = map[string]rschema.Attribute{
	"runtime_id":     rschema.StringAttribute{Description: "The runtime's ID.", Computed: true},
	"runtime":        rschema.StringAttribute{Description: "The runtime's name.", Computed: true},
	"region":         rschema.StringAttribute{Description: "The runtime's region.", Computed: true},
	"replicas":       rschema.Int64Attribute{Description: "The desired replica count there.", Computed: true},
	"ready_replicas": rschema.Int64Attribute{Description: "Ready pods there.", Computed: true},
	"phase":          rschema.StringAttribute{Description: "Pending (waiting for the runtime), Reconciling, Ready, Failed or Deleting (being moved off).", Computed: true},
	"message":        rschema.StringAttribute{Description: "Why the placement is not Ready.", Computed: true},
	"profile":        rschema.StringAttribute{Description: "The runtime profile the runtime was provisioned from, if any.", Computed: true},
}

var placementStatusType = objectTypeOf(placementStatusAttributes)

func placementOf(ctx context.Context, o types.Object) (*api.Placement, diag.Diagnostics) {
	m, diags := objectOf[placementModel](ctx, o)
	if m == nil || diags.HasError() {
		return nil, diags
	}
	regions, d := stringsOf(ctx, m.Regions)
	diags.Append(d...)
	sel, d := stringMapOf(ctx, m.RuntimeSelector)
	diags.Append(d...)
	p := &api.Placement{Regions: regions, RuntimeSelector: sel, Spread: m.Spread.ValueString(), Runtimes: int(m.Runtimes.ValueInt64())}
	if known(m.ReplicasMode) || known(m.Weights) {
		p.Replicas = &api.PlacementReplicas{Mode: m.ReplicasMode.ValueString()}
		if known(m.Weights) {
			w := map[string]int64{}
			diags.Append(m.Weights.ElementsAs(ctx, &w, false)...)
			p.Replicas.Weights = map[string]int{}
			for k, v := range w {
				p.Replicas.Weights[k] = int(v)
			}
		}
	}
	if known(m.Failover) || known(m.FailoverToleration) {
		p.Failover = &api.Failover{TolerationSeconds: int(m.FailoverToleration.ValueInt64())}
		if known(m.Failover) {
			p.Failover.Enabled = m.Failover.ValueBoolPointer()
		}
	}
	return p, diags
}

func placementValue(ctx context.Context, prior types.Object, p *api.Placement) (types.Object, diag.Diagnostics) {
	if p == nil {
		return types.ObjectNull(placementType.AttrTypes), nil
	}
	pm, diags := objectOf[placementModel](ctx, prior)
	if pm == nil {
		pm = &placementModel{RuntimeSelector: types.MapNull(types.StringType), Weights: types.MapNull(types.Int64Type), Regions: types.ListNull(types.StringType)}
	}
	m := placementModel{
		Regions:            stringListValue(pm.Regions, p.Regions),
		RuntimeSelector:    stringMapValue(pm.RuntimeSelector, p.RuntimeSelector),
		Spread:             stringValue(pm.Spread, p.Spread),
		Runtimes:           int64Value(pm.Runtimes, int64(p.Runtimes)),
		ReplicasMode:       types.StringNull(),
		Weights:            types.MapNull(types.Int64Type),
		Failover:           types.BoolNull(),
		FailoverToleration: types.Int64Null(),
	}
	if r := p.Replicas; r != nil {
		m.ReplicasMode = stringValue(pm.ReplicasMode, r.Mode)
		if len(r.Weights) > 0 {
			w := map[string]attr.Value{}
			for k, v := range r.Weights {
				w[k] = types.Int64Value(int64(v))
			}
			m.Weights = types.MapValueMust(types.Int64Type, w)
		}
	}
	if f := p.Failover; f != nil {
		if f.Enabled != nil {
			m.Failover = types.BoolValue(*f.Enabled)
		}
		m.FailoverToleration = int64Value(pm.FailoverToleration, int64(f.TolerationSeconds))
	}
	v, d := objectValue(ctx, placementType, &m)
	diags.Append(d...)
	return v, diags
}

var appliedObjectAttributes = map[string]rschema.Attribute{
	"api_version": rschema.StringAttribute{Description: "The object's apiVersion.", Computed: true},
	"kind":        rschema.StringAttribute{Description: "The object's kind.", Computed: true},
	"namespace":   rschema.StringAttribute{Description: "The object's namespace; empty for cluster-scoped objects.", Computed: true},
	"name":        rschema.StringAttribute{Description: "The object's name.", Computed: true},
	"ready":       rschema.BoolAttribute{Description: "Whether the object is available.", Computed: true},
	"message":     rschema.StringAttribute{Description: "Why the object is not ready.", Computed: true},
	"runtime":     rschema.StringAttribute{Description: "The runtime the object is on, for an instance with a placement (empty when pinned).", Computed: true},
}

var appliedObjectType = objectTypeOf(appliedObjectAttributes)

var workloadInstanceKind = &kind[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus, workloadInstanceModel]{
	name: api.KindWorkloadInstance,
	api:  (*client.Client).WorkloadInstances,
	attributes: map[string]rschema.Attribute{
		"definition_id": rschema.StringAttribute{
			Description: "The ID of the qleet_workload_definition to run.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"runtime_id": rschema.StringAttribute{
			Description: "The ID of the qleet_kubernetes_runtime to pin the instance to; it never fails over. At most one of runtime_id and placement is set; with neither, the instance runs only where the instances that use it with `placement = \"with_consumers\"` run.",
			Optional:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1), stringvalidator.ConflictsWith(path.MatchRoot("placement"))},
		},
		"uses": rschema.ListNestedAttribute{
			Description: "Other instances this one uses, e.g. an app using an RPC node: each is rolled out first, on the same " +
				"runtimes, and this one gets `<PREFIX>_HOST`, `<PREFIX>_PORT` and `<PREFIX>_URL` for it. A used instance " +
				"cannot be deleted while used, and a Failed one fails this one with its reason.",
			Optional:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: useAttributes},
		},
		"databases": rschema.ListAttribute{
			Description: "IDs of qleet_databases the instance uses: each is Ready on the instance's runtimes before it rolls out, " +
				"and the instance gets its connection details as env. A used database cannot be deleted while used.",
			Optional:    true,
			ElementType: types.StringType,
		},
		"buckets": rschema.ListAttribute{
			Description: "IDs of qleet_buckets the instance uses, likewise.",
			Optional:    true,
			ElementType: types.StringType,
		},
		"placement": rschema.SingleNestedAttribute{
			Description: "Where the instance runs when it is not pinned: regions, a runtime selector, how many runtimes and how the " +
				"replicas are split. Matching Ready runtimes are used first; in a region with none, a runtime is provisioned from the " +
				"best matching qleet_runtime_profile and the instance is deployed once it is up. Create returns when every placement is Ready.",
			Optional:   true,
			Attributes: placementAttributes,
		},
		"namespace": rschema.StringAttribute{
			Description: "The Kubernetes namespace, a DNS-1123 label. When unset the controller derives it from the instance name; status.namespace tells which.",
			Optional:    true,
			Validators:  []validator.String{dns1123Label()},
		},
		"replicas": rschema.Int64Attribute{
			Description: "Overrides the definition's replica count, at least 0.",
			Optional:    true,
			Validators:  []validator.Int64{int64validator.AtLeast(0)},
		},
		"env": rschema.MapAttribute{
			Description: "Environment variables added to (or overriding those of) every container, name to value.",
			Optional:    true,
			ElementType: types.StringType,
		},
		"images": rschema.MapAttribute{
			Description: "Overrides the image per container name, e.g. `{ web = \"nginx:1.27\" }`.",
			Optional:    true,
			ElementType: types.StringType,
			Validators:  []validator.Map{mapvalidator.ValueStringsAre(imageRef())},
		},
		"adopt": rschema.BoolAttribute{
			Description: "Take over Kubernetes objects that already exist without QleetOS's ownership (default false). " +
				"Without it, an object the instance would write that someone else created (a ConfigMap named by a manifest, say) " +
				"is left untouched and the instance fails naming it; with it, such objects become the instance's and are deleted " +
				"with it. An existing namespace is used as it is and never deleted unless adopted. Objects of other instances are never taken.",
			Optional: true,
		},
	},
	statusAttributes: map[string]rschema.Attribute{
		"namespace":          rschema.StringAttribute{Description: "The namespace the instance runs in.", Computed: true},
		"replicas":           rschema.Int64Attribute{Description: "The desired replica count, summed over the instance's workloads.", Computed: true},
		"ready_replicas":     rschema.Int64Attribute{Description: "Ready pods.", Computed: true},
		"available_replicas": rschema.Int64Attribute{Description: "Available pods.", Computed: true},
		"objects": rschema.ListNestedAttribute{
			Description:  "The Kubernetes objects the instance applied, and how each is doing.",
			Computed:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: appliedObjectAttributes},
		},
		"placements": rschema.ListNestedAttribute{
			Description:  "The runtimes the instance runs on (one for a pinned runtime), each with its region, replicas and phase.",
			Computed:     true,
			NestedObject: rschema.NestedAttributeObject{Attributes: placementStatusAttributes},
		},
	},
	toSpec: func(ctx context.Context, m *workloadInstanceModel) (api.WorkloadInstanceSpec, diag.Diagnostics) {
		env, diags := stringMapOf(ctx, m.Env)
		images, d := stringMapOf(ctx, m.Images)
		diags.Append(d...)
		placement, d := placementOf(ctx, m.Placement)
		diags.Append(d...)
		uses, d := objectsOf[useModel](ctx, m.Uses)
		diags.Append(d...)
		var apiUses []api.Use
		for _, u := range uses {
			apiUses = append(apiUses, api.Use{InstanceID: u.InstanceID.ValueString(), EnvPrefix: u.EnvPrefix.ValueString(), Placement: u.Placement.ValueString()})
		}
		dbs, d := stringsOf(ctx, m.Databases)
		diags.Append(d...)
		buckets, d := stringsOf(ctx, m.Buckets)
		diags.Append(d...)
		return api.WorkloadInstanceSpec{
			Uses:         apiUses,
			Databases:    dbs,
			Buckets:      buckets,
			Placement:    placement,
			DefinitionID: m.DefinitionID.ValueString(),
			RuntimeID:    m.RuntimeID.ValueString(),
			Namespace:    m.Namespace.ValueString(),
			Replicas:     int32Ptr(m.Replicas),
			Env:          envList(env),
			Images:       images,
			Adopt:        m.Adopt.ValueBool(),
		}, diags
	},
	fromSpec: func(ctx context.Context, s *api.WorkloadInstanceSpec, m *workloadInstanceModel) diag.Diagnostics {
		m.DefinitionID = types.StringValue(s.DefinitionID)
		m.RuntimeID = stringValue(m.RuntimeID, s.RuntimeID)
		var diags diag.Diagnostics
		m.Placement, diags = placementValue(ctx, m.Placement, s.Placement)
		uses := make([]useModel, len(s.Uses))
		for i, u := range s.Uses {
			uses[i] = useModel{InstanceID: types.StringValue(u.InstanceID), EnvPrefix: types.StringValue(u.EnvPrefix), Placement: types.StringNull()}
			if u.Placement != "" {
				uses[i].Placement = types.StringValue(u.Placement)
			}
		}
		var d diag.Diagnostics
		m.Uses, d = objectListValue(ctx, useType, m.Uses, uses)
		diags.Append(d...)
		m.Databases = stringListValue(m.Databases, s.Databases)
		m.Buckets = stringListValue(m.Buckets, s.Buckets)
		m.Namespace = stringValue(m.Namespace, s.Namespace)
		m.Replicas = int32PtrValue(s.Replicas)
		m.Env = stringMapValue(m.Env, envMap(s.Env))
		m.Images = stringMapValue(m.Images, s.Images)
		m.Adopt = boolValue(m.Adopt, s.Adopt)
		return diags
	},
	statusValues: func(t *api.WorkloadInstanceStatus) attrValues {
		objs := make([]attr.Value, len(t.Objects))
		for i, o := range t.Objects {
			objs[i] = types.ObjectValueMust(appliedObjectType.AttrTypes, map[string]attr.Value{
				"api_version": types.StringValue(o.APIVersion),
				"kind":        types.StringValue(o.Kind),
				"namespace":   types.StringValue(o.Namespace),
				"name":        types.StringValue(o.Name),
				"ready":       types.BoolValue(o.Ready),
				"message":     types.StringValue(o.Message),
				"runtime":     types.StringValue(o.Runtime),
			})
		}
		placements := make([]attr.Value, len(t.Placements))
		for i, p := range t.Placements {
			placements[i] = types.ObjectValueMust(placementStatusType.AttrTypes, map[string]attr.Value{
				"runtime_id":     types.StringValue(p.RuntimeID),
				"runtime":        types.StringValue(p.Runtime),
				"region":         types.StringValue(p.Region),
				"replicas":       types.Int64Value(int64(p.Replicas)),
				"ready_replicas": types.Int64Value(int64(p.ReadyReplicas)),
				"phase":          types.StringValue(string(p.Phase)),
				"message":        types.StringValue(p.Message),
				"profile":        types.StringValue(p.Profile),
			})
		}
		return attrValues{
			"placements":         types.ListValueMust(placementStatusType, placements),
			"namespace":          types.StringValue(t.Namespace),
			"replicas":           types.Int64Value(int64(t.Replicas)),
			"ready_replicas":     types.Int64Value(int64(t.ReadyReplicas)),
			"available_replicas": types.Int64Value(int64(t.AvailableReplicas)),
			"objects":            types.ListValueMust(appliedObjectType, objs),
		}
	},
	createTimeout: 10 * time.Minute,
	updateTimeout: 10 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}
