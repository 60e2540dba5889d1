package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// getCounter counts the API's reads of single workload definitions, by id.
type getCounter struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (g *getCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/"+api.Plural(api.KindWorkloadDefinition)+"/"); ok && r.Method == http.MethodGet && !strings.Contains(id, "/") {
		g.mu.Lock()
		g.n[id]++
		g.mu.Unlock()
	}
	return g.base.RoundTrip(r)
}

func (g *getCounter) of(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[id]
}

func (g *getCounter) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.n {
		n += v
	}
	return n
}

// countingClient is an admin client of b whose reads of single workload definitions are counted.
func (b *bundle) countingClient(t testing.TB) (*client.Client, *getCounter) {
	t.Helper()
	g := &getCounter{base: http.DefaultTransport, n: map[string]int{}}
	cl, err := client.New(b.url, client.WithToken(b.token), client.WithHTTPClient(&http.Client{Transport: g}))
	require.NoError(t, err)
	return cl, g
}

// readyDefs creates n workload definitions, reconciles them all with a no-op controller, stops it, and
// returns their ids: the state a restarted controller's full resync starts from.
func (b *bundle) readyDefs(t testing.TB, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = b.createDef(t, fmt.Sprintf("def-%d", i)).ID
	}
	stop := b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		reconcile.Config{Workers: 16, ResyncInterval: time.Hour})
	limit := 60*time.Second + time.Duration(n)*20*time.Millisecond // await backs off to 250ms between listings of all n
	await.True(t, limit, func() bool {
		for obj, err := range b.client.WorkloadDefinitions().All(context.Background(), client.ListOptions{Limit: 1000}) {
			if err != nil || !api.Reconciled(obj.Generation, client.CommonStatus(obj)) {
				return false
			}
		}
		return true
	}, "every definition reconciled")
	// ... and until its queue is empty, so that no notification of this controller is left for the next.
	cons, err := b.broker.Consumer(context.Background(), api.KindWorkloadDefinition)
	require.NoError(t, err)
	await.True(t, 30*time.Second, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, "the consumer drained")
	stop()
	return ids
}

// seenSet records the reconciles of a controller: per object id, the image of each.
type seenSet struct {
	mu     sync.Mutex
	images map[string][]string
}

func (s *seenSet) add(obj *defObj) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.images == nil {
		s.images = map[string][]string{}
	}
	s.images[obj.ID] = append(s.images[obj.ID], obj.Spec.Containers[0].Image)
}

func (s *seenSet) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.images[id]...)
}

func (s *seenSet) all(ids []string) bool {
	for _, id := range ids {
		if len(s.of(id)) == 0 {
			return false
		}
	}
	return true
}

// A restarted controller's full resync reconciles every object with the copy its pass listed, without a
// read per object; with ListedMax negative it reads each one, as before.
func TestResyncReconcilesListedObjects(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ids := b.readyDefs(t, 200)

	// Each controller below resyncs with another interval, so that its notifications' ids (per interval
	// bucket) are not duplicates of the previous one's.
	for _, tc := range []struct {
		name      string
		listedMax int
		interval  time.Duration
		wantGets  int
	}{
		{name: "listed", interval: 59 * time.Minute, wantGets: 0},
		{name: "get-each", listedMax: -1, interval: 58 * time.Minute, wantGets: len(ids)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, gets := b.countingClient(t)
			var seen seenSet
			ctrl, stop := b.runWith(t, cl, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
				seen.add(obj)
				return reconcile.Result{}, nil
			}), reconcile.Config{Workers: 4, ResyncInterval: tc.interval, ListedMax: tc.listedMax})
			await.True(t, 60*time.Second, func() bool { return seen.all(ids) }, "every definition reconciled")
			stop()
			require.Equal(t, tc.wantGets, gets.total(), "reads of single objects")
			st := ctrl.ListedStats()
			require.Equal(t, int64(len(ids)-tc.wantGets), st.Hits, "%+v", st)
			require.Zero(t, st.Held, "copies left after every object was reconciled")
		})
	}

	// Reconciles of listed copies that read one shared dependency (as instances read their definition
	// and runtime) share reads begun after the listing: a few GETs for the whole page, not one per object.
	t.Run("listed-shared-dependency", func(t *testing.T) {
		cl, gets := b.countingClient(t)
		dep := ids[len(ids)-1]
		var seen seenSet
		ctrl, stop := b.runWith(t, cl, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
			if _, err := reconcile.LookupsFrom(ctx, cl).Definitions.Get(ctx, dep); err != nil {
				return reconcile.Result{}, err
			}
			seen.add(obj)
			return reconcile.Result{}, nil
		}), reconcile.Config{Workers: 4, ResyncInterval: 56 * time.Minute})
		await.True(t, 60*time.Second, func() bool { return seen.all(ids) }, "every definition reconciled")
		stop()
		require.Equal(t, int64(len(ids)), ctrl.ListedStats().Hits, "every object from its listed copy")
		require.Positive(t, gets.of(dep), "the dependency is read after the listing")
		require.LessOrEqual(t, gets.of(dep), 4, "one read of the dependency serves the page (it was one per reconcile)")
		require.Equal(t, gets.of(dep), gets.total(), "no other single reads")
	})

	// Two replicas list at once; their notifications de-duplicate, and each serves the other's with its
	// own copy of the same version.
	t.Run("two-replicas", func(t *testing.T) {
		var seen seenSet
		rec := recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
			seen.add(obj)
			return reconcile.Result{}, nil
		})
		cfg := reconcile.Config{Workers: 4, ResyncInterval: 57 * time.Minute}
		clA, getsA := b.countingClient(t)
		clB, getsB := b.countingClient(t)
		a, stopA := b.runWith(t, clA, rec, cfg)
		c, stopB := b.runWith(t, clB, rec, cfg)
		await.True(t, 60*time.Second, func() bool { return seen.all(ids) }, "every definition reconciled")
		stopA()
		stopB()
		// A copy is dropped, and the object read, when the other replica's lock events for it are not seen
		// yet (a full run saw 4 of 200): most objects, not all, come from the listing.
		gets := getsA.total() + getsB.total()
		require.LessOrEqual(t, gets, len(ids)/10, "reads of single objects")
		require.GreaterOrEqual(t, a.ListedStats().Hits+c.ListedStats().Hits, int64(len(ids)-gets), "every other object came from a listed copy")
	})
}

