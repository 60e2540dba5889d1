package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

type defSpec = api.WorkloadDefinitionSpec
type defStatus = api.WorkloadDefinitionStatus

// recFunc builds a reconciler from a function.
func recFunc(f func(ctx context.Context, obj *defObj) (reconcile.Result, error)) reconcile.ReconcilerFunc[defSpec, defStatus] {
	return f
}

// calls counts reconciles per object name.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) inc(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return c.n[name]
}

func (c *calls) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func TestReconcileOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var seen calls
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		n := seen.inc(obj.Name)
		switch obj.Name {
		case "requeue":
			if n < 3 {
				obj.Status.Message = fmt.Sprintf("step %d of 3", n)
				return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
			}
		case "flaky":
			if n < 3 {
				return reconcile.Result{}, errors.New("transient: cluster busy")
			}
		case "panics":
			if n == 1 {
				panic("boom")
			}
		case "terminal":
			if obj.Labels["fixed"] != "true" {
				return reconcile.Result{}, reconcile.Terminal(errors.New("image registry rejected the image"))
			}
		case "recheck":
			obj.Status.Instances = 7
			return reconcile.Result{Recheck: 50 * time.Millisecond}, nil
		case "waiting":
			if n < 3 {
				return reconcile.Result{}, reconcile.Wait(`kubernetes_runtime "us-east"`, "Provisioning", "RuntimeNotReady", 100*time.Millisecond)
			}
		}
		obj.Status.Instances = 7
		return reconcile.Result{}, nil
	}), reconcile.Config{BackoffBase: 50 * time.Millisecond, ResyncInterval: time.Hour})

	for _, name := range []string{"plain", "requeue", "flaky", "panics", "waiting"} {
		t.Run(name+" becomes Ready", func(t *testing.T) {
			obj := b.createDef(t, name)
			got, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), obj.ID)
			require.NoError(t, err)
			require.Equal(t, api.PhaseReady, got.Status.Phase)
			require.Equal(t, got.Generation, got.Status.ObservedGeneration)
			require.Equal(t, 7, got.Status.Instances, "kind-specific status written by the reconciler")
			require.Empty(t, got.Status.Message)
			evs, err := b.client.WorkloadDefinitions().Events(context.Background(), obj.ID)
			require.NoError(t, err)
			require.NotEmpty(t, evs)
			require.Equal(t, "Reconciled", evs[len(evs)-1].Reason)
		})
	}

	t.Run("recheck stays Ready and is reconciled again", func(t *testing.T) {
		obj := b.createDef(t, "recheck")
		got, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), obj.ID)
		require.NoError(t, err)
		require.Equal(t, api.PhaseReady, got.Status.Phase)
		await.True(t, 10*time.Second, func() bool { return seen.get("recheck") >= 4 }, "rechecked without any notification")
		got, err = b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
		require.NoError(t, err)
		require.Equal(t, api.PhaseReady, got.Status.Phase)
	})

	t.Run("retryable errors are recorded as warning events", func(t *testing.T) {
		obj, err := b.client.WorkloadDefinitions().GetByName(context.Background(), "flaky")
		require.NoError(t, err)
		evs, err := b.client.WorkloadDefinitions().Events(context.Background(), obj.ID)
		require.NoError(t, err)
		var warnings int
		for _, e := range evs {
			if e.Type == api.EventWarning && e.Reason == "Error" {
				warnings++
				require.Contains(t, e.Message, "transient: cluster busy")
			}
		}
		require.GreaterOrEqual(t, warnings, 1)
	})

	t.Run("terminal error fails at once and is not retried until the spec changes", func(t *testing.T) {
		obj := b.createDef(t, "terminal")
		got, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), obj.ID)
		require.True(t, client.IsFailed(err), "want FailedError, got %v", err)
		require.Contains(t, err.Error(), "image registry rejected the image")
		require.Equal(t, api.PhaseFailed, got.Status.Phase)
		before := seen.get("terminal")

		// A resync pass must skip it: Failed at the current generation.
		c := reconcile.New(b.broker, b.client.WorkloadDefinitions(), recFunc(nil), reconcile.Config{Logger: quietLogger()})
		n, err := c.Resync(context.Background(), true)
		require.NoError(t, err)
		require.Positive(t, n, "other objects are enqueued")
		// Give the controller time to consume what resync enqueued; the failed object must not be among it.
		await.True(t, 10*time.Second, func() bool { return seen.get("plain") >= 2 }, "the resync to reconcile the plain object again")
		require.Equal(t, before, seen.get("terminal"))

		got.Labels = map[string]string{"fixed": "true"}
		got.Spec.Replicas = ptr(int32(2))
		upd, err := b.client.WorkloadDefinitions().Update(context.Background(), got)
		require.NoError(t, err)
		ready, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), upd.ID)
		require.NoError(t, err)
		require.Equal(t, upd.Generation, ready.Status.ObservedGeneration)
	})

	t.Run("waiting names the dependency and for how long", func(t *testing.T) {
		obj, err := b.client.WorkloadDefinitions().GetByName(context.Background(), "waiting")
		require.NoError(t, err)
		evs, err := b.client.WorkloadDefinitions().Events(context.Background(), obj.ID)
		require.NoError(t, err)
		var found bool
		for _, e := range evs {
			if e.Reason == "RuntimeNotReady" {
				found = true
				require.Equal(t, `waiting for kubernetes_runtime "us-east" (Provisioning)`, e.Message, "the status says how long; the event is the same each pass")
			}
		}
		require.True(t, found, "a waiting event was recorded: %+v", evs)
	})
}

func TestWaitingConditionIsVisibleInStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		return reconcile.Result{}, reconcile.Wait(`kubernetes_runtime "us-east"`, "Provisioning", "RuntimeNotReady", time.Hour)
	}), reconcile.Config{ResyncInterval: time.Hour})
	obj := b.createDef(t, "waits")
	var got *defObj
	await.True(t, 10*time.Second, func() bool {
		var err error
		got, err = b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
		require.NoError(t, err)
		return got.Status.Phase == api.PhaseReconciling
	}, "the wait reported as Reconciling")
	require.Contains(t, got.Status.Message, `waiting for kubernetes_runtime "us-east" (Provisioning`)
	require.Len(t, got.Status.Conditions, 1)
	require.Equal(t, `kubernetes_runtime "us-east"`, got.Status.Conditions[0].WaitingOn)
	require.Equal(t, api.ConditionFalse, got.Status.Conditions[0].Status)
}

func TestRepeatedWaitIsOneCountedEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		return reconcile.Result{}, reconcile.Wait(`kubernetes_runtime "us-east"`, "Provisioning", "RuntimeNotReady", 200*time.Millisecond)
	}), reconcile.Config{ResyncInterval: time.Hour})
	obj := b.createDef(t, "waits")
	// The status changes every second (it says how long the wait has lasted), and each change used to
	// append an event: one a second, or one every 5 s at the default wait pace.
	var evs []api.Event
	await.True(t, 20*time.Second, func() bool {
		var err error
		evs, err = b.client.WorkloadDefinitions().Events(context.Background(), obj.ID)
		require.NoError(t, err)
		return len(evs) > 0 && evs[len(evs)-1].Count >= 4
	}, "the wait event counted at least 4 times")
	waits := 0
	for _, e := range evs {
		if e.Reason == "RuntimeNotReady" {
			waits++
		}
	}
	require.Equal(t, 1, waits, "one record for one wait: %+v", evs)
	last := evs[len(evs)-1]
	require.Equal(t, `waiting for kubernetes_runtime "us-east" (Provisioning)`, last.Message)
	require.NotNil(t, last.FirstTimestamp)
	require.NotNil(t, last.LastTimestamp)
	require.True(t, last.LastTimestamp.After(*last.FirstTimestamp), "first %s, last %s", last.FirstTimestamp, last.LastTimestamp)
	require.True(t, last.FirstTimestamp.Equal(last.CreatedAt))
	got, err := b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
	require.NoError(t, err)
	require.Regexp(t, `^waiting for kubernetes_runtime "us-east" \(Provisioning, \d+s\)$`, got.Status.Message, "the status says for how long")
}

