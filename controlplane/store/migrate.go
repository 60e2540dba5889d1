package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// Migrations are hand-written SQL, one directory per dialect, files named NNNN_description.tx.up.sql, run
// by bun/migrate. Both directories hold the same versions. A migration runs in its own transaction, which
// also records it in bun_migrations, so a crash never leaves a migration applied but unrecorded; the
// schema is never derived from Go structs. Migrations are forward-only: there are no down files.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrationLockKey serialises concurrent PostgreSQL migrators (a session pg_advisory_lock, released when
// the migrator's connection ends, so a crashed migrator never leaves it held). SQLite serialises them with
// BEGIN IMMEDIATE, and each migration checks, inside its transaction, that no one applied it meanwhile.
const migrationLockKey = 7_261_015_220_447_301

// Tables of bun/migrate (its defaults), and of the hand-written runner that preceded it.
const (
	migrationsTable       = "bun_migrations"
	migrationLocksTable   = "bun_migration_locks"
	legacyMigrationsTable = "schema_migrations"
)

// errAppliedMeanwhile stops a migration that another migrator applied after this one listed what to
// apply (SQLite only: PostgreSQL migrators hold a lock); the migration is then listed again.
var errAppliedMeanwhile = errors.New("migration applied meanwhile by another migrator")

// loadMigrations returns the dialect's migrations, discovered from the embedded SQL files.
func loadMigrations(d dialectName) (*migrate.Migrations, error) {
	dir, err := fs.Sub(migrationFiles, "migrations/"+d.String())
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	migs := migrate.NewMigrations()
	if err := migs.Discover(dir); err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	for _, m := range migs.Sorted() {
		if m.Up == nil {
			return nil, fmt.Errorf("store: migration %s has no .tx.up.sql file", m)
		}
	}
	return migs, nil
}

func (s *bunStore) migrate(ctx context.Context) error {
	migs, err := loadMigrations(s.dialect)
	if err != nil {
		return err
	}
	unlock, err := s.lockMigrations(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate %s: lock: %w", s.dialect, err)
	}
	defer unlock()

	m := migrate.NewMigrator(s.wdb, migs,
		migrate.WithTableName(migrationsTable),
		migrate.WithLocksTableName(migrationLocksTable),
		migrate.WithMarkAppliedOnSuccess(true),
		// The record is written by recordMigration inside the migration's transaction; bun's own record,
		// written after the commit, then finds it and only refreshes it.
		migrate.WithUpsert(true),
		migrate.BeforeMigration(refuseIfRecorded),
		migrate.AfterMigration(recordMigration),
	)
	if err := m.Init(ctx); err != nil {
		return fmt.Errorf("store: migrate %s: init: %w", s.dialect, err)
	}
	if err := s.adoptLegacyMigrations(ctx); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.dialect, err)
	}
	var group *migrate.MigrationGroup
	for attempt := 0; ; attempt++ {
		group, err = m.Migrate(ctx)
		// Each lost race means another migrator applied at least one migration, so this ends.
		if !errors.Is(err, errAppliedMeanwhile) || attempt > len(migs.Sorted()) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.dialect, err)
	}
	for _, mig := range group.Migrations {
		s.log.InfoContext(ctx, "store migration applied", "dialect", s.dialect.String(), "migration", mig.String())
	}
	return nil
}

// lockMigrations takes PostgreSQL's migration lock on a connection of its own, and returns its release.
func (s *bunStore) lockMigrations(ctx context.Context) (func(), error) {
	if s.dialect != dialectPostgres {
		return func() {}, nil
	}
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", int64(migrationLockKey)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return func() {
		// A fresh context: the release must happen even when ctx is done; closing the connection would
		// release the lock too.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(uctx, "SELECT pg_advisory_unlock(?)", int64(migrationLockKey))
		_ = conn.Close()
	}, nil
}

// refuseIfRecorded runs first in a migration's transaction: it stops a migration that is already recorded.
func refuseIfRecorded(ctx context.Context, db bun.IConn, mig *migrate.Migration) error {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+migrationsTable+" WHERE name = ?", mig.Name).Scan(&n); err != nil {
		return fmt.Errorf("read %s: %w", migrationsTable, err)
	}
	if n > 0 {
		return fmt.Errorf("%s: %w", mig, errAppliedMeanwhile)
	}
	return nil
}

// recordMigration runs last in a migration's transaction: it records the migration with its changes.
func recordMigration(ctx context.Context, db bun.IConn, mig *migrate.Migration) error {
	if _, err := db.ExecContext(ctx, "INSERT INTO "+migrationsTable+" (name, group_id, migrated_at) VALUES (?, ?, ?)",
		mig.Name, mig.GroupID, now()); err != nil {
		return fmt.Errorf("record %s: %w", mig, err)
	}
	return nil
}

// adoptLegacyMigrations carries the versions recorded by the hand-written runner that preceded bun/migrate
// (schema_migrations: version, name, applied_at) into bun_migrations, once, so that a database it made
// upgrades in place: version 5 becomes migration "0005", in group 1, applied when it was. schema_migrations
// is left as it was.
func (s *bunStore) adoptLegacyMigrations(ctx context.Context) error {
	return s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		exists, err := s.tableExists(ctx, tx, legacyMigrationsTable)
		if err != nil || !exists {
			return err
		}
		n, err := tx.NewSelect().TableExpr(migrationsTable).Count(ctx)
		if err != nil {
			return fmt.Errorf("read %s: %w", migrationsTable, err)
		}
		if n > 0 {
			return nil // adopted already, or bun/migrate ran first
		}
		var legacy []struct {
			Version   int64     `bun:"version"`
			AppliedAt time.Time `bun:"applied_at"`
		}
		if err := tx.NewSelect().TableExpr(legacyMigrationsTable).Column("version", "applied_at").
			Order("version").Scan(ctx, &legacy); err != nil {
			return fmt.Errorf("read %s: %w", legacyMigrationsTable, err)
		}
		for _, l := range legacy {
			rec := &migrate.Migration{Name: fmt.Sprintf("%04d", l.Version), GroupID: 1, MigratedAt: l.AppliedAt.UTC()}
			if _, err := tx.NewInsert().Model(rec).ModelTableExpr(migrationsTable).Exec(ctx); err != nil {
				return fmt.Errorf("adopt %s version %d: %w", legacyMigrationsTable, l.Version, err)
			}
		}
		return nil
	})
}

// tableExists reports whether the database has a table of that name.
func (s *bunStore) tableExists(ctx context.Context, tx bun.Tx, name string) (bool, error) {
	q := "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	if s.dialect == dialectPostgres {
		q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
	}
	var n int
	if err := tx.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
		return false, fmt.Errorf("look for table %s: %w", name, err)
	}
	return n > 0, nil
}

// now is the store's clock: UTC, truncated to the microsecond both databases keep.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