// A write that lands between the listing and the reconcile, and a reconcile by someone else (here: a
// lock taken and released, as another replica's reconcile does) in between, make the reconcile read the
// object: it never reconciles the listed, stale spec.
func TestListedCopyNotUsedAfterWriteOrOtherReconcile(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ids := b.readyDefs(t, 6)
	cl, gets := b.countingClient(t)

	// One worker; its first reconcile waits at the gate, so that the others wait in the queue with
	// their listed copies while the test writes.
	gate, first := make(chan struct{}), make(chan string, 1)
	var once sync.Once
	var seen seenSet
	ctrl, _ := b.runWith(t, cl, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		seen.add(obj)
		blocked := false
		once.Do(func() { blocked = true })
		if blocked {
			first <- obj.ID
			<-gate
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{Workers: 1, ResyncInterval: 59 * time.Minute})

	var held string
	select {
	case held = <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile started")
	}
	var others []string
	for _, id := range ids {
		if id != held {
			others = append(others, id)
		}
	}
	updated, locked := others[:3], others[3:]
	ctx := waitCtx(t, 30*time.Second)
	for _, id := range updated {
		obj, err := b.client.WorkloadDefinitions().Get(ctx, id)
		require.NoError(t, err)
		obj.Spec.Containers[0].Image = "nginx:1.28"
		_, err = b.client.WorkloadDefinitions().Update(ctx, obj)
		require.NoError(t, err)
	}
	locker, err := b.broker.Locker(ctx, broker.LockConfig{TTL: 5 * time.Second, Owner: "another replica"})
	require.NoError(t, err)
	for _, id := range locked {
		l, err := locker.Acquire(ctx, broker.LockKey(api.KindWorkloadDefinition, id))
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	// The writes' notifications reached this replica (each dropped a copy) before the queue moves on.
	await.True(t, 10*time.Second, func() bool { return ctrl.ListedStats().Invalidated >= int64(len(updated)) }, "the updates to invalidate the listed copies")
	close(gate)

	await.True(t, 30*time.Second, func() bool {
		if !seen.all(ids) {
			return false
		}
		for _, id := range updated {
			if imgs := seen.of(id); imgs[len(imgs)-1] != "nginx:1.28" {
				return false
			}
		}
		return true
	}, "every definition reconciled, the updated ones at nginx:1.28")
	for _, id := range updated {
		require.NotContains(t, seen.of(id), "nginx:1.27", "object %s reconciled with its listed spec after a write", id)
		require.Positive(t, gets.of(id), "object %s was not read", id)
	}
	for _, id := range locked {
		require.Positive(t, gets.of(id), "object %s, locked by another holder after the listing, was reconciled with its listed copy", id)
	}
	require.Zero(t, gets.of(held), "the first object had nothing newer than its listing, so it needed no read")
	require.Positive(t, ctrl.ListedStats().Hits)
}
