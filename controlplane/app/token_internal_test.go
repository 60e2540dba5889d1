package app

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/cutproxy"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// TestTokensSurviveADatabaseOutageAtStart: a starting API replica whose PostgreSQL does not answer waits
// for it, and keeps the tokens it has. Before, a failed look-up of the stored token minted a new one
// (replacing the file the controllers read), and a failed registration ended the process.
func TestTokensSurviveADatabaseOutageAtStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	proxy := cutproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	st, err := store.Open(ctx, store.Config{URL: u.String(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	a := &App{cfg: Config{DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st}

	first, err := a.ensureToken(ctx, "admin.token", "admin", server.RoleAdmin)
	require.NoError(t, err)

	// outage cuts the database's connection for 2s, from now.
	outage := func() *time.Timer {
		proxy.SetCut(true)
		return time.AfterFunc(2*time.Second, func() { proxy.SetCut(false) })
	}

	t.Run("a stored token is kept while the database is down", func(t *testing.T) {
		defer outage().Stop()
		again, err := a.ensureToken(ctx, "admin.token", "admin", server.RoleAdmin)
		require.NoError(t, err, "the look-up waits for the database")
		require.Equal(t, first, again, "no new token was minted")
		b, err := os.ReadFile(filepath.Join(a.cfg.DataDir, "admin.token"))
		require.NoError(t, err)
		require.Equal(t, first+"\n", string(b))
	})
	t.Run("a first token is registered once the database is back", func(t *testing.T) {
		defer outage().Stop()
		tok, err := a.ensureToken(ctx, "controller.token", "controller", server.RoleController)
		require.NoError(t, err, "the registration waits for the database")
		got, err := st.GetToken(ctx, server.HashToken(tok))
		require.NoError(t, err)
		require.Equal(t, server.RoleController, got.Role)
	})
	t.Run("a database that never answers ends the wait with its error", func(t *testing.T) {
		proxy.SetCut(true)
		defer proxy.SetCut(false)
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := a.ensureToken(short, "admin.token", "admin", server.RoleAdmin)
		require.Error(t, err)
		require.True(t, store.Unavailable(err), "the error says why: %v", err)
		b, rerr := os.ReadFile(filepath.Join(a.cfg.DataDir, "admin.token"))
		require.NoError(t, rerr)
		require.Equal(t, first+"\n", string(b), "the stored token is untouched")
	})
}
