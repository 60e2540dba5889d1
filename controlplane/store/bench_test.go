package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// benchStore opens an empty store of the named dialect.
func benchStore(b *testing.B, dialect string, sqliteWriters int) *bunStore {
	b.Helper()
	return benchStoreConfig(b, dialect, Config{sqliteWriteConns: sqliteWriters})
}

// benchStoreConfig opens an empty store of the named dialect with cfg (its URL and logger set here).
func benchStoreConfig(b *testing.B, dialect string, cfg Config) *bunStore {
	b.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	switch dialect {
	case "sqlite":
		cfg.URL = "sqlite://" + filepath.Join(b.TempDir(), "bench.db")
	case "postgres":
		cfg.URL = pgtest.URL(b)
	default:
		b.Fatalf("unknown dialect %q", dialect)
	}
	s, err := open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// runParallel runs op from parallelism×GOMAXPROCS goroutines and reports the write rate and the median
// and 99th percentile latency of one op.
func runParallel(b *testing.B, parallelism int, op func(ctx context.Context, n int64) error) {
	var (
		seq       atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
	)
	ctx := context.Background()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		defer func() {
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
		for pb.Next() {
			start := time.Now()
			if err := op(ctx, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
	})
	b.StopTimer()
	reportRate(b, latencies, "writes/s")
}

// runWriters runs op from exactly writers goroutines until b.N ops are done, and reports the rate (ops/s)
// and latencies as runParallel.
func runWriters(b *testing.B, writers int, op func(ctx context.Context, n int64) error) {
	var (
		seq, left atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	ctx := context.Background()
	left.Store(int64(b.N))
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() {
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			}()
			for left.Add(-1) >= 0 {
				start := time.Now()
				if err := op(ctx, seq.Add(1)); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, latencies, "ops/s")
}

// reportRate reports the rate in unit and the median and 99th percentile latency of one op.
func reportRate(b *testing.B, latencies []time.Duration, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
	if len(latencies) > 0 {
		slices.Sort(latencies)
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
	}
}

// BenchmarkCreate measures Store.Create (object, two labels and an outbox row in one transaction) on
// SQLite and PostgreSQL side by side, from parallelism×GOMAXPROCS goroutines.
func BenchmarkCreate(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, p := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", dialect, p), func(b *testing.B) {
				benchCreate(b, benchStore(b, dialect, 0), p)
			})
		}
	}
}

func benchCreate(b *testing.B, s *bunStore, parallelism int) {
	runParallel(b, parallelism, createOp(s))
}

// createOp creates one workload instance with two labels, named for n.
func createOp(s *bunStore) func(ctx context.Context, n int64) error {
	return func(ctx context.Context, n int64) error {
		_, err := s.Create(ctx, &CreateParams{
			Kind:   "workload_instances",
			Name:   fmt.Sprintf("web-%d", n),
			Labels: map[string]string{"env": "prod", "team": "core"},
			Spec:   json.RawMessage(`{"definition":"web","replicas":3,"placement":{"runtime":"us-east"}}`),
		})
		return err
	}
}

// BenchmarkGroupCommit measures Store.Create as it was (every create a transaction of its own, its inserts
// formatted by bun: "before"), with group commit alone ("group"), and as it is (group commit, and on SQLite
// the hot inserts as prepared statements: "after"), side by side, on SQLite and PostgreSQL, from exactly
// 1, 8 and 64 concurrent writers.
func BenchmarkGroupCommit(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, writers := range []int{1, 8, 64} {
			for _, mode := range []struct {
				name string
				cfg  Config
			}{
				{"before", Config{writeLanes: -1, unpreparedWrites: true}},
				{"group", Config{unpreparedWrites: true}},
				{"after", Config{}},
			} {
				if dialect == "postgres" && mode.name == "group" {
					continue // PostgreSQL has no prepared inserts: "after" is group commit alone
				}
				b.Run(fmt.Sprintf("%s/writers=%d/%s", dialect, writers, mode.name), func(b *testing.B) {
					s := benchStoreConfig(b, dialect, mode.cfg)
					runWriters(b, writers, createOp(s))
				})
			}
		}
	}
}

// BenchmarkRawCommit measures one trivial INSERT per transaction through the same pools: the ceiling
// that Create's rate is to be read against.
func BenchmarkRawCommit(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, p := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", dialect, p), func(b *testing.B) {
				s := benchStore(b, dialect, 0)
				benchRawCommit(b, s, p)
			})
		}
	}
}

// BenchmarkSQLiteWritePool compares the single write connection (the default) with a pool of four
// connections that contend for SQLite's write lock through the busy handler (which sleeps 1, 2, 5, ...
// 100 ms between tries), on Create at parallelism 8 and 32.
func BenchmarkSQLiteWritePool(b *testing.B) {
	for _, writers := range []int{1, 4} {
		for _, p := range []int{8, 32} {
			b.Run(fmt.Sprintf("writers=%d/parallelism=%d", writers, p), func(b *testing.B) {
				s := benchStore(b, "sqlite", writers)
				benchCreate(b, s, p)
			})
		}
	}
}

func benchRawCommit(b *testing.B, s *bunStore, parallelism int) {
	ctx := context.Background()
	if _, err := s.wdb.ExecContext(ctx, "CREATE TABLE bench_commit (v bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	runParallel(b, parallelism, func(ctx context.Context, n int64) error {
		return s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO bench_commit (v) VALUES (?)", n)
			return err
		})
	})
}

