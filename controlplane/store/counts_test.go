package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// tally is what the metrics read of one kind: objects and unreconciled objects by phase, and the oldest
// last write of an unreconciled object.
type tally struct {
	Phases       map[string][2]int64 // phase: objects, unreconciled
	OldestUnrec  time.Time
	Unreconciled int64
}

// tallies folds CountObjects-shaped groups (Values[0] is the kind) into tallies by kind.
func tallies(t *testing.T, counts []*ObjectCount) map[string]tally {
	t.Helper()
	out := map[string]*tally{}
	for _, c := range counts {
		require.Len(t, c.Values, 1)
		k := out[c.Values[0]]
		if k == nil {
			k = &tally{Phases: map[string][2]int64{}}
			out[c.Values[0]] = k
		}
		_, dup := k.Phases[c.Phase]
		require.False(t, dup, "one group per kind and phase: %s/%s", c.Values[0], c.Phase)
		k.Phases[c.Phase] = [2]int64{c.Count, c.Unreconciled}
		k.Unreconciled += c.Unreconciled
		if !c.OldestUnreconciled.IsZero() && (k.OldestUnrec.IsZero() || c.OldestUnreconciled.Before(k.OldestUnrec)) {
			k.OldestUnrec = c.OldestUnreconciled
		}
	}
	vals := make(map[string]tally, len(out))
	for kind, k := range out {
		vals[kind] = *k
	}
	return vals
}

// requireCountsExact compares the kept counts with a full aggregation of every object.
func requireCountsExact(ctx context.Context, t *testing.T, s *bunStore, msg string) map[string]tally {
	t.Helper()
	full, err := s.CountObjects(ctx, &CountParams{GroupBy: []string{"kind"}})
	require.NoError(t, err)
	kept, err := s.CountObjectsByKind(ctx)
	require.NoError(t, err)
	want := tallies(t, full)
	require.Equal(t, want, tallies(t, kept), "%s: the kept counts are the full aggregation's", msg)
	return want
}

func countsStore(t *testing.T, dialect string, compact time.Duration) *bunStore {
	t.Helper()
	return countsStoreAt(t, storeURL(t, dialect), compact)
}

