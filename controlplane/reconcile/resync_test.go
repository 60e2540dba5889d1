package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// countingTransport counts the requests sent through it, by method and path.
type countingTransport struct {
	mu   sync.Mutex
	seen []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.seen = append(c.seen, r.Method+" "+r.URL.Path)
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) since(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen[mark:]...)
}

func (c *countingTransport) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// countingClient is an API client whose requests counter records.
func countingClient(t *testing.T, b *bundle) (*countingTransport, *client.Client) {
	t.Helper()
	counter := &countingTransport{}
	cl, err := client.New(b.url, client.WithToken(b.token), client.WithHTTPClient(&http.Client{Transport: counter}))
	require.NoError(t, err)
	return counter, cl
}

// TestResyncPassIsPaced checks the safety net's token bucket: a full pass over 60 objects at 20 objects
// per second (a bucket of 20) cannot enqueue them in less than the 2s that the 40 beyond the bucket take.
func TestResyncPassIsPaced(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for i := range 60 {
		b.createDef(t, fmt.Sprintf("paced-%02d", i))
	}
	c := reconcile.New(b.broker, b.client.WorkloadDefinitions(), recFunc(nil), reconcile.Config{Logger: quietLogger(), ResyncRate: 20})
	start := time.Now()
	n, err := c.Resync(context.Background(), true)
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, 60, n)
	t.Logf("60 objects enqueued in %s at 20/s", elapsed.Round(10*time.Millisecond))
	require.GreaterOrEqual(t, elapsed, 1900*time.Millisecond, "60 objects at 20/s with a bucket of 20 take at least 2s")

	t.Run("the default rate does not hold a small pass back", func(t *testing.T) {
		c := reconcile.New(b.broker, b.client.WorkloadDefinitions(), recFunc(nil), reconcile.Config{Logger: quietLogger()})
		start := time.Now()
		n, err := c.Resync(context.Background(), true)
		require.NoError(t, err)
		require.Equal(t, 60, n)
		// A bucket of 1,000 holds the 60 at once: no wait beyond the listing and the publish acks.
		require.Less(t, time.Since(start), 1900*time.Millisecond)
	})
}

// TestNoResyncPassAtRest checks that an idle controller makes no calls: once its objects are reconciled
// and no notification comes, no resync pass (every 100ms here) lists the kind, and the drift pass waits
// for its 10h default. Work does not make passes run either; a notification that may have been lost does.
func TestNoResyncPassAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	counter, cl := countingClient(t, b)
	var objs []string
	for i := range 3 {
		objs = append(objs, b.createDef(t, fmt.Sprintf("idle-%d", i)).ID)
	}
	seen := &calls{n: map[string]int{}}
	activity := &reconcile.Activity{}
	b.runWith(t, cl, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		seen.inc(obj.Name)
		return reconcile.Result{}, nil
	}), reconcile.Config{ResyncInterval: 100 * time.Millisecond, Activity: activity})
	for _, id := range objs {
		_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), id)
		require.NoError(t, err)
	}
	// Each object had two notifications in flight (its create's, and the startup pass's), and the second
	// may be reconciled just after the first wrote the status that WaitReconciled saw. At rest means once
	// they are consumed: no request for half a second (five resync intervals).
	await.True(t, 10*time.Second, func() bool {
		n := counter.mark()
		time.Sleep(500 * time.Millisecond)
		return counter.mark() == n
	}, "the notifications of the creates and of the startup pass are consumed")
	mark, reconciled := counter.mark(), seen.get("idle-0")
	// no signal: this is the idle window under test; nothing happens in it by design
	time.Sleep(2 * time.Second)
	require.Empty(t, counter.since(mark), "no request at rest over 20 resync intervals")
	require.Equal(t, reconciled, seen.get("idle-0"), "a Ready object is not reconciled again by the safety net")

	t.Run("a burst of work ends without a pass; a lost notification makes one", func(t *testing.T) {
		mark := counter.mark()
		require.NoError(t, b.client.WorkloadDefinitions().RequestReconcile(context.Background(), objs[0]))
		await.True(t, 10*time.Second, func() bool { return seen.get("idle-0") == reconciled+1 }, "the notified object is reconciled")
		// no signal: the window in which a pass after the work would list the kind (10 intervals)
		time.Sleep(time.Second)
		require.Zero(t, definitionLists(counter.since(mark)), "no pass after the work: each object had its notification")

		activity.Lost()
		await.True(t, 10*time.Second, func() bool { return definitionLists(counter.since(mark)) > 0 }, "a pass lists the kind after a loss")
		// no signal: the window in which further passes would list the kind again (10 intervals)
		time.Sleep(time.Second)
		n := definitionLists(counter.since(mark))
		time.Sleep(time.Second) // no signal: likewise
		require.Equal(t, n, definitionLists(counter.since(mark)), "one loss makes passes only until one covers it")
	})
}