// finalizing is a reconciler that records finalize calls.
type finalizing struct {
	finalized atomic.Int32
}

func (f *finalizing) Reconcile(ctx context.Context, obj *defObj) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

func (f *finalizing) Finalize(ctx context.Context, obj *defObj) (reconcile.Result, error) {
	if f.finalized.Add(1) == 1 {
		return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil // cleanup takes two passes
	}
	return reconcile.Result{}, nil
}

func TestDeleteRunsFinalizerThenRemovesTheObject(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	f := &finalizing{}
	b.run(t, f, reconcile.Config{ResyncInterval: time.Hour})
	obj := b.createDef(t, "doomed")
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err)
	require.NoError(t, b.client.WorkloadDefinitions().Delete(waitCtx(t, 20*time.Second), obj.ID, client.DeleteOptions{Wait: true}))
	require.Equal(t, int32(2), f.finalized.Load())
	_, err = b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
	require.True(t, api.IsNotFound(err))
}

func TestTwoReplicasNeverReconcileOneObjectAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		overlap  atomic.Int32
		total    atomic.Int32
	)
	rec := recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		mu.Lock()
		inFlight[obj.ID]++
		if inFlight[obj.ID] > 1 {
			overlap.Add(1)
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // no signal: holding the object is the behaviour under test, long enough for a competitor to try
		mu.Lock()
		inFlight[obj.ID]--
		mu.Unlock()
		total.Add(1)
		return reconcile.Result{}, nil
	})
	cfg := reconcile.Config{Workers: 4, ResyncInterval: time.Hour}
	b.run(t, rec, cfg)
	b.run(t, rec, cfg)
	objs := make([]*defObj, 3)
	for i := range objs {
		objs[i] = b.createDef(t, fmt.Sprintf("hot-%d", i))
	}
	// Hammer the few objects with spec changes and drift passes, so both replicas get messages for each.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := objs[i%len(objs)]
			_, err := b.client.WorkloadDefinitions().Patch(context.Background(), o.ID, map[string]any{"labels": map[string]string{"n": fmt.Sprint(i)}})
			require.NoError(t, err)
			require.NoError(t, b.broker.Publish(context.Background(), api.KindWorkloadDefinition, o.ID, ""))
		}()
	}
	wg.Wait()
	for _, o := range objs {
		_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), o.ID)
		require.NoError(t, err)
	}
	await.True(t, 10*time.Second, func() bool { return total.Load() >= 6 }, "at least 6 reconciles")
	require.Zero(t, overlap.Load(), "two reconciles of one object overlapped")
}

func TestKilledControllerIsTakenOverWithinLockTTLPlusAckWait(t *testing.T) {
	t.Parallel()
	const ackWait, lockTTL = 3 * time.Second, 2 * time.Second
	b := setup(t, setupOpts{ackWait: ackWait})

	// Replica A has its own NATS connection; it takes the object and then dies mid-reconcile: its
	// connection is closed (no heartbeats, no ack) and its reconcile never returns.
	aBroker, err := broker.Start(context.Background(), broker.Config{URL: b.broker.ClientURL(), AckWait: ackWait, Logger: quietLogger()})
	require.NoError(t, err)
	started := make(chan struct{})
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	aRec := recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		close(started)
		<-hang
		return reconcile.Result{}, nil
	})
	ca := reconcile.New(aBroker, b.client.WorkloadDefinitions(), aRec, reconcile.Config{LockTTL: lockTTL, Heartbeat: 500 * time.Millisecond, ResyncInterval: time.Hour, ShutdownGrace: 10 * time.Millisecond, Logger: quietLogger()})
	actx, acancel := context.WithCancel(context.Background())
	t.Cleanup(acancel)
	go func() { _ = ca.Start(actx) }()

	obj := b.createDef(t, "orphan")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("replica A never started the reconcile")
	}
	killed := time.Now()
	aBroker.Close()

	var bCalls atomic.Int32
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		bCalls.Add(1)
		return reconcile.Result{}, nil
	}), reconcile.Config{LockTTL: lockTTL, ResyncInterval: time.Hour})
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 30*time.Second), obj.ID)
	require.NoError(t, err)
	took := time.Since(killed)
	t.Logf("replica B finished the object %s after replica A was killed", took.Round(10*time.Millisecond))
	require.Positive(t, bCalls.Load())
	require.Less(t, took, lockTTL+ackWait+2*time.Second, "takeover within lock TTL + ack wait (+ slack for redelivery)")
}

