package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// latencies collects durations and reports p50/p99 on a benchmark.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) { l.mu.Lock(); l.d = append(l.d, d); l.mu.Unlock() }

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// createAndWait creates b.N objects from 8 goroutines and measures create-to-reconciled for each.
func createAndWait(b *testing.B, bd *bundle, prefix string, wait bool) {
	var lat latencies
	var seq atomic.Int64
	b.SetParallelism(8 / max(1, runtimeGOMAXPROCS()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := time.Now()
			obj := bd.createDef(b, fmt.Sprintf("%s-%d", prefix, seq.Add(1)))
			if wait {
				_, err := bd.client.WorkloadDefinitions().WaitReconciled(context.Background(), obj.ID)
				require.NoError(b, err)
			}
			lat.add(time.Since(start))
		}
	})
	b.StopTimer()
	lat.report(b)
}

// BenchmarkCreateToReconciled measures create-to-reconciled with a no-op reconciler at 1 and 4 workers,
// side by side with the API create alone (the floor: what the runtime adds is the difference).
func BenchmarkCreateToReconciled(b *testing.B) {
	noop := recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) { return reconcile.Result{}, nil })
	b.Run("api-create-only", func(b *testing.B) {
		bd := setup(b, setupOpts{})
		createAndWait(b, bd, "c", false)
	})
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			bd := setup(b, setupOpts{})
			bd.run(b, noop, reconcile.Config{Workers: workers, ResyncInterval: time.Hour})
			createAndWait(b, bd, "r", true)
		})
	}
}

// BenchmarkRequeueStarvation measures create-to-reconciled of fresh objects while 200 other objects
// requeue every 10ms forever, side by side with the same measurement on a quiet controller. A runtime
// whose requeues starve the consumer shows a large ratio between the two.
func BenchmarkRequeueStarvation(b *testing.B) {
	for _, busy := range []bool{false, true} {
		name := "quiet"
		if busy {
			name = "200-objects-requeueing-every-10ms"
		}
		b.Run(name, func(b *testing.B) {
			bd := setup(b, setupOpts{})
			var requeues atomic.Int64
			bd.run(b, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
				if obj.Labels["busy"] == "true" {
					requeues.Add(1)
					return reconcile.Result{RequeueAfter: 10 * time.Millisecond}, nil
				}
				return reconcile.Result{}, nil
			}), reconcile.Config{Workers: 4, ResyncInterval: time.Hour})
			if busy {
				for i := range 200 {
					_, err := bd.client.WorkloadDefinitions().Create(context.Background(), &defObj{
						Meta: defMeta(fmt.Sprintf("busy-%d", i), map[string]string{"busy": "true"}),
						Spec: defSpecValid(),
					})
					require.NoError(b, err)
				}
				require.Eventually(b, func() bool { return requeues.Load() > 1000 }, 30*time.Second, 10*time.Millisecond)
			}
			before := requeues.Load()
			start := time.Now()
			createAndWait(b, bd, "fresh", true)
			if busy {
				b.ReportMetric(float64(requeues.Load()-before)/time.Since(start).Seconds(), "requeues/s")
			}
		})
	}
}
