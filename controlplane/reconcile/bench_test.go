package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
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
				await.True(b, 30*time.Second, func() bool { return requeues.Load() > 1000 }, "more than 1000 requeues of the busy objects")
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

// BenchmarkFullResync measures a restarted controller's full resync of 2,000 Ready objects
// ($QLEET_RESYNC_OBJECTS to change) with a no-op reconciler, from Start until every object has been
// reconciled, side by side: each reconcile reading its object (get-each, as before) and reconciles handed
// the copy their pass listed (listed). It reports the reads of single objects per pass and the copies used.
//
//	go test -run '^$' -bench BenchmarkFullResync -benchtime 3x ./controlplane/reconcile/
func BenchmarkFullResync(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("QLEET_RESYNC_OBJECTS")); err == nil && v > 0 {
		n = v
	}
	bd := setup(b, setupOpts{})
	ids := bd.readyDefs(b, n)
	cons, err := bd.broker.Consumer(context.Background(), api.KindWorkloadDefinition)
	require.NoError(b, err)
	interval := time.Hour
	for _, mode := range []struct {
		name      string
		listedMax int
	}{{"get-each", -1}, {"listed", 0}} {
		b.Run(fmt.Sprintf("%s/objects=%d", mode.name, n), func(b *testing.B) {
			var gets, hits int
			var took time.Duration
			for range b.N {
				cl, counter := bd.countingClient(b)
				var mu sync.Mutex
				seen := map[string]bool{}
				all := make(chan struct{})
				// Another interval per pass, so that its notification ids are not duplicates of the last.
				interval -= time.Minute
				start := time.Now()
				ctrl, stop := bd.runWith(b, cl, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
					mu.Lock()
					if !seen[obj.ID] {
						seen[obj.ID] = true
						if len(seen) == len(ids) {
							close(all)
						}
					}
					mu.Unlock()
					return reconcile.Result{}, nil
				}), reconcile.Config{Workers: 16, ResyncInterval: interval, ListedMax: mode.listedMax})
				select {
				case <-all:
				case <-time.After(5 * time.Minute):
					b.Fatalf("resync did not finish: %d of %d", len(seen), len(ids))
				}
				took += time.Since(start)
				stop()
				gets += counter.total()
				hits += int(ctrl.ListedStats().Hits)
				await.True(b, 30*time.Second, func() bool {
					info, err := cons.Info(context.Background())
					return err == nil && info.NumPending == 0 && info.NumAckPending == 0
				}, "the consumer drained")
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/pass")
			b.ReportMetric(float64(gets)/float64(b.N), "GETs/pass")
			b.ReportMetric(float64(hits)/float64(b.N), "listed/pass")
		})
	}
}