// TestASurvivorTakesOverTheRequeuesOfAPeerThatDied: a replica that dies holds its requeues in memory, and
// nothing else would notify their objects again. Every replica announces itself (broker.Presence); when
// a peer's presence expires, the survivors pass over their objects that are not reconciled. Here the
// requeue is an hour away, and the object is still reconciled within seconds of the death.
func TestASurvivorTakesOverTheRequeuesOfAPeerThatDied(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const ttl, interval = time.Second, 300 * time.Millisecond
	type replica struct {
		name  string
		conn  *broker.Broker
		calls atomic.Int32
	}
	var first atomic.Pointer[replica] // the replica that reconciled the object first
	kv, err := b.broker.JetStream().KeyValue(context.Background(), broker.LockBucket)
	require.NoError(t, err)
	members := func() int {
		keys, _ := kv.Keys(context.Background())
		n := 0
		for _, k := range keys {
			if strings.HasPrefix(k, "members.") {
				n++
			}
		}
		return n
	}
	start := func(name string) *replica {
		conn, err := broker.Start(context.Background(), broker.Config{URL: b.broker.ClientURL(), Logger: quietLogger()})
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		r := &replica{name: name, conn: conn}
		activity := &reconcile.Activity{}
		rec := recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
			r.calls.Add(1)
			if first.CompareAndSwap(nil, r) {
				return reconcile.Result{RequeueAfter: time.Hour}, nil // not done: looked at again in an hour
			}
			return reconcile.Result{}, nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		c := reconcile.New(conn, b.client.WorkloadDefinitions(), rec, reconcile.Config{ResyncInterval: interval, Activity: activity, Logger: quietLogger()})
		go func() { _ = c.Start(ctx) }()
		go func() {
			_ = conn.Presence(ctx, broker.PresenceConfig{TTL: ttl, Left: func(string) { activity.Lost() }})
		}()
		return r
	}
	one, two := start("one"), start("two")
	await.True(t, 10*time.Second, func() bool { return members() == 2 }, "both replicas announced themselves")

	obj := b.createDef(t, "requeued")
	await.True(t, 10*time.Second, func() bool { return first.Load() != nil }, "a replica reconciled the object")
	holder := first.Load()
	survivor := one
	if holder == one {
		survivor = two
	}
	// The reconcile is over once its status is written and its lock released: from then on only the
	// requeue timer, in the holder's memory, would bring the object back.
	await.Explained(t, 10*time.Second, func() (bool, string) {
		got, err := b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
		if err != nil || got.Status.Phase == "" {
			return false, fmt.Sprintf("status not written yet (%v)", err)
		}
		_, err = kv.Get(context.Background(), broker.LockKey(api.KindWorkloadDefinition, obj.ID))
		return errors.Is(err, jetstream.ErrKeyNotFound), fmt.Sprintf("lock not released yet (%v)", err)
	})
	got, err := b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
	require.NoError(t, err)
	require.False(t, api.Reconciled(got.Generation, &got.Status.Status), "the object waits for its requeue")

	killed := time.Now()
	holder.conn.Close() // dies with its requeue: no release, no publish
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 20*time.Second), obj.ID)
	require.NoError(t, err, "the survivor reconciles the object whose requeue died with its peer")
	took := time.Since(killed)
	t.Logf("replica %s reconciled the object %s after replica %s died", survivor.name, took.Round(10*time.Millisecond), holder.name)
	require.Positive(t, survivor.calls.Load())
	require.Less(t, took, ttl+interval+5*time.Second, "within the presence TTL and a resync interval (plus the broker's expiry sweep)")
}

