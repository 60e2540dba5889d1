package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// TestDatabaseDown stops the PostgreSQL server under a running API: a database that is down is the
// control plane's trouble, not the caller's and not a bug, so it answers 503 with Retry-After (which
// clients retry), never 500.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A server of its own (the shared test server must stay up for the other tests).
	url, stopPostgres, err := pgtest.StartServer(ctx)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stopPostgres()
		}
	})
	st, err := store.Open(ctx, store.Config{URL: url, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := setup(t, setupOpts{st: st})
	def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("up"))
	require.NoError(t, err)

	stopPostgres()
	stopped = true

	t.Run("reads and writes answer 503 with Retry-After", func(t *testing.T) {
		for _, req := range []struct{ method, path, body string }{
			{http.MethodGet, "/v1/workload_definitions/" + def.ID, ""},
			{http.MethodGet, "/v1/workload_definitions", ""},
			{http.MethodPost, "/v1/workload_definitions", `{"name":"down","spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}`},
		} {
			r, err := http.NewRequestWithContext(ctx, req.method, e.hs.URL+req.path, nil)
			if req.body != "" {
				r, err = http.NewRequestWithContext(ctx, req.method, e.hs.URL+req.path, strings.NewReader(req.body))
				r.Header.Set("Content-Type", "application/json")
			}
			require.NoError(t, err)
			r.Header.Set("Authorization", "Bearer "+e.tokens[server.RoleDeveloper])
			resp, err := e.hs.Client().Do(r)
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s", req.method, req.path)
			require.Equal(t, "1", resp.Header.Get("Retry-After"), "%s %s", req.method, req.path)
		}
	})

	t.Run("a token never seen before is not refused as invalid while the database is down", func(t *testing.T) {
		tok, err := server.NewToken()
		require.NoError(t, err)
		code, body := e.raw(t, "", http.MethodGet, "/v1/workload_definitions", "", http.Header{"Authorization": {"Bearer " + tok}})
		require.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
		require.Equal(t, api.CodeUnavailable, apiErr(t, body).Code)
		require.Contains(t, apiErr(t, body).Message, "database is unavailable")
	})

	t.Run("the client retries a 503 until its retry time ends, then returns it", func(t *testing.T) {
		var requests atomic.Int32
		counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			e.srv.ServeHTTP(w, r)
		}))
		t.Cleanup(counted.Close)
		c, err := client.New(counted.URL, client.WithToken(e.tokens[server.RoleDeveloper]), client.WithRetryUnavailable(3*time.Second))
		require.NoError(t, err)
		_, err = c.WorkloadDefinitions().Get(ctx, def.ID)
		require.Equal(t, api.CodeUnavailable, api.ErrorCode(err), "%v", err)
		require.Greater(t, requests.Load(), int32(1), "a 503 is retried")

		requests.Store(0)
		once, err := client.New(counted.URL, client.WithToken(e.tokens[server.RoleDeveloper]), client.WithRetryUnavailable(0))
		require.NoError(t, err)
		_, err = once.WorkloadDefinitions().Get(ctx, def.ID)
		require.Equal(t, api.CodeUnavailable, api.ErrorCode(err), "%v", err)
		require.Equal(t, int32(1), requests.Load(), "retries off")
	})
}
