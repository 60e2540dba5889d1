package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

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
}

var appliedObjectAttributes = map[string]rschema.Attribute{
	"api_version": rschema.StringAttribute{Description: "The object's apiVersion.", Computed: true},
	"kind":        rschema.StringAttribute{Description: "The object's kind.", Computed: true},
	"namespace":   rschema.StringAttribute{Description: "The object's namespace; empty for cluster-scoped objects.", Computed: true},
	"name":        rschema.StringAttribute{Description: "The object's name.", Computed: true},
	"ready":       rschema.BoolAttribute{Description: "Whether the object is available.", Computed: true},
	"message":     rschema.StringAttribute{Description: "Why the object is not ready.", Computed: true},
}

var appliedObjectType = objectTypeOf(appliedObjectAttributes)

var workloadInstanceKind = &kind[client.WorkloadInstanceSpec, client.WorkloadInstanceStatus, workloadInstanceModel]{
	name:  client.KindWorkloadInstance,
	title: "workload instance",
	description: "Where and how to run a workload definition: the Kubernetes runtime, the namespace, and overrides of " +
		"replicas, environment and images. Create and update return once the workload is rolled out and Ready.",
	api: (*client.Client).WorkloadInstances,
	attributes: map[string]rschema.Attribute{
		"definition_id": rschema.StringAttribute{
			Description: "The ID of the qleet_workload_definition to run.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"runtime_id": rschema.StringAttribute{
			Description: "The ID of the qleet_kubernetes_runtime to run it on.",
			Required:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
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
	},
	toSpec: func(ctx context.Context, m *workloadInstanceModel) (client.WorkloadInstanceSpec, diag.Diagnostics) {
		env, diags := stringMapOf(ctx, m.Env)
		images, d := stringMapOf(ctx, m.Images)
		diags.Append(d...)
		return client.WorkloadInstanceSpec{
			DefinitionID: m.DefinitionID.ValueString(),
			RuntimeID:    m.RuntimeID.ValueString(),
			Namespace:    m.Namespace.ValueString(),
			Replicas:     int32Ptr(m.Replicas),
			Env:          envList(env),
			Images:       images,
			Adopt:        m.Adopt.ValueBool(),
		}, diags
	},
	fromSpec: func(_ context.Context, s *client.WorkloadInstanceSpec, m *workloadInstanceModel) diag.Diagnostics {
		m.DefinitionID = types.StringValue(s.DefinitionID)
		m.RuntimeID = types.StringValue(s.RuntimeID)
		m.Namespace = stringValue(m.Namespace, s.Namespace)
		m.Replicas = int32PtrValue(s.Replicas)
		m.Env = stringMapValue(m.Env, envMap(s.Env))
		m.Images = stringMapValue(m.Images, s.Images)
		m.Adopt = boolValue(m.Adopt, s.Adopt)
		return nil
	},
	statusValues: func(t *client.WorkloadInstanceStatus) attrValues {
		objs := make([]attr.Value, len(t.Objects))
		for i, o := range t.Objects {
			objs[i] = types.ObjectValueMust(appliedObjectType.AttrTypes, map[string]attr.Value{
				"api_version": types.StringValue(o.APIVersion),
				"kind":        types.StringValue(o.Kind),
				"namespace":   types.StringValue(o.Namespace),
				"name":        types.StringValue(o.Name),
				"ready":       types.BoolValue(o.Ready),
				"message":     types.StringValue(o.Message),
			})
		}
		return attrValues{
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
