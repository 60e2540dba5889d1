package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
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
