package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

var dataRuntimeAttributes = map[string]rschema.Attribute{
	"runtime_id": rschema.StringAttribute{Description: "The runtime's ID.", Computed: true},
	"runtime":    rschema.StringAttribute{Description: "The runtime's name.", Computed: true},
	"host":       rschema.StringAttribute{Description: "The Service address in the cluster.", Computed: true},
	"port":       rschema.Int64Attribute{Description: "The port.", Computed: true},
	"namespace":  rschema.StringAttribute{Description: "The namespace holding it, its volume and its credentials.", Computed: true},
	"phase":      rschema.StringAttribute{Description: "Pending, Reconciling or Ready.", Computed: true},
	"message":    rschema.StringAttribute{Description: "Why it is not Ready there.", Computed: true},
}

var dataRuntimeType = objectTypeOf(dataRuntimeAttributes)

var dataStatusAttributes = map[string]rschema.Attribute{
	"runtimes": rschema.ListNestedAttribute{
		Description:  "It on each runtime its instance runs on. Credentials are never here: the instance gets them from a Secret in its namespace.",
		Computed:     true,
		NestedObject: rschema.NestedAttributeObject{Attributes: dataRuntimeAttributes},
	},
}

func dataRuntimesValue(rts []api.DataRuntimeStatus) attrValues {
	out := make([]attr.Value, len(rts))
	for i, r := range rts {
		out[i] = types.ObjectValueMust(dataRuntimeType.AttrTypes, map[string]attr.Value{
			"runtime_id": types.StringValue(r.RuntimeID), "runtime": types.StringValue(r.Runtime), "host": types.StringValue(r.Host),
			"port": types.Int64Value(int64(r.Port)), "namespace": types.StringValue(r.Namespace),
			"phase": types.StringValue(string(r.Phase)), "message": types.StringValue(r.Message),
		})
	}
	return attrValues{"runtimes": types.ListValueMust(dataRuntimeType, out)}
}

func dataCommonAttributes(what, prefix string) map[string]rschema.Attribute {
	return map[string]rschema.Attribute{
		"instance_id": rschema.StringAttribute{
			Description: "The ID of a qleet_workload_instance it serves. Instances may instead list it (the instance's `" + what + "s`), " +
				"which lets Terraform create it first, so that the instance's first rollout has it. It runs on every runtime its instances run on.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"size": rschema.StringAttribute{
			Description: "The volume size, a Kubernetes quantity (the API defaults it to `1Gi`).",
			Optional:    true,
			Computed:    true,
		},
		"retain": rschema.BoolAttribute{
			Description: "Keep the volume and credentials when the " + what + " is deleted; a " + what + " of the same name created later takes them back.",
			Optional:    true,
		},
		"env_prefix": rschema.StringAttribute{
			Description: "The prefix of the variables the instance gets (the API defaults it to `" + prefix + "`).",
			Optional:    true,
			Computed:    true,
		},
	}
}

// databaseModel is qleet_database.
type databaseModel struct {
	objectMeta
	InstanceID types.String `tfsdk:"instance_id"`
	Engine     types.String `tfsdk:"engine"`
	Version    types.String `tfsdk:"version"`
	Size       types.String `tfsdk:"size"`
	Retain     types.Bool   `tfsdk:"retain"`
	EnvPrefix  types.String `tfsdk:"env_prefix"`
}

var databaseKind = &kind[api.DatabaseSpec, api.DatabaseStatus, databaseModel]{
	name: api.KindDatabase,
	api:  (*client.Client).Databases,
	attributes: func() map[string]rschema.Attribute {
		a := dataCommonAttributes("database", "DATABASE")
		a["engine"] = rschema.StringAttribute{Description: "`postgres` or `mysql` (the API defaults it to postgres).", Optional: true, Computed: true,
			Validators: []validator.String{stringvalidator.OneOf(api.EnginePostgres, api.EngineMySQL)}}
		a["version"] = rschema.StringAttribute{Description: "The engine's major version (the API defaults it to 16 for postgres, 8.4 for mysql).", Optional: true, Computed: true}
		return a
	}(),
	statusAttributes: dataStatusAttributes,
	toSpec: func(_ context.Context, m *databaseModel) (api.DatabaseSpec, diag.Diagnostics) {
		return api.DatabaseSpec{InstanceID: m.InstanceID.ValueString(), Engine: m.Engine.ValueString(), Version: m.Version.ValueString(),
			Size: m.Size.ValueString(), Retain: m.Retain.ValueBool(), EnvPrefix: m.EnvPrefix.ValueString()}, nil
	},
	fromSpec: func(_ context.Context, s *api.DatabaseSpec, m *databaseModel) diag.Diagnostics {
		m.InstanceID, m.Engine, m.Version = stringValue(m.InstanceID, s.InstanceID), types.StringValue(s.Engine), types.StringValue(s.Version)
		m.Size, m.EnvPrefix = types.StringValue(s.Size), types.StringValue(s.EnvPrefix)
		m.Retain = boolValue(m.Retain, s.Retain)
		return nil
	},
	statusValues:  func(t *api.DatabaseStatus) attrValues { return dataRuntimesValue(t.Runtimes) },
	createTimeout: 15 * time.Minute,
	updateTimeout: 15 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}

// bucketModel is qleet_bucket.
type bucketModel struct {
	objectMeta
	InstanceID types.String `tfsdk:"instance_id"`
	Size       types.String `tfsdk:"size"`
	Retain     types.Bool   `tfsdk:"retain"`
	EnvPrefix  types.String `tfsdk:"env_prefix"`
}

var bucketKind = &kind[api.BucketSpec, api.BucketStatus, bucketModel]{
	name:             api.KindBucket,
	api:              (*client.Client).Buckets,
	attributes:       dataCommonAttributes("bucket", "S3"),
	statusAttributes: dataStatusAttributes,
	toSpec: func(_ context.Context, m *bucketModel) (api.BucketSpec, diag.Diagnostics) {
		return api.BucketSpec{InstanceID: m.InstanceID.ValueString(), Size: m.Size.ValueString(), Retain: m.Retain.ValueBool(), EnvPrefix: m.EnvPrefix.ValueString()}, nil
	},
	fromSpec: func(_ context.Context, s *api.BucketSpec, m *bucketModel) diag.Diagnostics {
		m.InstanceID, m.Size, m.EnvPrefix = stringValue(m.InstanceID, s.InstanceID), types.StringValue(s.Size), types.StringValue(s.EnvPrefix)
		m.Retain = boolValue(m.Retain, s.Retain)
		return nil
	},
	statusValues:  func(t *api.BucketStatus) attrValues { return dataRuntimesValue(t.Runtimes) },
	createTimeout: 15 * time.Minute,
	updateTimeout: 15 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}