func countsStoreAt(t *testing.T, url string, compact time.Duration) *bunStore {
	t.Helper()
	s, err := open(context.Background(), Config{Logger: slog.New(slog.DiscardHandler), URL: url, CountsCompactInterval: compact})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// countsWorkload makes random writes of every kind that changes a count: creates with and without a
// status, status writes that move the phase and observed_generation, spec changes that move the
// generation, deletion requests and finalizations.
type countsWorkload struct {
	s   *bunStore
	rnd *rand.Rand
	mu  sync.Mutex
	ids map[string]string // id: kind
	seq int
	// prefix keeps the names of two workloads on one database apart.
	prefix string
}

var countsPhases = []string{"", "Pending", "Reconciling", "Ready", "Ready", "Ready", "Failed", "Deleting", "Degraded"}

func (w *countsWorkload) pick() (string, string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, kind := range w.ids { // map order is random enough to pick one
		return id, kind, true
	}
	return "", "", false
}

func (w *countsWorkload) status(gen int64) string {
	w.mu.Lock()
	phase := countsPhases[w.rnd.IntN(len(countsPhases))]
	obs := gen - int64(w.rnd.IntN(2))
	noObs := w.rnd.IntN(5) == 0
	w.mu.Unlock()
	if phase == "" {
		return `{}`
	}
	if noObs {
		return fmt.Sprintf(`{"phase":%q}`, phase)
	}
	return fmt.Sprintf(`{"phase":%q,"observed_generation":%d}`, phase, obs)
}

// step makes one random write. Writes that lose a race with another writer (the object went) are fine.
func (w *countsWorkload) step(ctx context.Context) error {
	w.mu.Lock()
	op := w.rnd.IntN(10)
	w.seq++
	n := w.seq
	kind := []string{"alpha", "beta", "gamma"}[w.rnd.IntN(3)]
	w.mu.Unlock()
	id, idKind, ok := w.pick()
	if !ok || op < 3 {
		status := `{}`
		if op%2 == 0 {
			status = w.status(1)
		}
		obj, err := w.s.Create(ctx, &CreateParams{Kind: kind, Name: fmt.Sprintf("%so%d", w.prefix, n), Spec: json.RawMessage(`{}`), Status: json.RawMessage(status)})
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.ids[obj.ID] = obj.Kind
		w.mu.Unlock()
		return nil
	}
	obj, err := w.s.Get(ctx, idKind, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case op < 6:
		_, err = w.s.UpdateStatus(ctx, &UpdateStatusParams{Kind: idKind, ID: id, Status: json.RawMessage(w.status(obj.Generation))})
	case op < 8:
		_, err = w.s.UpdateSpec(ctx, &UpdateSpecParams{Kind: idKind, ID: id, Spec: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
	case obj.DeletionRequestedAt == nil:
		_, err = w.s.RequestDeletion(ctx, idKind, id, DeletionOptions{})
	default:
		err = w.s.Finalize(ctx, idKind, id)
		if err == nil {
			w.mu.Lock()
			delete(w.ids, id)
			w.mu.Unlock()
		}
	}
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func TestObjectCountsStayExact(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()

			t.Run("creates, status and spec changes, deletions, folds", func(t *testing.T) {
				s := countsStore(t, dialect, time.Hour)
				seed := uint64(time.Now().UnixNano())
				t.Logf("seed %d", seed)
				w := &countsWorkload{s: s, rnd: rand.New(rand.NewPCG(seed, 1)), ids: map[string]string{}}
				requireCountsExact(ctx, t, s, "empty")
				for i := 1; i <= 400; i++ {
					require.NoError(t, w.step(ctx))
					if i%20 == 0 {
						requireCountsExact(ctx, t, s, fmt.Sprintf("after %d writes", i))
					}
					if i%70 == 0 {
						require.NoError(t, s.compactObjectCounts(ctx))
						n, err := s.countDeltas(ctx)
						require.NoError(t, err)
						require.Zero(t, n, "a fold leaves one row per kind and phase")
						requireCountsExact(ctx, t, s, fmt.Sprintf("folded after %d writes", i))
					}
				}
				got := requireCountsExact(ctx, t, s, "end")
				require.NotEmpty(t, got, "the workload left objects")
			})

			t.Run("a write that changes no count appends nothing", func(t *testing.T) {
				s := countsStore(t, dialect, time.Hour)
				obj, err := s.Create(ctx, &CreateParams{Kind: "alpha", Name: "a", Spec: json.RawMessage(`{}`)})
				require.NoError(t, err)
				_, err = s.UpdateStatus(ctx, &UpdateStatusParams{Kind: "alpha", ID: obj.ID,
					Status: json.RawMessage(`{"phase":"Ready","observed_generation":1}`)})
				require.NoError(t, err)
				require.NoError(t, s.compactObjectCounts(ctx))
				rows := func() int64 {
					var n int64
					require.NoError(t, s.rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM object_counts").Scan(&n))
					return n
				}
				before := rows()
				require.EqualValues(t, 1, before, "alpha/Ready")
				for i := range 5 {
					_, err = s.UpdateStatus(ctx, &UpdateStatusParams{Kind: "alpha", ID: obj.ID,
						Status: json.RawMessage(fmt.Sprintf(`{"phase":"Ready","observed_generation":1,"message":"%d"}`, i))})
					require.NoError(t, err)
				}
				require.Equal(t, before, rows(), "status writes that keep the phase and reconciled state")
				_, err = s.UpdateSpec(ctx, &UpdateSpecParams{Kind: "alpha", ID: obj.ID, Spec: json.RawMessage(`{"n":1}`)})
				require.NoError(t, err)
				require.Equal(t, before+2, rows(), "a new generation makes it unreconciled: one row out, one in")
				requireCountsExact(ctx, t, s, "after the spec change")
			})

			t.Run("concurrent writers while folds run", func(t *testing.T) {
				url := storeURL(t, dialect)
				s := countsStoreAt(t, url, 2*time.Millisecond)
				// A second store on the same database, as a second API replica: it writes and folds too.
				other := countsStoreAt(t, url, 3*time.Millisecond)
				seed := uint64(time.Now().UnixNano())
				t.Logf("seed %d", seed)
				ws := []*countsWorkload{
					{s: s, rnd: rand.New(rand.NewPCG(seed, 1)), ids: map[string]string{}},
					{s: other, rnd: rand.New(rand.NewPCG(seed, 2)), ids: map[string]string{}, prefix: "other-"},
				}
				var g errgroup.Group
				for i := range 4 {
					w := ws[i%2]
					g.Go(func() error {
						for range 150 {
							if err := w.step(ctx); err != nil {
								return err
							}
						}
						return nil
					})
				}
				require.NoError(t, g.Wait())
				requireCountsExact(ctx, t, s, "after concurrent writes and folds")
				require.NoError(t, s.compactObjectCounts(ctx))
				requireCountsExact(ctx, t, other, "folded")
			})
		})
	}
}

// TestObjectCountsMigrationBackfills upgrades a database that holds objects to 0008: the counts start
// from the objects already there.
func TestObjectCountsMigrationBackfills(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := Config{Logger: slog.New(slog.DiscardHandler), URL: storeURL(t, dialect), CountsCompactInterval: time.Hour}
			raw, err := openDialect(cfg)
			require.NoError(t, err)
			legacyMigrate(ctx, t, raw, 7)
			statuses := []string{`{}`, `{"phase":"Ready","observed_generation":1}`, `{"phase":"Ready","observed_generation":0}`,
				`{"phase":"Failed","observed_generation":1}`, `{"phase":""}`, `{"phase":"Ready"}`}
			for i := range 60 {
				at := legacyAppliedAt.Add(time.Duration(i) * time.Minute)
				var deleting any
				if i%7 == 0 {
					deleting = at
				}
				_, err = raw.wdb.ExecContext(ctx, `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status,
					created_at, updated_at, deletion_requested_at) VALUES (?, ?, ?, 1, 1, '{}', ?, ?, ?, ?)`,
					fmt.Sprintf("obj-%02d", i), []string{"alpha", "beta"}[i%2], fmt.Sprintf("o%d", i), statuses[i%len(statuses)], at, at, deleting)
				require.NoError(t, err)
			}
			require.NoError(t, raw.Close())

			s, err := open(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			got := requireCountsExact(ctx, t, s, "after the upgrade")
			require.Len(t, got, 2)
			require.True(t, got["alpha"].OldestUnrec.Equal(legacyAppliedAt), "obj-00 (alpha, deleting) is the oldest: %s", got["alpha"].OldestUnrec)
			n, err := s.countDeltas(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "the backfill writes one row per kind and phase")
		})
	}
}