func TestResyncPicksUpObjectsWhoseNotificationWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	obj := b.createDef(t, "lost")
	// Lose every notification: purge the stream before any controller runs.
	await.True(t, 10*time.Second, func() bool {
		pending, _, err := b.store.OutboxStats(context.Background())
		require.NoError(t, err)
		return pending == 0
	}, "the outbox relayed")
	stream, err := b.broker.JetStream().Stream(context.Background(), "QLEET")
	require.NoError(t, err)
	require.NoError(t, stream.Purge(context.Background()))

	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.Config{ResyncInterval: 200 * time.Millisecond})
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err)
}

func TestStaleStatusWritesAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// The reconciler changes the spec while it works: its status write carries a stale If-Match and must
	// be refused; the runtime then reconciles again at the new generation.
	var once sync.Once
	var seenGens sync.Map
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		seenGens.Store(obj.Generation, true)
		once.Do(func() {
			_, err := b.client.WorkloadDefinitions().Patch(ctx, obj.ID, map[string]any{"spec": map[string]any{"replicas": 5}})
			require.NoError(t, err)
		})
		return reconcile.Result{}, nil
	}), reconcile.Config{ResyncInterval: time.Hour})
	obj := b.createDef(t, "moving")
	got, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), got.Generation)
	require.Equal(t, int64(2), got.Status.ObservedGeneration)
	_, saw1 := seenGens.Load(int64(1))
	_, saw2 := seenGens.Load(int64(2))
	require.True(t, saw1 && saw2)
}

func ptr[T any](v T) *T { return &v }

// A notification that arrives while its object is being reconciled is taken over by the worker that
// holds the object: it reconciles once more right after, instead of the notification waiting out a
// lock retry. LockRetry is set to an hour, so the old path would not finish within the test.
func TestNotificationDuringReconcileIsTakenOverByTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first := make(chan struct{})
	release := make(chan struct{})
	var calls, running, overlap atomic.Int32
	ctrl, _ := b.runWith(t, b.client, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		if running.Add(1) > 1 {
			overlap.Add(1)
		}
		defer running.Add(-1)
		if calls.Add(1) == 1 {
			close(first)
			<-release
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{Workers: 4, LockRetry: time.Hour, ResyncInterval: time.Hour})

	obj := b.createDef(t, "busy")
	// Two more notifications while the first reconcile runs: they coalesce into one more reconcile. One
	// reaches a second worker, which hands it to the first (the stream may coalesce the two into one
	// message); one that arrives later is reconciled at most once more, the bound checked below.
	b.notifyDuring(t, ctrl, first, obj.ID, "again-1", "again-2")
	close(release)

	await.True(t, 10*time.Second, func() bool { return calls.Load() >= 2 }, "the coalesced second reconcile")
	time.Sleep(300 * time.Millisecond) // no signal: a window in which no more reconciles must start
	require.LessOrEqual(t, calls.Load(), int32(3), "the extra notifications coalesced")
	require.Zero(t, overlap.Load(), "two reconciles of one object overlapped")
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err)
}

// A notification handed over to a worker waits for that worker's reconcile, however long it runs: the
// heartbeat signals progress on it as on the worker's own message, so JetStream does not redeliver it
// after AckWait. The reconcile here is held for more than three ack waits after the hand-over.
func TestHandedOverNotificationIsNotRedeliveredWhileTheReconcileRuns(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	b := setup(t, setupOpts{ackWait: ackWait})
	first := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	ctrl, stop := b.runWith(t, b.client, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		if calls.Add(1) == 1 {
			close(first)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{Workers: 4, Heartbeat: 200 * time.Millisecond, LockRetry: time.Hour, ResyncInterval: time.Hour, Timeout: time.Minute})
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(release)
		}
	}
	// Registered after runWith's, so it runs first: a failed assertion must not leave the reconcile held
	// while the controller waits for it to stop.
	t.Cleanup(releaseOnce)

	obj := b.createDef(t, "long")
	b.notifyDuring(t, ctrl, first, obj.ID, "during")

	cons, err := b.broker.Consumer(context.Background(), api.KindWorkloadDefinition)
	require.NoError(t, err)
	before, err := cons.Info(context.Background())
	require.NoError(t, err)
	time.Sleep(3*ackWait + ackWait/2) // no signal for "not redelivered": a window of three and a half ack waits
	after, err := cons.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, before.NumRedelivered, after.NumRedelivered, "a notification was redelivered while its reconcile ran")
	require.Equal(t, int32(1), calls.Load(), "only the held reconcile ran")

	releaseOnce()
	await.True(t, 10*time.Second, func() bool { return calls.Load() >= 2 }, "the handed-over notification's reconcile")
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err)
	stop()
}

