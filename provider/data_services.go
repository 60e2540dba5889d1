package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
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

var dataRuntimeAttributes = map[string]rschema.Attribute{
	"runtime_id": rschema.StringAttribute{Description: "The runtime's ID.", Computed: true},
	"runtime":    rschema.StringAttribute{Description: "The runtime's name.", Computed: true},
	"host":       rschema.StringAttribute{Description: "The Service address in the cluster.", Computed: true},
	"port":       rschema.Int64Attribute{Description: "The port.", Computed: true},
	"namespace":  rschema.StringAttribute{Description: "The namespace holding it, its volume and its credentials.", Computed: true},
	"phase":      rschema.StringAttribute{Description: "Pending, Reconciling or Ready.", Computed: true},
	"message":    rschema.StringAttribute{Description: "Why it is not Ready there.", Computed: true},
	"role":       rschema.StringAttribute{Description: "`home` (it runs and keeps its data there) or `access` (the consumers there reach the home through an alias Service and a copy of its credentials).", Computed: true},
	"replicas":   rschema.Int64Attribute{Description: "A database's read replicas that run there for the runtime's region (`replicas_per_region`); 0 where none do.", Computed: true},
	"read_host":  rschema.StringAttribute{Description: "Where the consumers there read from when replicas run there (the replicas' Service, or the first RDS read replica); empty otherwise.", Computed: true},
}

var dataHomeAttributes = map[string]rschema.Attribute{
	"runtime_id": rschema.StringAttribute{Description: "The home runtime's ID.", Computed: true},
	"runtime":    rschema.StringAttribute{Description: "The home runtime's name.", Computed: true},
	"region":     rschema.StringAttribute{Description: "The home's region.", Computed: true},
	"reason":     rschema.StringAttribute{Description: "Why the home is there: spec.runtime_id, spec.region, the primary region of its first consumer, or the copy that held its data when it got one home.", Computed: true},
	"address":    rschema.StringAttribute{Description: "Where the other runtimes reach it (a load balancer's address, or the RDS or S3 endpoint); empty while no other runtime needs it.", Computed: true},
}

var dataHomeType = objectTypeOf(dataHomeAttributes)

var dataRuntimeType = objectTypeOf(dataRuntimeAttributes)

var dataStatusAttributes = map[string]rschema.Attribute{
	"home": rschema.SingleNestedAttribute{
		Description: "Where its data lives: one runtime, whose database or bucket every consumer in any region is given. Null until its first consumer is placed.",
		Computed:    true,
		Attributes:  dataHomeAttributes,
	},
	"runtimes": rschema.ListNestedAttribute{
		Description:  "It on each runtime: its home, and every other runtime its consumers run on. Credentials are never here: the instance gets them from a Secret in its namespace.",
		Computed:     true,
		NestedObject: rschema.NestedAttributeObject{Attributes: dataRuntimeAttributes},
	},
}

func dataRuntimesValue(home *api.DataHome, rts []api.DataRuntimeStatus) attrValues {
	homeValue := types.ObjectNull(dataHomeType.AttrTypes)
	if home != nil {
		homeValue = types.ObjectValueMust(dataHomeType.AttrTypes, map[string]attr.Value{
			"runtime_id": types.StringValue(home.RuntimeID), "runtime": types.StringValue(home.Runtime), "region": types.StringValue(home.Region),
			"reason": types.StringValue(home.Reason), "address": types.StringValue(home.Address),
		})
	}
	out := make([]attr.Value, len(rts))
	for i, r := range rts {
		out[i] = types.ObjectValueMust(dataRuntimeType.AttrTypes, map[string]attr.Value{
			"runtime_id": types.StringValue(r.RuntimeID), "runtime": types.StringValue(r.Runtime), "host": types.StringValue(r.Host),
			"port": types.Int64Value(int64(r.Port)), "namespace": types.StringValue(r.Namespace),
			"phase": types.StringValue(string(r.Phase)), "message": types.StringValue(r.Message), "role": types.StringValue(r.Role),
			"replicas": types.Int64Value(int64(r.Replicas)), "read_host": types.StringValue(r.ReadHost),
		})
	}
	return attrValues{"home": homeValue, "runtimes": types.ListValueMust(dataRuntimeType, out)}
}

func dataCommonAttributes(what, prefix string) map[string]rschema.Attribute {
	return map[string]rschema.Attribute{
		"instance_id": rschema.StringAttribute{
			Description: "The ID of a qleet_workload_instance it serves. Instances may instead list it (the instance's `" + what + "s`), " +
				"which lets Terraform create it first, so that the instance's first rollout has it. Every consumer, on any runtime, is given the one " + what + " at its home.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"runtime_id": rschema.StringAttribute{
			Description: "The ID of the qleet_kubernetes_runtime that is its home. At most one of runtime_id and region is set; with neither, its home is the primary region of its first consumer. The home never moves once it holds data.",
			Optional:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1), stringvalidator.ConflictsWith(path.MatchRoot("region"))},
		},
		"region": rschema.StringAttribute{
			Description: "Its home region: it runs on a runtime there (a consumer's, if one runs there). The home never moves once it holds data.",
			Optional:    true,
			Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
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
	RuntimeID  types.String `tfsdk:"runtime_id"`
	Region     types.String `tfsdk:"region"`
	Engine     types.String `tfsdk:"engine"`
	Version    types.String `tfsdk:"version"`
	Size       types.String `tfsdk:"size"`
	Retain     types.Bool   `tfsdk:"retain"`
	EnvPrefix  types.String `tfsdk:"env_prefix"`
	Replicas   types.Int64  `tfsdk:"replicas_per_region"`
}

