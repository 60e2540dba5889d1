package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

// kindUnderTest is what the schema tests need of any kind.
type kindUnderTest interface {
	resource() resource.Resource
	dataSource() datasource.DataSource
	listDataSource() datasource.DataSource
}

var allKinds = map[string]kindUnderTest{
	"kubernetes_runtime":  kubernetesRuntimeKind,
	"workload_definition": workloadDefinitionKind,
	"workload_instance":   workloadInstanceKind,
}

func TestProviderRegistersEveryKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := New("test")()
	names := map[string]bool{}
	for _, f := range p.Resources(ctx) {
		var resp resource.MetadataResponse
		f().Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "qleet"}, &resp)
		names[resp.TypeName] = true
	}
	for _, f := range p.DataSources(ctx) {
		var resp datasource.MetadataResponse
		f().Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "qleet"}, &resp)
		names["data."+resp.TypeName] = true
	}
	for _, ki := range api.Kinds() {
		require.True(t, names["qleet_"+ki.Kind], "resource qleet_%s", ki.Kind)
		require.True(t, names["data.qleet_"+ki.Kind], "data source qleet_%s", ki.Kind)
		require.True(t, names["data.qleet_"+ki.Plural], "data source qleet_%s", ki.Plural)
	}
	var sresp provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &sresp)
	require.False(t, sresp.Diagnostics.HasError())
	for name, a := range sresp.Schema.Attributes {
		require.NotEmpty(t, a.GetDescription(), "provider attribute %s", name)
	}
}

func TestSchemas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, k := range allKinds {
		t.Run(name+" resource schema is valid and documented", func(t *testing.T) {
			var resp resource.SchemaResponse
			k.resource().Schema(ctx, resource.SchemaRequest{}, &resp)
			require.False(t, resp.Diagnostics.HasError(), "%v", resp.Diagnostics)
			require.False(t, resp.Schema.ValidateImplementation(ctx).HasError())
			ki, ok := api.LookupKind(name)
			require.True(t, ok)
			require.True(t, strings.HasPrefix(resp.Schema.Description, ki.Description),
				"the resource is described by its kind's one description, in the registry")
			requireDescribed(t, "", resp.Schema.Attributes)
		})
		t.Run(name+" data sources are valid and documented", func(t *testing.T) {
			for _, ds := range []datasource.DataSource{k.dataSource(), k.listDataSource()} {
				var resp datasource.SchemaResponse
				ds.Schema(ctx, datasource.SchemaRequest{}, &resp)
				require.False(t, resp.Diagnostics.HasError(), "%v", resp.Diagnostics)
				require.False(t, resp.Schema.ValidateImplementation(ctx).HasError())
				requireDescribedDS(t, "", resp.Schema.Attributes)
			}
		})
	}
}

func requireDescribed(t *testing.T, prefix string, attrs map[string]rschema.Attribute) {
	t.Helper()
	for name, a := range attrs {
		require.NotEmpty(t, a.GetDescription(), "attribute %s%s has no description", prefix, name)
		switch a := a.(type) {
		case rschema.SingleNestedAttribute:
			requireDescribed(t, prefix+name+".", a.Attributes)
		case rschema.ListNestedAttribute:
			requireDescribed(t, prefix+name+".", a.NestedObject.Attributes)
		}
	}
}

func requireDescribedDS(t *testing.T, prefix string, attrs map[string]dschema.Attribute) {
	t.Helper()
	for name, a := range attrs {
		require.NotEmpty(t, a.GetDescription(), "attribute %s%s has no description", prefix, name)
		switch a := a.(type) {
		case dschema.SingleNestedAttribute:
			requireDescribedDS(t, prefix+name+".", a.Attributes)
		case dschema.ListNestedAttribute:
			requireDescribedDS(t, prefix+name+".", a.NestedObject.Attributes)
		}
	}
}

func TestWriteOnlyAttributesAreSensitiveAndLeftOutOfDataSources(t *testing.T) {
	t.Parallel()
	k := kubernetesRuntimeKind
	a, ok := k.modelAttributes()["kubeconfig"].(rschema.StringAttribute)
	require.True(t, ok)
	require.True(t, a.Sensitive)
	require.NotContains(t, k.itemAttributes(), "kubeconfig")
}

