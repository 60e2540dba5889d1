package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Object counts kept on every write (migration 0008_object_counts): triggers on objects append a delta row
// to object_counts for each change of an object's kind, phase or reconciled state, in the transaction that
// wrote the object, so the counts are exact with any number of API replicas sharing the database. The
// deltas are folded into one row per (kind, phase) by compactObjectCounts, which every store runs every
// Config.CountsCompactInterval; reading the counts costs the number of rows, never the number of objects.

// DefaultCountsCompactInterval is how often a store folds the object count deltas by default.
const DefaultCountsCompactInterval = 10 * time.Second

// countsCompactLockKey lets one PostgreSQL store fold the deltas at a time (a transaction advisory lock,
// tried, never waited for): two folds would only wait on each other's rows.
const countsCompactLockKey = 7_261_015_220_447_302

// unreconciledPredicate is, per dialect, the condition on an objects row (unqualified columns) that says it
// is not reconciled. It is, word for word, the predicate of objects_unreconciled_idx, so that the planner
// may read the unreconciled objects of a kind from that index alone.
var unreconciledPredicate = map[dialectName]string{
	dialectSQLite: "deletion_requested_at IS NOT NULL OR json_extract(status, '$.phase') IS NOT 'Ready'" +
		" OR json_extract(status, '$.observed_generation') IS NOT generation",
	dialectPostgres: "deletion_requested_at IS NOT NULL OR (status ->> 'phase') IS DISTINCT FROM 'Ready'" +
		" OR (status -> 'observed_generation') IS DISTINCT FROM (generation::text)::jsonb",
}

// CountObjectsByKind returns what CountObjects(&CountParams{GroupBy: []string{"kind"}}) returns (one group
// per kind and phase, Values holding the kind), read from the counts kept on every write and, for the oldest
// unreconciled object, from an index: its cost does not grow with the number of objects. OldestUnreconciled
// is the kind's, set on every group of the kind that has unreconciled objects.
func (s *bunStore) CountObjectsByKind(ctx context.Context) ([]*ObjectCount, error) {
	// The correlated subquery finds each kind's least recently written unreconciled object with one seek
	// of objects_unreconciled_idx (the predicate must match the index's for the planner to use it).
	oldest := "SELECT MIN(updated_at) FROM objects WHERE kind = k.kind AND (" + unreconciledPredicate[s.dialect] + ")"
	if s.dialect == dialectSQLite {
		oldest = "SELECT MIN(updated_at) FROM objects INDEXED BY objects_unreconciled_idx WHERE kind = k.kind AND (" +
			unreconciledPredicate[s.dialect] + ")"
	}
	query := "SELECT k.kind, k.phase, k.objects, k.unreconciled, CASE WHEN k.unreconciled > 0 THEN (" + oldest + ") END" +
		" FROM (SELECT kind, phase, SUM(objects) AS objects, SUM(unreconciled) AS unreconciled FROM object_counts" +
		" GROUP BY kind, phase HAVING SUM(objects) <> 0) AS k"
	var out []*ObjectCount
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		oldestByKind := map[string]time.Time{}
		for rows.Next() {
			c := &ObjectCount{Values: make([]string, 1)}
			var oldest any
			if err := rows.Scan(&c.Values[0], &c.Phase, &c.Count, &c.Unreconciled, &oldest); err != nil {
				return err
			}
			t, err := scannedTime(oldest)
			if err != nil {
				return fmt.Errorf("oldest unreconciled: %w", err)
			}
			if k := c.Values[0]; !t.IsZero() {
				oldestByKind[k] = t
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range out {
			if c.Unreconciled > 0 {
				c.OldestUnreconciled = oldestByKind[c.Values[0]]
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: count objects by kind: %w", err)
	}
	return out, nil
}

// countDeltas returns how many rows object_counts holds beyond one per (kind, phase): the rows that
// compactObjectCounts would fold.
func (s *bunStore) countDeltas(ctx context.Context) (int64, error) {
	var n int64
	err := s.query(ctx, func(ctx context.Context, db bun.IDB) error {
		return db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM object_counts) -"+
			" (SELECT COUNT(*) FROM (SELECT 1 FROM object_counts GROUP BY kind, phase) AS g)").Scan(&n)
	})
	return n, err
}

// compactObjectCounts folds the rows of object_counts into one per (kind, phase), dropping the kinds and
// phases that no object has. It keeps the sums exact while writers append deltas: on PostgreSQL one
// statement deletes the rows its snapshot sees and inserts their sums (a delta committed meanwhile is not
// deleted), and SQLite has one writer.
func (s *bunStore) compactObjectCounts(ctx context.Context) error {
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		if s.dialect == dialectPostgres {
			var locked bool
			if err := tx.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock(?)", int64(countsCompactLockKey)).Scan(&locked); err != nil {
				return err
			}
			if !locked {
				return nil // another store is folding them
			}
			_, err := tx.ExecContext(ctx, "WITH d AS (DELETE FROM object_counts RETURNING kind, phase, objects, unreconciled)"+
				" INSERT INTO object_counts (kind, phase, objects, unreconciled)"+
				" SELECT kind, phase, SUM(objects), SUM(unreconciled) FROM d GROUP BY kind, phase HAVING SUM(objects) <> 0")
			return err
		}
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT MAX(id) FROM object_counts").Scan(&last); err != nil {
			return err
		}
		if !last.Valid {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO object_counts (kind, phase, objects, unreconciled)"+
			" SELECT kind, phase, SUM(objects), SUM(unreconciled) FROM object_counts WHERE id <= ?"+
			" GROUP BY kind, phase HAVING SUM(objects) <> 0", last.Int64); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM object_counts WHERE id <= ?", last.Int64)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: compact object counts: %w", err)
	}
	return nil
}

// runCountsCompactor folds the object count deltas every interval, when there are any, until stop is
// closed. A failed fold is logged and tried again at the next tick: the deltas stay exact meanwhile.
func (s *bunStore) runCountsCompactor(interval time.Duration, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		n, err := s.countDeltas(ctx)
		if err == nil && n > 0 {
			err = s.compactObjectCounts(ctx)
		}
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "store: fold object counts", "error", err)
		}
	}
}
