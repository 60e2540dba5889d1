package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// benchStore opens an empty store of the named dialect.
func benchStore(b *testing.B, dialect string, sqliteWriters int) *bunStore {
	b.Helper()
	cfg := Config{Logger: slog.New(slog.DiscardHandler), sqliteWriteConns: sqliteWriters}
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

// runParallel runs op from parallelism×GOMAXPROCS goroutines and reports the write rate.
func runParallel(b *testing.B, parallelism int, op func(ctx context.Context, n int64) error) {
	var seq atomic.Int64
	ctx := context.Background()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkCreate measures Store.Create (object, two labels and an outbox row in one transaction) on
// SQLite and PostgreSQL side by side, from parallelism×GOMAXPROCS goroutines.
func BenchmarkCreate(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, p := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", dialect, p), func(b *testing.B) {
				s := benchStore(b, dialect, 0)
				runParallel(b, p, func(ctx context.Context, n int64) error {
					_, err := s.Create(ctx, &CreateParams{
						Kind:   "workload_instances",
						Name:   fmt.Sprintf("web-%d", n),
						Labels: map[string]string{"env": "prod", "team": "core"},
						Spec:   json.RawMessage(`{"definition":"web","replicas":3,"placement":{"runtime":"us-east"}}`),
					})
					return err
				})
			})
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
// connections that contend on SQLite's lock through busy_timeout.
func BenchmarkSQLiteWritePool(b *testing.B) {
	for _, writers := range []int{1, 4} {
		for _, p := range []int{1, 8} {
			b.Run(fmt.Sprintf("writers=%d/parallelism=%d", writers, p), func(b *testing.B) {
				s := benchStore(b, "sqlite", writers)
				benchRawCommit(b, s, p)
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
