package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// profileWait is a reconciler that waits until a runtime_profile named name exists, on writes to
// runtime_profiles, with a fallback timer far beyond the test's patience. Each call reads first, then
// runs between (when set) before it answers.
func profileWait(b *bundle, name string, calls *atomic.Int32, between func(call int32)) reconcile.ReconcilerFunc[defSpec, defStatus] {
	return recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		n := calls.Add(1)
		_, err := b.client.RuntimeProfiles().GetByName(ctx, name)
		if between != nil {
			between(n)
		}
		if api.IsNotFound(err) {
			return reconcile.Result{}, &reconcile.WaitError{On: "a runtime_profile " + name, Reason: "NoProfile",
				After: time.Hour, Kinds: []string{api.KindRuntimeProfile}}
		}
		return reconcile.Result{}, err
	})
}

func createProfile(t *testing.T, b *bundle, name string) {
	t.Helper()
	_, err := b.client.RuntimeProfiles().Create(context.Background(), &api.RuntimeProfile{Meta: api.Meta{Name: name},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"region-" + name}, Nodes: 1}})
	require.NoError(t, err)
}

// TestAWaitOnAKindEndsAtItsWrite: an object that waits on writes to another kind, which it references
// nowhere, is reconciled again as soon as an object of that kind is created, not when its timer (an
// hour) or a resync pass (an hour) comes.
func TestAWaitOnAKindEndsAtItsWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var calls atomic.Int32
	b.run(t, profileWait(b, "later", &calls, nil), reconcile.Config{ResyncInterval: time.Hour, WakeOn: []string{api.KindRuntimeProfile}})
	def := b.createDef(t, "waits")
	obj := waitDefStatus(t, b, def.ID, func(o *defObj) bool { return o.Status.Message != "" })
	require.Contains(t, obj.Status.Message, "waiting for a runtime_profile later")

	// A write of the kind that does not end the wait's condition wakes it too; it waits again.
	before := settled(&calls)
	createProfile(t, b, "other")
	require.Eventually(t, func() bool { return calls.Load() > before }, 5*time.Second, 20*time.Millisecond, "a profile's creation wakes the waiting object")

	start := time.Now()
	createProfile(t, b, "later")
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), def.ID)
	require.NoError(t, err, "the wait ends at the write, not at its one-hour timer")
	t.Logf("reconciled %s after the profile's creation", time.Since(start).Round(time.Millisecond))
}

// TestAWriteDuringTheReconcileIsNotMissed: the profile is created after the reconcile read that it is
// missing and before it answered "wait". The notification came while nothing was registered as waiting;
// the controller still looks again at once.
func TestAWriteDuringTheReconcileIsNotMissed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var calls atomic.Int32
	created := make(chan struct{})
	rec := profileWait(b, "racing", &calls, func(call int32) {
		if call != 1 {
			return
		}
		createProfile(t, b, "racing")
		// Let the relay publish the creation, and the controller see it, before this reconcile answers.
		time.Sleep(500 * time.Millisecond)
		close(created)
	})
	b.run(t, rec, reconcile.Config{ResyncInterval: time.Hour, WakeOn: []string{api.KindRuntimeProfile}})
	def := b.createDef(t, "races")
	<-created
	_, err := b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), def.ID)
	require.NoError(t, err, "the write seen during the reconcile sends it round again")
	require.GreaterOrEqual(t, calls.Load(), int32(2))
}

// TestAWaitOnAKindNotFollowedKeepsItsTimer: without Config.WakeOn, a write of the kind wakes nothing; the
// wait's timer ends it.
func TestAWaitOnAKindNotFollowedKeepsItsTimer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var calls atomic.Int32
	b.run(t, profileWait(b, "unfollowed", &calls, nil), reconcile.Config{ResyncInterval: time.Hour})
	def := b.createDef(t, "unfollowed")
	waitDefStatus(t, b, def.ID, func(o *defObj) bool { return o.Status.Message != "" })
	before := settled(&calls)
	createProfile(t, b, "unfollowed")
	time.Sleep(2 * time.Second)
	require.Equal(t, before, calls.Load(), "nothing follows runtime_profiles here")
	obj, err := b.client.WorkloadDefinitions().Get(context.Background(), def.ID)
	require.NoError(t, err)
	require.NotEqual(t, api.PhaseReady, obj.Status.Phase)
}

// waitDefStatus polls the definition until ok holds (10 s at most) and returns it.
func waitDefStatus(t *testing.T, b *bundle, id string, ok func(*defObj) bool) *defObj {
	t.Helper()
	var last *defObj
	require.Eventually(t, func() bool {
		obj, err := b.client.WorkloadDefinitions().Get(context.Background(), id)
		if err != nil {
			return false
		}
		last = obj
		return ok(obj)
	}, 10*time.Second, 20*time.Millisecond)
	return last
}

// settled waits until calls has not moved for half a second (the notifications of a create, and the start
// pass, are handled) and returns it.
func settled(calls *atomic.Int32) int32 {
	last := calls.Load()
	for {
		time.Sleep(500 * time.Millisecond)
		n := calls.Load()
		if n == last {
			return n
		}
		last = n
	}
}
