package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPendingListUsesItsIndex: the safety net's lists of pending and owned objects, and the fan-out to
// the dependents that wait, are answered from the partial indexes of migration 0010, on both dialects,
// so that their cost follows what is pending and not the size of the kind. The predicates in the query
// must stay word for word those of the indexes, or the planners fall back to a scan; this catches that.
func TestPendingListUsesItsIndex(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := open(ctx, Config{Logger: slog.New(slog.DiscardHandler), URL: storeURL(t, dialect), CountsCompactInterval: time.Hour})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			explain := "EXPLAIN QUERY PLAN "
			if s.dialect == dialectPostgres {
				// The table is small: make the planner show whether it can use the index at all.
				_, err := s.wdb.ExecContext(ctx, "SET enable_seqscan = off")
				require.NoError(t, err)
				explain = "EXPLAIN "
			}
			plan := func(query string) string {
				rows, err := s.wdb.QueryContext(ctx, explain+query)
				require.NoError(t, err)
				defer rows.Close()
				cols, err := rows.Columns()
				require.NoError(t, err)
				var b strings.Builder
				for rows.Next() {
					vals := make([]any, len(cols))
					ptrs := make([]any, len(cols))
					for i := range vals {
						ptrs[i] = &vals[i]
					}
					require.NoError(t, rows.Scan(ptrs...))
					fmt.Fprintln(&b, vals...)
				}
				require.NoError(t, rows.Err())
				return b.String()
			}
			for name, q := range map[string]string{
				"pending":       "SELECT id FROM objects AS o WHERE (kind = 'workload_instance') AND (" + s.pendingPredicate() + ") ORDER BY id LIMIT 1001",
				"owned":         "SELECT id FROM objects AS o WHERE (kind = 'workload_instance') AND (" + ownedPredicate + ") ORDER BY id LIMIT 1001",
				"waiting users": "SELECT r.from_id FROM object_refs AS r JOIN objects AS o ON o.id = r.from_id WHERE r.to_id = 'x' AND (" + s.pendingPredicate() + ")",
			} {
				p := plan(q)
				want := "objects_pending_idx"
				switch name {
				case "owned":
					want = "objects_owned_idx"
				case "waiting users":
					want = "object_refs_to_id_idx" // driven by the reference index, each user read by its key
				}
				require.Contains(t, p, want, "%s: %s", name, p)
			}
		})
	}
}