// notifyDuring waits for the first reconcile of id to start (first is closed), publishes a notification
// for id with each of msgIDs, and waits until one has been handed over to the worker that holds id.
func (b *bundle) notifyDuring(t *testing.T, ctrl *reconcile.Controller[api.WorkloadDefinitionSpec, api.WorkloadDefinitionStatus], first <-chan struct{}, id string, msgIDs ...string) {
	t.Helper()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first reconcile never started")
	}
	for _, msgID := range msgIDs {
		require.NoError(t, b.broker.Publish(context.Background(), api.KindWorkloadDefinition, id, msgID))
	}
	await.True(t, 10*time.Second, func() bool { return ctrl.HandedOver(id) >= 1 }, "a notification handed to the worker that holds the object")
}

func TestFailedObjectsAreRecheckedOnASlowSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var fixed atomic.Bool
	var seen calls
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		seen.inc(obj.Name)
		if !fixed.Load() {
			return reconcile.Result{}, reconcile.Terminal(errors.New("the registry refuses the image"))
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{ResyncInterval: 50 * time.Millisecond, DriftInterval: time.Hour, FailedRecheckInterval: 500 * time.Millisecond})

	obj := b.createDef(t, "heals")
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.True(t, client.IsFailed(err), "want Failed, got %v", err)

	// The world is fixed outside QleetOS; no spec change, no `qleet reconcile`.
	fixed.Store(true)
	var got *defObj
	await.True(t, 10*time.Second, func() bool {
		got, err = b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
		require.NoError(t, err)
		return got.Status.Phase == api.PhaseReady
	}, "the failed object was re-checked and healed")
	require.Equal(t, got.Generation, got.Status.ObservedGeneration)
	// Re-checks are rare: the resync ticks twenty times a second, the failed re-check twice.
	require.Less(t, seen.get("heals"), 8, "a Failed object is not re-checked on every resync")
}

// A controller restarted within its resync bucket takes up the objects its predecessor left waiting on a
// requeue held in memory. Its start pass would otherwise be taken for a duplicate of the predecessor's,
// which had the same message ids, and with an hour's interval nothing else would bring the object back.
func TestRestartedControllerTakesUpRequeuesItsPredecessorHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	obj := b.createDef(t, "held")
	cfg := reconcile.Config{ResyncInterval: time.Hour}
	var before atomic.Int32
	stop := b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		before.Add(1)
		obj.Status.Message = "step 1 of 2"
		return reconcile.Result{RequeueAfter: time.Hour}, nil
	}), cfg)
	cons, err := b.broker.Consumer(context.Background(), api.KindWorkloadDefinition)
	require.NoError(t, err)
	// Both notifications (the create's and the start pass's) reconciled and acked: from then on only the
	// requeue timer, in this controller's memory, would bring the object back.
	await.Explained(t, 10*time.Second, func() (bool, string) {
		info, err := cons.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		got, err := b.client.WorkloadDefinitions().Get(context.Background(), obj.ID)
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0 && got.Status.Message == "step 1 of 2",
			fmt.Sprintf("pending %d, ack pending %d, message %q", info.NumPending, info.NumAckPending, got.Status.Message)
	})
	require.Positive(t, before.Load())
	stop() // its requeue goes with it

	var after atomic.Int32
	b.run(t, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		after.Add(1)
		return reconcile.Result{}, nil
	}), cfg)
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
	require.NoError(t, err, "the restarted controller's start pass reconciles the object")
	require.Positive(t, after.Load())
}
