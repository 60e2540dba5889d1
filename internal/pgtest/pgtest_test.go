package pgtest

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"
)

func connect(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.PingContext(t.Context()))
	return db
}

// This package's tests run without Main, so they also exercise the reference-counted shutdown.
func TestURL(t *testing.T) {
	outer := URL(t) // keeps the server up across the subtest
	outerDB := connect(t, outer)

	var inner string
	t.Run("each call is a fresh, separate database", func(t *testing.T) {
		inner = URL(t)
		require.NotEqual(t, outer, inner)
		u, err := url.Parse(inner)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(u.Path, "/test_"), u.Path)

		db := connect(t, inner)
		_, err = db.ExecContext(t.Context(), "CREATE TABLE only_here (x int)")
		require.NoError(t, err)
		var n int
		require.NoError(t, outerDB.QueryRowContext(t.Context(),
			"SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_here'").Scan(&n))
		require.Zero(t, n)
		require.NoError(t, db.Close())
	})

	u, err := url.Parse(inner)
	require.NoError(t, err)
	var exists bool
	require.NoError(t, outerDB.QueryRowContext(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", strings.TrimPrefix(u.Path, "/")).Scan(&exists))
	require.False(t, exists, "dropped when its test ended")
}

func TestServerStopsWithLastUser(t *testing.T) {
	t.Run("user", func(t *testing.T) { connect(t, URL(t)) })
	mu.Lock()
	defer mu.Unlock()
	require.Nil(t, srv, "no test uses the server any more")
	require.Nil(t, admin)
}
