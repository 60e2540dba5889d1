package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Migrations are hand-written SQL, one directory per dialect, files named NNNN_description.sql. Both
// directories hold the same versions. A migration is applied once, in a transaction, and recorded in
// schema_migrations; the schema is never derived from Go structs.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrationLockKey serialises concurrent PostgreSQL migrators (pg_advisory_xact_lock); SQLite serialises
// them with BEGIN IMMEDIATE.
const migrationLockKey = 7_261_015_220_447_301

type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations returns the dialect's migrations ordered by version.
func loadMigrations(d dialectName) ([]migration, error) {
	dir := "migrations/" + d.String()
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var out []migration
	seen := map[int64]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("store: migration %s: name must be NNNN_description.sql", name)
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %s: bad version %q", name, num)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("store: migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(migrationFiles, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", name, err)
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

func (s *bunStore) migrate(ctx context.Context) error {
	migs, err := loadMigrations(s.dialect)
	if err != nil {
		return err
	}
	var applied []string
	err = s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		if s.dialect == dialectPostgres {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", int64(migrationLockKey)); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if err := createMigrationsTable(ctx, tx, s.dialect); err != nil {
			return err
		}
		done, err := appliedVersions(ctx, tx)
		if err != nil {
			return err
		}
		for _, m := range migs {
			if done[m.version] {
				continue
			}
			if err := applyMigration(ctx, tx, m); err != nil {
				return err
			}
			applied = append(applied, m.name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.dialect, err)
	}
	for _, name := range applied {
		s.log.InfoContext(ctx, "store migration applied", "dialect", s.dialect.String(), "migration", name)
	}
	return nil
}

func createMigrationsTable(ctx context.Context, tx bun.Tx, d dialectName) error {
	ddl := `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER   NOT NULL PRIMARY KEY,
	name       TEXT      NOT NULL,
	applied_at TIMESTAMP NOT NULL
)`
	if d == dialectPostgres {
		ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    bigint      NOT NULL PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL
)`
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return nil
}

func appliedVersions(ctx context.Context, tx bun.Tx) (map[int64]bool, error) {
	var versions []int64
	if err := tx.NewSelect().Table("schema_migrations").Column("version").Scan(ctx, &versions); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	done := make(map[int64]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}

func applyMigration(ctx context.Context, tx bun.Tx, m migration) error {
	// Through the driver directly: bun would treat '?' in the SQL text as a placeholder.
	if _, err := tx.Tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("apply %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
		m.version, m.name, now()); err != nil {
		return fmt.Errorf("record %s: %w", m.name, err)
	}
	return nil
}

// now is the store's clock: UTC, truncated to the microsecond both databases keep.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