// TestBusyPassLeavesFreshWritesToTheirNotification: a pass while busy enqueues only what is pending and
// was last written at least a ResyncInterval ago. A fresh write has its notification in flight (the
// outbox, or a reconcile's requeue); enqueueing it again made a second wave of reconciles behind the
// first. A lost notification still ages into the next pass. The pass lists from the pending index, so a
// reconciled object is not even read.
func TestBusyPassLeavesFreshWritesToTheirNotification(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	const interval = 1500 * time.Millisecond
	c := reconcile.New(b.broker, b.client.WorkloadDefinitions(), recFunc(nil), reconcile.Config{Logger: quietLogger(), ResyncInterval: interval})
	var pending []string
	for i := range 3 {
		pending = append(pending, b.createDef(t, fmt.Sprintf("fresh-%d", i)).ID)
	}
	done := b.createDef(t, "done")
	done.Status.Phase, done.Status.ObservedGeneration = api.PhaseReady, done.Generation
	_, err := b.client.WorkloadDefinitions().UpdateStatus(ctx, done.ID, done.ResourceVersion, done.Status)
	require.NoError(t, err)
	written := time.Now()

	n, err := c.Resync(ctx, false)
	require.NoError(t, err)
	require.Zero(t, n, "every pending object was written within the interval: its notification is in flight")

	// no signal: the objects must age past the interval, which only time does
	time.Sleep(time.Until(written.Add(interval + 100*time.Millisecond)))
	n, err = c.Resync(ctx, false)
	require.NoError(t, err)
	require.Equal(t, len(pending), n, "aged pending objects are enqueued, the reconciled one is not")

	n, err = c.Resync(ctx, true)
	require.NoError(t, err)
	require.Equal(t, len(pending)+1, n, "a drift pass enqueues every object, fresh or not")
}

// TestAWaitForANotificationIsLookedAfterByThePasses: a reconcile may wait for a dependency with no timer
// (OnNotification), and a dependency that the store does not know the object references never notifies
// it. The passes look at such an object every interval until it is reconciled, and then stop.
func TestAWaitForANotificationIsLookedAfterByThePasses(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	counter, cl := countingClient(t, b)
	var ready atomic.Bool
	seen := &calls{n: map[string]int{}}
	b.runWith(t, cl, recFunc(func(ctx context.Context, o *defObj) (reconcile.Result, error) {
		seen.inc(o.Name)
		if !ready.Load() {
			return reconcile.Result{}, reconcile.Wait("support_service \"metrics\"", "Installing", "SupportServiceNotReady", reconcile.OnNotification)
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{ResyncInterval: 200 * time.Millisecond})
	// Created after the controller's start pass, so that its create is its one notification.
	// no signal: the start pass of an empty store lists nothing and publishes nothing to wait for
	time.Sleep(300 * time.Millisecond)
	obj := b.createDef(t, "waits")
	await.Explained(t, 10*time.Second, func() (bool, string) {
		got, err := b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
		require.NoError(t, err)
		return strings.Contains(got.Status.Message, `support_service "metrics"`), "the first reconcile has not written its wait yet: " + got.Status.Message
	})

	ready.Store(true) // the dependency is ready, and nothing tells the object
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err, "a pass finds the waiting object")

	await.Explained(t, 10*time.Second, func() (bool, string) {
		mark := counter.mark()
		// no signal: a quiet spell is what is awaited, over five pass intervals
		time.Sleep(time.Second)
		got := definitionLists(counter.since(mark))
		return got == 0, fmt.Sprintf("%d listings in the last second", got)
	})
}

// definitionLists counts the listings of workload definitions among requests (countingTransport's).
func definitionLists(reqs []string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r, "GET ") && strings.HasSuffix(r, "/v1/workload_definitions") {
			n++
		}
	}
	return n
}