// roundTrip converts obj to the model (with the given prior), to a Terraform value and back, and then to
// an API object again, and returns the model and the object.
func roundTrip[S, T, M any](t *testing.T, k *kind[S, T, M], obj *api.Object[S, T], prior M) (M, *api.Object[S, T]) {
	t.Helper()
	ctx := context.Background()
	m, diags := k.toModel(ctx, obj, prior)
	require.False(t, diags.HasError(), "%v", diags)
	v, diags := k.modelObject(ctx, &m)
	require.False(t, diags.HasError(), "%v", diags)
	back, diags := k.modelFrom(ctx, v)
	require.False(t, diags.HasError(), "%v", diags)
	out, diags := k.toObject(ctx, &back)
	require.False(t, diags.HasError(), "%v", diags)
	_, diags = k.item(ctx, obj)
	require.False(t, diags.HasError(), "%v", diags)
	return back, out
}

func newObject[S, T any](name string, spec S, status T) *api.Object[S, T] {
	o := &api.Object[S, T]{Spec: spec, Status: status}
	o.ID, o.Name, o.CreatedAt = "0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e", name, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	o.Labels = map[string]string{"env": "test"}
	return o
}

func TestKubernetesRuntimeConversion(t *testing.T) {
	t.Parallel()
	spec := api.KubernetesRuntimeSpec{Provider: "local", Region: "eu", Zones: []string{"eu-a", "eu-b"}, Nodes: 3, MinNodes: 1, MaxNodes: 5}
	st := api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 2,
		Conditions: []api.Condition{{Type: "Connected", Status: api.ConditionTrue}}}, Endpoint: "https://x", NodesReady: 3, NodesTotal: 3}

	t.Run("a spec survives the round trip", func(t *testing.T) {
		m, out := roundTrip(t, kubernetesRuntimeKind, newObject("rt", spec, st), kubernetesRuntimeModel{})
		require.Equal(t, spec, out.Spec)
		require.Equal(t, map[string]string{"env": "test"}, out.Labels)
		require.Equal(t, "2025-01-02T03:04:05Z", m.CreatedAt.ValueString())
		require.Equal(t, `"Ready"`, m.Status.Attributes()["phase"].String())
		require.Equal(t, "3", m.Status.Attributes()["nodes_ready"].String())
	})
	t.Run("a kubeconfig the API hides is kept from the prior value", func(t *testing.T) {
		prior := kubernetesRuntimeModel{Kubeconfig: types.StringValue("apiVersion: v1")}
		s := api.KubernetesRuntimeSpec{Provider: "kubeconfig"}
		m, out := roundTrip(t, kubernetesRuntimeKind, newObject("rt", s, st), prior)
		require.Equal(t, "apiVersion: v1", m.Kubeconfig.ValueString())
		require.Equal(t, "apiVersion: v1", out.Spec.Kubeconfig)
	})
	t.Run("a kubeconfig the API returns wins, so drift shows", func(t *testing.T) {
		prior := kubernetesRuntimeModel{Kubeconfig: types.StringValue("old")}
		m, _ := roundTrip(t, kubernetesRuntimeKind, newObject("rt", api.KubernetesRuntimeSpec{Provider: "kubeconfig", Kubeconfig: "new"}, st), prior)
		require.Equal(t, "new", m.Kubeconfig.ValueString())
	})
	t.Run("unset stays null and empty stays empty", func(t *testing.T) {
		prior := kubernetesRuntimeModel{Zones: types.ListValueMust(types.StringType, nil)}
		prior.Labels = types.MapValueMust(types.StringType, nil)
		obj := newObject("rt", api.KubernetesRuntimeSpec{Provider: "kubeconfig"}, st)
		obj.Labels = nil
		m, _ := roundTrip(t, kubernetesRuntimeKind, obj, prior)
		require.True(t, m.Region.IsNull())
		require.True(t, m.MinNodes.IsNull())
		require.False(t, m.Zones.IsNull())
		require.Empty(t, m.Zones.Elements())
		require.False(t, m.Labels.IsNull())
	})
	t.Run("a computed value unknown in the plan becomes known, and unset is null as on import", func(t *testing.T) {
		prior := kubernetesRuntimeModel{Nodes: types.Int64Unknown()}
		obj := newObject("rt", api.KubernetesRuntimeSpec{Provider: "kubeconfig"}, st)
		m, _ := roundTrip(t, kubernetesRuntimeKind, obj, prior)
		require.True(t, m.Nodes.IsNull())
		prior.Nodes = types.Int64Unknown()
		m, _ = roundTrip(t, kubernetesRuntimeKind, newObject("rt", api.KubernetesRuntimeSpec{Provider: "local", Nodes: 3}, st), prior)
		require.Equal(t, types.Int64Value(3), m.Nodes)
	})
}

