package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
)

// BenchmarkAPICreate measures create throughput through the whole HTTP stack (client, auth, decoding,
// validation, store transaction with its outbox row) on SQLite and on PostgreSQL, with 1 and 8 concurrent
// clients, side by side.
func BenchmarkAPICreate(b *testing.B) {
	backends := []struct {
		name string
		open func(testing.TB) store.Store
	}{{"sqlite", openSQLite}, {"postgres", openPostgres}}
	for _, be := range backends {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", be.name, conc), func(b *testing.B) {
				e := setup(b, setupOpts{st: be.open(b)})
				rts := e.dev.KubernetesRuntimes()
				ctx := context.Background()
				var next, seq atomic.Int64
				next.Store(int64(b.N))
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(-1) >= 0 {
							rt := localRuntime(fmt.Sprintf("bench-%d", seq.Add(1)))
							if _, err := rts.Create(ctx, rt); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
			})
		}
	}
}

// BenchmarkTracingOverhead measures API creates on SQLite (8 concurrent clients) side by side with
// tracing off (the no-op provider: what `qleet server --trace-buffer 0` runs) and on (every hop recorded
// into the recent-span buffer, the default). Run it alone (-run '^$'): it installs the process's tracer
// provider.
func BenchmarkTracingOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracing=%v", on), func(b *testing.B) {
			if on {
				tr, err := tracing.Setup(context.Background(), tracing.Config{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			}
			e := setup(b, setupOpts{st: openSQLite(b)})
			rts := e.dev.KubernetesRuntimes()
			ctx := context.Background()
			var next, seq atomic.Int64
			next.Store(int64(b.N))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(-1) >= 0 {
						if _, err := rts.Create(ctx, localRuntime(fmt.Sprintf("bench-%d", seq.Add(1)))); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}
