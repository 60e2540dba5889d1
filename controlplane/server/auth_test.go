package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// TestRoleRouteMatrix sends every route with every kind of caller and checks who gets through: the
// four roles, no token, an expired token and a revoked one. Object routes name an object that does
// not exist, so a caller let through gets 400 or 404 and nothing changes; one stopped gets 401 or 403.
func TestRoleRouteMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.MetricsAuth = true; c.TokenCacheTTL = time.Hour }})
	ctx := context.Background()

	past := time.Now().Add(-time.Minute)
	expired, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, e.store.CreateToken(ctx, &store.Token{Hash: server.HashToken(expired), Name: "expired", Role: server.RoleAdmin, ExpiresAt: &past}))
	e.tokens["expired"] = expired
	revoked, err := e.admin.Tokens().Create(ctx, api.TokenRequest{Name: "revoked", Role: server.RoleAdmin})
	require.NoError(t, err)
	code, data := e.raw(t, server.RoleAdmin, http.MethodGet, "/v1/kubernetes_runtimes", "", nil)
	require.Equal(t, http.StatusOK, code, string(data))
	e.tokens["revoked"] = revoked.Token
	code, _ = e.raw(t, "revoked", http.MethodGet, "/v1/kubernetes_runtimes", "", nil)
	require.Equal(t, http.StatusOK, code, "the token works (and is cached) before it is revoked")
	require.NoError(t, e.admin.Tokens().Revoke(ctx, revoked.ID))

	const (
		public  = "public"
		read    = "read"
		write   = "write"
		status  = "status"
		tokens  = "tokens"
		nudge   = "write or status"
		missing = "00000000-0000-0000-0000-000000000000"
	)
	allowed := map[string][]string{
		public: {server.RoleAdmin, server.RoleDeveloper, server.RoleViewer, server.RoleController, "none", "expired", "revoked"},
		read:   {server.RoleAdmin, server.RoleDeveloper, server.RoleViewer, server.RoleController},
		write:  {server.RoleAdmin, server.RoleDeveloper, server.RoleController},
		status: {server.RoleAdmin, server.RoleController},
		tokens: {server.RoleAdmin},
		nudge:  {server.RoleAdmin, server.RoleDeveloper, server.RoleController},
	}
	type route struct{ method, path, body, perm string }
	routes := []route{
		{http.MethodGet, "/healthz", "", public},
		{http.MethodGet, "/readyz", "", public},
		{http.MethodGet, "/v1/openapi.json", "", public},
		{http.MethodGet, "/metrics", "", read},
		{http.MethodGet, "/v1/tokens", "", tokens},
		{http.MethodPost, "/v1/tokens", `{"name":"","role":"nobody"}`, tokens},
		{http.MethodDelete, "/v1/tokens/" + missing, "", tokens},
		{http.MethodGet, "/v1/graph", "", read},
	}
	for _, ki := range api.Kinds() {
		base := "/v1/" + ki.Plural
		obj := base + "/" + missing
		routes = append(routes,
			route{http.MethodGet, base, "", read},
			route{http.MethodPost, base, `{}`, write},
			route{http.MethodGet, base + "/by-name/nothing", "", read},
			route{http.MethodGet, obj, "", read},
			route{http.MethodPut, obj, `{}`, write},
			route{http.MethodPatch, obj, `{}`, write},
			route{http.MethodDelete, obj, "", write},
			route{http.MethodPut, obj + "/status", `{}`, status},
			route{http.MethodPost, obj + "/finalize", "", status},
			route{http.MethodGet, obj + "/events", "", read},
			route{http.MethodPost, obj + "/events", `{}`, status},
			route{http.MethodPost, obj + "/image", `{}`, write},
			route{http.MethodPost, obj + "/reconcile", "", nudge},
		)
	}
	callers := []string{server.RoleAdmin, server.RoleDeveloper, server.RoleViewer, server.RoleController, "none", "expired", "revoked"}
	rows := 0
	for _, rt := range routes {
		for _, who := range callers {
			rows++
			t.Run(fmt.Sprintf("%s %s as %s", rt.method, rt.path, who), func(t *testing.T) {
				code, data := e.raw(t, who, rt.method, rt.path, rt.body, nil)
				ok := false
				for _, r := range allowed[rt.perm] {
					ok = ok || r == who
				}
				switch {
				case ok:
					require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, code, "%s may %s: %s", who, rt.perm, data)
				case who == "none" || who == "expired" || who == "revoked":
					require.Equal(t, http.StatusUnauthorized, code, string(data))
				default:
					require.Equal(t, http.StatusForbidden, code, "%s may not %s: %s", who, rt.perm, data)
				}
			})
		}
	}
	t.Logf("role x route matrix: %d routes x %d callers = %d rows", len(routes), len(callers), rows)
}

func TestOnlyAdminMayOptIntoClusterScopedObjects(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := `{"name":"%s","spec":{"manifests":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n","cluster_scoped":true}}`
	code, data := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_definitions", fmt.Sprintf(body, "dev-scoped"), nil)
	require.Equal(t, http.StatusForbidden, code, string(data))
	ae := apiErr(t, data)
	require.Equal(t, "spec.cluster_scoped", ae.Field)
	_, err := e.admin.WorkloadDefinitions().GetByName(context.Background(), "dev-scoped")
	require.True(t, api.IsNotFound(err), "nothing was written")

	code, data = e.raw(t, server.RoleAdmin, http.MethodPost, "/v1/workload_definitions", fmt.Sprintf(body, "admin-scoped"), nil)
	require.Equal(t, http.StatusCreated, code, string(data))
	def, err := e.dev.WorkloadDefinitions().GetByName(context.Background(), "admin-scoped")
	require.NoError(t, err)
	require.True(t, def.Spec.ClusterScoped)
	_, err = e.dev.WorkloadDefinitions().Patch(context.Background(), def.ID, map[string]any{"labels": map[string]string{"x": "y"}})
	require.True(t, api.IsForbidden(err), "a developer may not write a definition that keeps the opt-in: %v", err)
}