var databaseKind = &kind[api.DatabaseSpec, api.DatabaseStatus, databaseModel]{
	name: api.KindDatabase,
	api:  (*client.Client).Databases,
	attributes: func() map[string]rschema.Attribute {
		a := dataCommonAttributes("database", "DATABASE")
		a["engine"] = rschema.StringAttribute{Description: "`postgres` or `mysql` (the API defaults it to postgres).", Optional: true, Computed: true,
			Validators: []validator.String{stringvalidator.OneOf(api.EnginePostgres, api.EngineMySQL)}}
		a["version"] = rschema.StringAttribute{Description: "The engine's major version (the API defaults it to 16 for postgres, 8.4 for mysql).", Optional: true, Computed: true}
		a["replicas_per_region"] = rschema.Int64Attribute{
			Description: "Read replicas (0 to 5, postgres only) in each region where a consumer runs: on the first runtime there that a consumer runs on (the home, if one runs on it), streaming from the home; RDS read replicas when the home is RDS. " +
				"Consumers then also get `<PREFIX>_READ_URL`, `_READ_HOST` and `_READ_PORT`: their region's replicas where they run beside them, else the home. Writes always go to the home.",
			Optional:   true,
			Validators: []validator.Int64{int64validator.Between(0, api.MaxReplicasPerRegion)},
		}
		return a
	}(),
	statusAttributes: dataStatusAttributes,
	toSpec: func(_ context.Context, m *databaseModel) (api.DatabaseSpec, diag.Diagnostics) {
		return api.DatabaseSpec{InstanceID: m.InstanceID.ValueString(), RuntimeID: m.RuntimeID.ValueString(), Region: m.Region.ValueString(),
			Engine: m.Engine.ValueString(), Version: m.Version.ValueString(),
			Size: m.Size.ValueString(), Retain: m.Retain.ValueBool(), EnvPrefix: m.EnvPrefix.ValueString(), ReplicasPerRegion: int(m.Replicas.ValueInt64())}, nil
	},
	fromSpec: func(_ context.Context, s *api.DatabaseSpec, m *databaseModel) diag.Diagnostics {
		if s.ReplicasPerRegion != 0 || !m.Replicas.IsNull() {
			m.Replicas = types.Int64Value(int64(s.ReplicasPerRegion))
		}
		m.InstanceID, m.Engine, m.Version = stringValue(m.InstanceID, s.InstanceID), types.StringValue(s.Engine), types.StringValue(s.Version)
		m.RuntimeID, m.Region = stringValue(m.RuntimeID, s.RuntimeID), stringValue(m.Region, s.Region)
		m.Size, m.EnvPrefix = types.StringValue(s.Size), types.StringValue(s.EnvPrefix)
		m.Retain = boolValue(m.Retain, s.Retain)
		return nil
	},
	statusValues:  func(t *api.DatabaseStatus) attrValues { return dataRuntimesValue(t.Home, t.Runtimes) },
	createTimeout: 15 * time.Minute,
	updateTimeout: 15 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}

// bucketModel is qleet_bucket.
type bucketModel struct {
	objectMeta
	InstanceID types.String `tfsdk:"instance_id"`
	RuntimeID  types.String `tfsdk:"runtime_id"`
	Region     types.String `tfsdk:"region"`
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
		return api.BucketSpec{InstanceID: m.InstanceID.ValueString(), RuntimeID: m.RuntimeID.ValueString(), Region: m.Region.ValueString(),
			Size: m.Size.ValueString(), Retain: m.Retain.ValueBool(), EnvPrefix: m.EnvPrefix.ValueString()}, nil
	},
	fromSpec: func(_ context.Context, s *api.BucketSpec, m *bucketModel) diag.Diagnostics {
		m.InstanceID, m.Size, m.EnvPrefix = stringValue(m.InstanceID, s.InstanceID), types.StringValue(s.Size), types.StringValue(s.EnvPrefix)
		m.RuntimeID, m.Region = stringValue(m.RuntimeID, s.RuntimeID), stringValue(m.Region, s.Region)
		m.Retain = boolValue(m.Retain, s.Retain)
		return nil
	},
	statusValues:  func(t *api.BucketStatus) attrValues { return dataRuntimesValue(t.Home, t.Runtimes) },
	createTimeout: 15 * time.Minute,
	updateTimeout: 15 * time.Minute,
	deleteTimeout: 10 * time.Minute,
}
