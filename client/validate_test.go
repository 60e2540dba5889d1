package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
)

func TestKindRegistry(t *testing.T) {
	t.Parallel()
	kinds := client.Kinds()
	require.Len(t, kinds, 11)
	for _, ki := range kinds {
		byPlural, ok := client.LookupPlural(ki.Plural)
		require.True(t, ok)
		require.Same(t, ki, byPlural)
		require.NotNil(t, ki.NewSpec())
		require.NotNil(t, ki.NewStatus())
		_, isStatus := ki.NewStatus().(client.StatusAccessor)
		require.True(t, isStatus, "%s status embeds Status", ki.Kind)
	}
	rt, _ := client.LookupKind(client.KindKubernetesRuntime)
	require.Equal(t, []string{"kubeconfig"}, rt.WriteOnly)
	require.Panics(t, func() {
		client.RegisterKind(client.KindDef[client.KubernetesRuntimeSpec, client.KubernetesRuntimeStatus]{Kind: client.KindKubernetesRuntime})
	})
}

func TestWorkloadInstanceRefs(t *testing.T) {
	t.Parallel()
	ki, _ := client.LookupKind(client.KindWorkloadInstance)
	spec := &client.WorkloadInstanceSpec{DefinitionID: "d1", RuntimeID: "r1", Images: map[string]string{"web": "nginx:1", "db": "postgres:16"}}
	require.Equal(t, []client.FieldRef{
		{Field: "spec.definition_id", Kind: client.KindWorkloadDefinition, ID: "d1"},
		{Field: "spec.runtime_id", Kind: client.KindKubernetesRuntime, ID: "r1"},
	}, ki.Refs(spec))
	def := &client.WorkloadDefinitionSpec{Containers: []client.Container{{Name: "web"}}}
	require.Equal(t, []client.FieldError{{Field: `spec.images["db"]`, Message: `the definition has no container "db"`}},
		ki.ValidateRefs(spec, map[string]any{"spec.definition_id": def}))
}

func TestValidateImage(t *testing.T) {
	t.Parallel()
	for img, ok := range map[string]bool{
		"nginx": true, "nginx:1.27": true, "docker.io/library/nginx:1.27": true, "localhost:5000/app": true,
		"ghcr.io/org/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": true,
		"": false, "Nginx": false, "nginx:": false, " nginx": false, "nginx:latest:x": false, "a/b@sha256:short": false,
	} {
		err := client.ValidateImage(img)
		require.Equal(t, ok, err == nil, "%q: %v", img, err)
	}
}

func TestValidateMeta(t *testing.T) {
	t.Parallel()
	require.Empty(t, client.ValidateMeta("web-1", map[string]string{"app.kubernetes.io/name": "web", "tier": ""}))
	fes := client.ValidateMeta("-web", map[string]string{"bad key!": "v", "k": "-bad-"})
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
		require.Equal(t, escapes, client.LocalChartEscapes(chart), "%q", chart)
	}
}

func TestDatabaseVersionTables(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{client.EnginePostgres, client.EngineMySQL} {
		for _, p := range []string{client.DatabaseProviderInCluster, client.DatabaseProviderRDS} {
			require.NotEmpty(t, client.DatabaseVersions(engine, p), "%s on %s", engine, p)
		}
	}
	require.Nil(t, client.DatabaseVersions("oracle", client.DatabaseProviderRDS))
	require.Equal(t, "16", client.DatabaseMajor(client.EnginePostgres, "16.4"))
	require.Equal(t, "8.0", client.DatabaseMajor(client.EngineMySQL, "8.0.39"))
	require.Equal(t, "8", client.DatabaseMajor(client.EngineMySQL, "8"))
}
