// Package apitest starts a real QleetOS API server for tests: SQLite in the test's temporary directory
// and an httptest server, closed in t.Cleanup. It has no controllers and no broker; tests that need the
// whole control plane use internal/cptest.
package apitest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// API is a running API server.
type API struct {
	// Store is the server's database.
	Store store.Store
	// URL is the server's base URL.
	URL string
}

// Start starts an API server on a fresh SQLite database.
func Start(t testing.TB) *API {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(context.Background(), store.Config{URL: filepath.Join(t.TempDir(), "qleet.db"), Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	srv, err := server.New(server.Config{Store: st, Logger: quiet, Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &API{Store: st, URL: hs.URL}
}

// Client mints a token with the role (server.RoleAdmin, RoleDeveloper, ...) and returns a client using it.
func (a *API) Client(t testing.TB, role string) *client.Client {
	t.Helper()
	tok, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, a.Store.CreateToken(context.Background(), &store.Token{Hash: server.HashToken(tok), Name: role, Role: role}))
	c, err := client.New(a.URL, client.WithToken(tok))
	require.NoError(t, err)
	return c
}
