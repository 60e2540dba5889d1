package store

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

func TestSQLitePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, path string
	}{
		{"sqlite:///var/lib/qleet/qleet.db", "/var/lib/qleet/qleet.db"},
		{"sqlite://data/qleet.db", "data/qleet.db"},
		{"sqlite:qleet.db", "qleet.db"},
		{"/tmp/qleet.db", "/tmp/qleet.db"},
		{"qleet.db", "qleet.db"},
	} {
		got, err := sqlitePath(tc.url)
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.path, got, tc.url)
	}
	for _, bad := range []string{"", ":memory:", "sqlite://:memory:", "file::memory:?cache=shared", "mysql://x/y", "sqlite:///x.db?_txlock=deferred"} {
		_, err := sqlitePath(bad)
		require.Error(t, err, bad)
	}
}

func TestMigrationsMatchAcrossDialects(t *testing.T) {
	t.Parallel()
	lite, err := loadMigrations(dialectSQLite)
	require.NoError(t, err)
	pg, err := loadMigrations(dialectPostgres)
	require.NoError(t, err)
	require.NotEmpty(t, lite)
	require.Len(t, pg, len(lite))
	for i := range lite {
		require.Equal(t, lite[i].name, pg[i].name, "both dialects carry the same numbered migrations")
	}
}

func TestReopenAppliesMigrationsOnce(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Logger: slog.New(slog.DiscardHandler)}
			if dialect == "sqlite" {
				cfg.URL = "sqlite://" + filepath.Join(t.TempDir(), "qleet.db")
			} else {
				cfg.URL = pgtest.URL(t)
			}
			ctx := context.Background()
			for range 2 {
				s, err := open(ctx, cfg)
				require.NoError(t, err)
				var versions []int64
				require.NoError(t, s.rdb.NewSelect().Table("schema_migrations").Column("version").Scan(ctx, &versions))
				require.Equal(t, []int64{1, 2, 3, 4, 5}, versions)
				require.NoError(t, s.Close())
			}
		})
	}
}

func TestOpenSQLiteSettings(t *testing.T) {
	t.Parallel()
	s, err := open(context.Background(), Config{
		URL: filepath.Join(t.TempDir(), "qleet.db"), Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for _, db := range []struct {
		name string
		q    func(string, any) error
	}{
		{"writer", func(p string, dst any) error { return s.wdb.QueryRowContext(ctx, "PRAGMA "+p).Scan(dst) }},
		{"reader", func(p string, dst any) error { return s.rdb.QueryRowContext(ctx, "PRAGMA "+p).Scan(dst) }},
	} {
		var mode string
		require.NoError(t, db.q("journal_mode", &mode))
		require.Equal(t, "wal", mode, db.name)
		var fk, busy int
		require.NoError(t, db.q("foreign_keys", &fk))
		require.Equal(t, 1, fk, db.name)
		require.NoError(t, db.q("busy_timeout", &busy))
		require.Equal(t, int(DefaultBusyTimeout.Milliseconds()), busy, db.name)
	}
	_, err = s.rdb.ExecContext(ctx, "DELETE FROM tokens")
	require.Error(t, err, "the read pool is query-only")
}
