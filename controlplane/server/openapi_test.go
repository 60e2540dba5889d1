package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

func TestOpenAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code, data := e.raw(t, "", http.MethodGet, "/v1/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, code)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))

	t.Run("is OpenAPI 3.1", func(t *testing.T) {
		require.True(t, strings.HasPrefix(doc["openapi"].(string), "3.1."), doc["openapi"])
	})
	t.Run("every $ref resolves", func(t *testing.T) {
		var refs []string
		collectRefs(doc, &refs)
		require.NotEmpty(t, refs)
		for _, ref := range refs {
			require.True(t, strings.HasPrefix(ref, "#/"), ref)
			var cur any = doc
			for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				m, ok := cur.(map[string]any)
				require.True(t, ok, "ref %s", ref)
				cur, ok = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
				require.True(t, ok, "ref %s does not resolve", ref)
			}
		}
	})
	t.Run("every kind has its paths and operations", func(t *testing.T) {
		paths := doc["paths"].(map[string]any)
		for _, ki := range api.Kinds() {
			base := "/v1/" + ki.Plural
			for p, methods := range map[string][]string{
				base:                     {"get", "post"},
				base + "/{id}":           {"get", "put", "patch", "delete"},
				base + "/by-name/{name}": {"get"},
				base + "/{id}/status":    {"put"},
				base + "/{id}/finalize":  {"post"},
				base + "/{id}/events":    {"get", "post"},
			} {
				item, ok := paths[p].(map[string]any)
				require.True(t, ok, "path %s", p)
				for _, m := range methods {
					require.Contains(t, item, m, "%s %s", m, p)
				}
			}
		}
		require.Contains(t, paths, "/v1/workload_definitions/{id}/image")
	})
	t.Run("write-only fields are marked", func(t *testing.T) {
		spec := doc["components"].(map[string]any)["schemas"].(map[string]any)["KubernetesRuntimeSpec"].(map[string]any)
		kc := spec["properties"].(map[string]any)["kubeconfig"].(map[string]any)
		require.Equal(t, true, kc["writeOnly"])
		require.NotEmpty(t, kc["description"], "descriptions mirror the Go doc comments")
	})

	loader := openapi3.NewLoader()
	t3, err := loader.LoadFromData(data)
	require.NoError(t, err)
	t.Run("validates with kin-openapi", func(t *testing.T) {
		require.NoError(t, t3.Validate(context.Background()))
	})
	t.Run("real responses match their schemas", func(t *testing.T) {
		ctx := context.Background()
		_, def, inst := e.world(t, "oa")
		_, err := e.ctrl.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, api.WorkloadInstanceStatus{
			Status:  api.Status{Phase: api.PhaseReady, ObservedGeneration: 1, Conditions: []api.Condition{{Type: "Ready", Status: api.ConditionTrue}}},
			Objects: []api.AppliedObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Ready: true}},
		})
		require.NoError(t, err)
		for path, schema := range map[string]string{
			"/v1/workload_instances/" + inst.ID:             "WorkloadInstance",
			"/v1/workload_definitions/" + def.ID:            "WorkloadDefinition",
			"/v1/kubernetes_runtimes":                       "KubernetesRuntimeList",
			"/v1/workload_instances/nope":                   "ErrorResponse",
			"/v1/workload_instances/" + inst.ID + "/events": "EventList",
		} {
			_, body := e.raw(t, server.RoleAdmin, http.MethodGet, path, "", nil)
			var v any
			require.NoError(t, json.Unmarshal(body, &v))
			sch := t3.Components.Schemas[schema].Value
			require.NoError(t, sch.VisitJSON(v, openapi3.EnableJSONSchema2020()), "%s: %s", path, body)
		}
	})
}

func collectRefs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			if s, ok := sub.(string); ok && k == "$ref" {
				*out = append(*out, s)
				continue
			}
			collectRefs(sub, out)
		}
	case []any:
		for _, sub := range x {
			collectRefs(sub, out)
		}
	}
}
