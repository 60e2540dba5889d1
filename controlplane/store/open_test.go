package store

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
	"golang.org/x/sync/errgroup"

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
	require.NotEmpty(t, lite.Sorted())
	require.Len(t, pg.Sorted(), len(lite.Sorted()))
	for i, m := range lite.Sorted() {
		require.Equal(t, m.String(), pg.Sorted()[i].String(), "both dialects carry the same numbered migrations")
	}
}

// storeURL gives each subtest a fresh database of the dialect.
func storeURL(t *testing.T, dialect string) string {
	if dialect == "sqlite" {
		return "sqlite://" + filepath.Join(t.TempDir(), "qleet.db")
	}
	return pgtest.URL(t)
}

// recordedMigrations lists bun/migrate's records: name and group, by name.
func recordedMigrations(ctx context.Context, t *testing.T, s *bunStore) []string {
	t.Helper()
	var recs []migrate.Migration
	require.NoError(t, s.rdb.NewSelect().Model(&recs).ColumnExpr("*").ModelTableExpr(migrationsTable).Order("name").Scan(ctx))
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s/%d", r.Name, r.GroupID))
	}
	return out
}

func TestReopenAppliesMigrationsOnce(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Logger: slog.New(slog.DiscardHandler), URL: storeURL(t, dialect)}
			ctx := context.Background()
			for range 2 {
				s, err := open(ctx, cfg)
				require.NoError(t, err)
				require.Equal(t, []string{"0001/1", "0002/1", "0003/1", "0004/1", "0005/1", "0006/1", "0007/1", "0008/1", "0009/1", "0010/1"}, recordedMigrations(ctx, t, s),
					"every migration is recorded once, in the first run's group")
				require.NoError(t, s.Close())
			}
		})
	}
}

// legacyMigrate builds a database the way the hand-written runner that preceded bun/migrate did (at
// commit 9a73010): migrations up to and including version upTo, applied in one transaction and recorded in
// schema_migrations (version, name, applied_at).
func legacyMigrate(ctx context.Context, t *testing.T, s *bunStore, upTo int) {
	t.Helper()
	ddl := `CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP NOT NULL)`
	if s.dialect == dialectPostgres {
		ddl = `CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`
	}
	dir := "migrations/" + s.dialect.String()
	entries, err := fs.ReadDir(migrationFiles, dir)
	require.NoError(t, err)
	require.NoError(t, s.wdb.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return err
		}
		for i, e := range entries[:upTo] {
			body, err := fs.ReadFile(migrationFiles, dir+"/"+e.Name())
			if err != nil {
				return err
			}
			if _, err := tx.Tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("%s: %w", e.Name(), err)
			}
			name := strings.TrimSuffix(e.Name(), ".tx.up.sql")
			if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				i+1, name, legacyAppliedAt); err != nil {
				return err
			}
		}
		return nil
	}))
}

var legacyAppliedAt = time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)

// TestUpgradeFromTheHandWrittenRunner opens, with bun/migrate, a database the previous runner made at
// version 5, holding an object and an outbox row: the five recorded versions are adopted (not applied
// again), only 0006 to 0008 run, and the data is intact and usable.
func TestUpgradeFromTheHandWrittenRunner(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := Config{Logger: slog.New(slog.DiscardHandler), URL: storeURL(t, dialect)}
			raw, err := openDialect(cfg)
			require.NoError(t, err)
			legacyMigrate(ctx, t, raw, 5)
			_, err = raw.wdb.ExecContext(ctx, `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status, created_at, updated_at)
				VALUES ('obj-1', 'workload_definition', 'web', 1, 1, '{"replicas":2}', '{}', ?, ?)`, legacyAppliedAt, legacyAppliedAt)
			require.NoError(t, err)
			_, err = raw.wdb.ExecContext(ctx, `INSERT INTO outbox (kind, object_id, created_at) VALUES ('workload_definition', 'obj-1', ?)`, legacyAppliedAt)
			require.NoError(t, err)
			require.NoError(t, raw.Close())

			s, err := open(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			require.Equal(t, []string{"0001/1", "0002/1", "0003/1", "0004/1", "0005/1", "0006/2", "0007/2", "0008/2", "0009/2", "0010/2"}, recordedMigrations(ctx, t, s),
				"versions 1-5 adopted as group 1, 0006 to 0010 applied as group 2")
			var first migrate.Migration
			require.NoError(t, s.rdb.NewSelect().Model(&first).ColumnExpr("*").ModelTableExpr(migrationsTable).Where("name = '0001'").Scan(ctx))
			require.True(t, first.MigratedAt.Equal(legacyAppliedAt), "adopted with the time it was applied: %s", first.MigratedAt)

			obj, err := s.Get(ctx, "workload_definition", "obj-1")
			require.NoError(t, err)
			require.Equal(t, "web", obj.Name)
			require.JSONEq(t, `{"replicas":2}`, string(obj.Spec))
			pending, err := s.PendingOutbox(ctx, 10)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			require.Equal(t, "obj-1", pending[0].ObjectID)
			require.Empty(t, pending[0].TraceParent, "0006's column defaults to no trace")

			_, err = s.Create(ctx, &CreateParams{Kind: "workload_definition", Name: "api", Spec: []byte(`{}`)})
			require.NoError(t, err, "the upgraded schema takes new writes")

			var legacy int
			require.NoError(t, s.rdb.NewSelect().TableExpr(legacyMigrationsTable).ColumnExpr("count(*)").Scan(ctx, &legacy))
			require.Equal(t, 5, legacy, "schema_migrations is left as it was")
		})
	}
}

// TestConcurrentMigrators opens one fresh database from several stores at once: each migration runs once
// (PostgreSQL: the advisory lock; SQLite: BEGIN IMMEDIATE and the check inside each migration).
func TestConcurrentMigrators(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := Config{Logger: slog.New(slog.DiscardHandler), URL: storeURL(t, dialect)}
			const n = 4
			stores := make([]*bunStore, n)
			var g errgroup.Group
			for i := range stores {
				g.Go(func() error {
					s, err := open(ctx, cfg)
					stores[i] = s
					return err
				})
			}
			require.NoError(t, g.Wait())
			for _, s := range stores {
				t.Cleanup(func() { _ = s.Close() })
			}
			recorded := recordedMigrations(ctx, t, stores[0])
			if dialect == "sqlite" {
				// SQLite migrators interleave migration by migration: one that lost a race lists again and
				// applies the rest as a group of its own, so only the names (each once) are fixed.
				for i, r := range recorded {
					recorded[i], _, _ = strings.Cut(r, "/")
				}
				require.Equal(t, []string{"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010"}, recorded)
				return
			}
			require.Equal(t, []string{"0001/1", "0002/1", "0003/1", "0004/1", "0005/1", "0006/1", "0007/1", "0008/1", "0009/1", "0010/1"}, recorded)
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
