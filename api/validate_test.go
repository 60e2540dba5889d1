package api_test

import (
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

func TestKindRegistry(t *testing.T) {
	t.Parallel()
	kinds := api.Kinds()
	require.Len(t, kinds, 11)
	for _, ki := range kinds {
		byPlural, ok := api.LookupPlural(ki.Plural)
		require.True(t, ok)
		require.Same(t, ki, byPlural)
		require.NotNil(t, ki.NewSpec())
		require.NotNil(t, ki.NewStatus())
		_, isStatus := ki.NewStatus().(api.StatusAccessor)
		require.True(t, isStatus, "%s status embeds Status", ki.Kind)
	}
	rt, _ := api.LookupKind(api.KindKubernetesRuntime)
	require.Equal(t, []string{"kubeconfig"}, rt.WriteOnly)
	require.Panics(t, func() {
		api.RegisterKind(api.KindDef[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus]{Kind: api.KindKubernetesRuntime})
	})
}

func TestWorkloadInstanceRefs(t *testing.T) {
	t.Parallel()
	ki, _ := api.LookupKind(api.KindWorkloadInstance)
	spec := &api.WorkloadInstanceSpec{DefinitionID: "d1", RuntimeID: "r1", Images: map[string]string{"web": "nginx:1", "db": "postgres:16"}}
	require.Equal(t, []api.FieldRef{
		{Field: "spec.definition_id", Kind: api.KindWorkloadDefinition, ID: "d1"},
		{Field: "spec.runtime_id", Kind: api.KindKubernetesRuntime, ID: "r1"},
	}, ki.Refs(spec))
	def := &api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web"}}}
	require.Equal(t, []api.FieldError{{Field: `spec.images["db"]`, Message: `the definition has no container "db"`}},
		ki.ValidateRefs(spec, map[string]any{"spec.definition_id": def}))
}

func TestValidateImage(t *testing.T) {
	t.Parallel()
	for img, ok := range map[string]bool{
		"nginx": true, "nginx:1.27": true, "docker.io/library/nginx:1.27": true, "localhost:5000/app": true,
		"ghcr.io/org/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": true,
		"": false, "Nginx": false, "nginx:": false, " nginx": false, "nginx:latest:x": false, "a/b@sha256:short": false,
	} {
		err := api.ValidateImage(img)
		require.Equal(t, ok, err == nil, "%q: %v", img, err)
	}
}

func TestValidateMeta(t *testing.T) {
	t.Parallel()
	require.Empty(t, api.ValidateMeta("web-1", map[string]string{"app.kubernetes.io/name": "web", "tier": ""}))
	fes := api.ValidateMeta("-web", map[string]string{"bad key!": "v", "k": "-bad-"})
	fields := []string{}
	for _, fe := range fes {
		fields = append(fields, fe.Field)
	}
	require.Equal(t, []string{"name", `labels["bad key!"]`, `labels["k"]`}, fields)
}

func TestLocalChartEscapes(t *testing.T) {
	t.Parallel()
	for chart, escapes := range map[string]bool{
		"demo": false, "team/demo-1.0.0.tgz": false, "a/../demo": false, "./demo": false,
		"/abs/inside/or/not": false, // only a server that knows the chart directory can judge
		"..":                 true, "../demo": true, "a/../../demo": true, "demo\x00": true,
	} {
		require.Equal(t, escapes, api.LocalChartEscapes(chart), "%q", chart)
	}
}

func TestDatabaseVersionTables(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{api.EnginePostgres, api.EngineMySQL} {
		for _, p := range []string{api.DatabaseProviderInCluster, api.DatabaseProviderRDS} {
			require.NotEmpty(t, api.DatabaseVersions(engine, p), "%s on %s", engine, p)
		}
	}
	require.Nil(t, api.DatabaseVersions("oracle", api.DatabaseProviderRDS))
	require.Equal(t, "16", api.DatabaseMajor(api.EnginePostgres, "16.4"))
	require.Equal(t, "8.0", api.DatabaseMajor(api.EngineMySQL, "8.0.39"))
	require.Equal(t, "8", api.DatabaseMajor(api.EngineMySQL, "8"))
}

func TestDatabaseReplicasPerRegion(t *testing.T) {
	t.Parallel()
	ki, _ := api.LookupKind(api.KindDatabase)
	check := func(engine string, n int) []api.FieldError {
		s := &api.DatabaseSpec{Engine: engine, ReplicasPerRegion: n}
		ki.Default(s)
		return ki.Validate(s)
	}
	require.Empty(t, check(api.EnginePostgres, 0))
	require.Empty(t, check(api.EnginePostgres, api.MaxReplicasPerRegion))
	require.Equal(t, []api.FieldError{{Field: "spec.replicas_per_region", Message: "must be between 0 and 5, not 6"}}, check(api.EnginePostgres, 6))
	require.Equal(t, []api.FieldError{{Field: "spec.replicas_per_region", Message: "must be between 0 and 5, not -1"}}, check(api.EnginePostgres, -1))
	require.Equal(t, []api.FieldError{{Field: "spec.replicas_per_region", Message: "must be 0 for mysql: QleetOS runs read replicas of postgres only"}}, check(api.EngineMySQL, 1))
}