// BenchmarkGet measures reading one object with its labels: the single query of Get side by side with the
// read transaction of two queries (object, then labels) that Get ran before, on SQLite and PostgreSQL.
func BenchmarkGet(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		s := benchStore(b, dialect, 0)
		ctx := context.Background()
		const objects = 1000
		ids := make([]string, objects)
		for i := range ids {
			obj, err := s.Create(ctx, &CreateParams{Kind: "workload_instances", Name: fmt.Sprintf("web-%d", i),
				Labels: map[string]string{"env": "prod", "team": "core"}, Spec: json.RawMessage(`{"replicas":3}`)})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = obj.ID
		}
		for _, mode := range []struct {
			name string
			get  func(ctx context.Context, id string) (*Object, error)
		}{
			{"two-queries-in-tx", func(ctx context.Context, id string) (*Object, error) { return getTwoQueries(ctx, s, id) }},
			{"one-query", func(ctx context.Context, id string) (*Object, error) { return s.Get(ctx, "workload_instances", id) }},
		} {
			b.Run(dialect+"/"+mode.name, func(b *testing.B) {
				runWriters(b, 8, func(ctx context.Context, n int64) error {
					obj, err := mode.get(ctx, ids[n%objects])
					if err == nil && len(obj.Labels) != 2 {
						err = fmt.Errorf("labels %v", obj.Labels)
					}
					return err
				})
			})
		}
	}
}

// getTwoQueries is Get as it was before it became one query: a read transaction that selects the row,
// then its labels.
func getTwoQueries(ctx context.Context, s *bunStore, id string) (*Object, error) {
	var obj *Object
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		row := new(objectRow)
		if err := tx.NewSelect().Model(row).Where("id = ?", id).Where("kind = ?", "workload_instances").Scan(ctx); err != nil {
			return err
		}
		var err error
		obj, err = withLabels(ctx, tx, row)
		return err
	})
	return obj, err
}

// BenchmarkPreparedGet measures Store.Get of one of 1,000 objects with the read formatted by bun and parsed
// (and, on PostgreSQL, planned) by the database at every call ("formatted"), and through the statement
// prepared once per read connection ("prepared"), side by side, on SQLite and PostgreSQL, from 1 and 8
// concurrent readers.
func BenchmarkPreparedGet(b *testing.B) {
	benchPrepared(b, "readers", Config{unpreparedReads: true}, func(ctx context.Context, s *bunStore, objs []*Object, n int64) error {
		obj, err := s.Get(ctx, "workload_instances", objs[n%int64(len(objs))].ID)
		if err == nil && obj.Labels["env"] != "prod" {
			err = fmt.Errorf("object %s read without its labels: %v", obj.ID, obj.Labels)
		}
		return err
	})
}

// BenchmarkStatusWrite measures what a reconcile writes back: Store.UpdateStatus of one of 1,000 objects,
// then Store.AppendEvent on it, with the statements formatted by bun and parsed (and, on PostgreSQL,
// planned) by the database at every call ("formatted") and through the statements prepared once per write
// connection ("prepared"), side by side, on SQLite and PostgreSQL, from 1 and 8 concurrent writers.
func BenchmarkStatusWrite(b *testing.B) {
	benchPrepared(b, "writers", Config{unpreparedWrites: true}, func(ctx context.Context, s *bunStore, objs []*Object, n int64) error {
		o := objs[n%int64(len(objs))]
		status := fmt.Sprintf(`{"phase":"Ready","observed_generation":1,"message":"pass %d"}`, n)
		obj, err := s.UpdateStatus(ctx, &UpdateStatusParams{Kind: o.Kind, ID: o.ID, Status: json.RawMessage(status)})
		if err != nil {
			return err
		}
		if obj.Labels["env"] != "prod" {
			return fmt.Errorf("object %s written back without its labels: %v", obj.ID, obj.Labels)
		}
		return s.AppendEvent(ctx, &Event{ObjectID: o.ID, Type: "Normal", Reason: "Reconciled",
			Message: fmt.Sprintf("pass %d", n%3), Generation: 1, Source: "bench"})
	})
}

// benchPrepared runs op on a store of 1,000 objects for each dialect, with 1 and 8 concurrent workers,
// opened with formatted ("formatted") and then without it ("prepared").
func benchPrepared(b *testing.B, workers string, formatted Config, op func(ctx context.Context, s *bunStore, objs []*Object, n int64) error) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, conc := range []int{1, 8} {
			for _, mode := range []struct {
				name string
				cfg  Config
			}{{"formatted", formatted}, {"prepared", Config{}}} {
				b.Run(fmt.Sprintf("%s/%s=%d/%s", dialect, workers, conc, mode.name), func(b *testing.B) {
					s := benchStoreConfig(b, dialect, mode.cfg)
					objs := thousandObjects(b, s)
					runWriters(b, conc, func(ctx context.Context, n int64) error { return op(ctx, s, objs, n) })
				})
			}
		}
	}
}

// thousandObjects creates 1,000 workload instances with createOp and returns them.
func thousandObjects(b *testing.B, s *bunStore) []*Object {
	b.Helper()
	ctx := context.Background()
	create := createOp(s)
	for i := range 1000 {
		require.NoError(b, create(ctx, int64(i)))
	}
	page, err := s.List(ctx, &ListParams{Kind: "workload_instances", Limit: 1000})
	require.NoError(b, err)
	return page.Objects
}