func TestWorkloadDefinitionConversion(t *testing.T) {
	t.Parallel()
	replicas := int32(2)
	spec := api.WorkloadDefinitionSpec{
		Containers: []api.Container{{
			Name: "web", Image: "nginx:1.27", Command: []string{"nginx"}, Args: []string{"-g", "daemon off;"},
			Ports: []api.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: "TCP"}, {ContainerPort: 443}},
			Env:   []api.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
			Resources: &api.Resources{
				Requests: api.ResourceList{CPU: "100m", Memory: "64Mi"},
				Limits:   api.ResourceList{Memory: "128Mi"},
			},
			LivenessProbe:  &api.Probe{HTTPGetPath: "/healthz", Port: 80, PeriodSeconds: 10},
			ReadinessProbe: &api.Probe{TCP: true, Port: 80},
		}, {Name: "sidecar", Image: "busybox", Command: []string{"sleep", "inf"}}},
		Replicas:    &replicas,
		Autoscaling: &api.Autoscaling{MinReplicas: 2, MaxReplicas: 5, TargetCPUPercent: 70},
	}
	t.Run("a container spec survives the round trip", func(t *testing.T) {
		_, out := roundTrip(t, workloadDefinitionKind, newObject("web", spec, api.WorkloadDefinitionStatus{Instances: 1}), workloadDefinitionModel{})
		require.Equal(t, spec, out.Spec)
	})
	t.Run("a helm spec survives the round trip", func(t *testing.T) {
		h := api.WorkloadDefinitionSpec{Helm: &api.HelmSource{Repository: "https://charts.example.com", Chart: "app", Values: "a: 1\n"}, Replicas: &replicas}
		m, out := roundTrip(t, workloadDefinitionKind, newObject("web", h, api.WorkloadDefinitionStatus{}), workloadDefinitionModel{})
		require.Equal(t, h, out.Spec)
		require.True(t, m.Containers.IsNull())
		require.True(t, m.Manifests.IsNull())
		require.True(t, m.Autoscaling.IsNull())
	})
	t.Run("env is sorted by name so that order never shows as a diff", func(t *testing.T) {
		s := api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "a", Image: "x", Env: []api.EnvVar{{Name: "Z", Value: "1"}, {Name: "A", Value: "2"}}}}}
		_, out := roundTrip(t, workloadDefinitionKind, newObject("web", s, api.WorkloadDefinitionStatus{}), workloadDefinitionModel{})
		require.Equal(t, []api.EnvVar{{Name: "A", Value: "2"}, {Name: "Z", Value: "1"}}, out.Spec.Containers[0].Env)
	})
	t.Run("drift in a container image replaces the prior value", func(t *testing.T) {
		prior, _ := roundTrip(t, workloadDefinitionKind, newObject("web", spec, api.WorkloadDefinitionStatus{}), workloadDefinitionModel{})
		drifted := spec
		drifted.Containers = append([]api.Container{}, spec.Containers...)
		drifted.Containers[0].Image = "nginx:1.28"
		m, out := roundTrip(t, workloadDefinitionKind, newObject("web", drifted, api.WorkloadDefinitionStatus{}), prior)
		require.Equal(t, "nginx:1.28", out.Spec.Containers[0].Image)
		cs, diags := objectsOf[containerModel](context.Background(), m.Containers)
		require.False(t, diags.HasError())
		require.Equal(t, "nginx:1.28", cs[0].Image.ValueString())
	})
}

func TestWorkloadInstanceConversion(t *testing.T) {
	t.Parallel()
	r := int32(0)
	spec := api.WorkloadInstanceSpec{
		DefinitionID: "d", RuntimeID: "r", Namespace: "ns", Replicas: &r,
		Env: []api.EnvVar{{Name: "A", Value: "1"}}, Images: map[string]string{"web": "nginx:1.28"},
	}
	st := api.WorkloadInstanceStatus{Namespace: "ns", ReadyReplicas: 1,
		Objects: []api.AppliedObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Ready: true}}}
	t.Run("a spec survives the round trip, replicas 0 included", func(t *testing.T) {
		m, out := roundTrip(t, workloadInstanceKind, newObject("web", spec, st), workloadInstanceModel{})
		require.Equal(t, spec, out.Spec)
		require.Equal(t, int64(0), m.Replicas.ValueInt64())
		require.False(t, m.Replicas.IsNull())
	})
	t.Run("unset replicas stay null", func(t *testing.T) {
		m, out := roundTrip(t, workloadInstanceKind, newObject("web", api.WorkloadInstanceSpec{DefinitionID: "d", RuntimeID: "r"}, st), workloadInstanceModel{})
		require.True(t, m.Replicas.IsNull())
		require.Nil(t, out.Spec.Replicas)
		require.True(t, m.Namespace.IsNull())
	})
}

func TestFieldPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var resp resource.SchemaResponse
	workloadDefinitionKind.resource().Schema(ctx, resource.SchemaRequest{}, &resp)
	has := schemaHasPath(resp.Schema)
	for _, tc := range []struct{ field, want string }{
		{"name", "name"},
		{`labels["app.kubernetes.io/name"]`, `labels["app.kubernetes.io/name"]`},
		{"spec.replicas", "replicas"},
		{"spec.containers[0].image", "containers[0].image"},
		{"spec.containers[1].ports[2].container_port", "containers[1].ports[2].container_port"},
		{"spec.containers[0].env[3].name", "containers[0].env"},
		{"spec.autoscaling.max_replicas", "autoscaling.max_replicas"},
		{"spec.manifests[2].metadata.name", "manifests"},
		{"spec", ""},
		{"spec.nonexistent", ""},
	} {
		t.Run(tc.field, func(t *testing.T) {
			got := nearestPath(ctx, has, fieldPath(tc.field, nil))
			require.Equal(t, tc.want, got.String())
		})
	}
}

func TestFieldPathRenames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var resp resource.SchemaResponse
	kubernetesRuntimeKind.resource().Schema(ctx, resource.SchemaRequest{}, &resp)
	got := nearestPath(ctx, schemaHasPath(resp.Schema), fieldPath("spec.provider", kubernetesRuntimeKind.renames))
	require.Equal(t, "provider_type", got.String())
	got = nearestPath(ctx, schemaHasPath(resp.Schema), fieldPath("spec.zones[1]", kubernetesRuntimeKind.renames))
	require.Equal(t, "zones[1]", got.String())
}

func TestAPIDiagnostics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var resp resource.SchemaResponse
	workloadDefinitionKind.resource().Schema(ctx, resource.SchemaRequest{}, &resp)
	has := schemaHasPath(resp.Schema)

	t.Run("field errors point at their attributes", func(t *testing.T) {
		err := api.Invalid(api.FieldError{Field: "spec.containers[0].image", Message: "is required"},
			api.FieldError{Field: "spec", Message: "exactly one of containers, manifests or helm must be set (2 are)"})
		diags := apiDiagnostics(ctx, has, nil, "Cannot create", err)
		require.Len(t, diags, 2)
		withPath, ok := diags[0].(interface{ Path() path.Path })
		require.True(t, ok)
		require.Equal(t, "containers[0].image", withPath.Path().String())
		require.Contains(t, diags[1].Detail(), "exactly one of")
	})
	t.Run("a wrong token says so in one line", func(t *testing.T) {
		diags := apiDiagnostics(ctx, has, nil, "Cannot create", api.Errorf(api.CodeUnauthorized, "bad token"))
		require.Len(t, diags, 1)
		require.Contains(t, diags[0].Detail(), "rejected the token")
		require.NotContains(t, diags[0].Detail(), "\n")
	})
	t.Run("dependents are listed", func(t *testing.T) {
		err := &api.Error{Code: api.CodeConflict, Message: "has dependents",
			Dependents: []api.ObjectRef{{Kind: "workload_instance", ID: "x", Name: "web"}}}
		diags := apiDiagnostics(ctx, has, nil, "Cannot delete", err)
		require.True(t, strings.Contains(diags[0].Detail(), `workload_instance "web"`))
	})
}

func TestStatusDetail(t *testing.T) {
	t.Parallel()
	st := &api.Status{Phase: api.PhaseFailed, Message: "cannot reach the Kubernetes API", Conditions: []api.Condition{
		{Type: "Connected", Status: api.ConditionFalse, Reason: "Unreachable", Message: "dial tcp 127.0.0.1:1: connection refused"},
		{Type: "Ready", Status: api.ConditionTrue},
		{Type: "DependenciesReady", Status: api.ConditionFalse, WaitingOn: `kubernetes_runtime "us"`},
	}}
	got := statusDetail(st)
	require.Contains(t, got, "Phase Failed: cannot reach the Kubernetes API")
	require.Contains(t, got, "Connected=False (Unreachable): dial tcp 127.0.0.1:1: connection refused")
	require.Contains(t, got, `[waiting on kubernetes_runtime "us"]`)
	require.NotContains(t, got, "Ready=True")
}
