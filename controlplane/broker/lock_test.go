package broker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

func TestLocker(t *testing.T) {
	t.Parallel()

	t.Run("TTL defaults to 10s and rounds up to whole seconds", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		for in, want := range map[time.Duration]time.Duration{
			0: 10 * time.Second, 100 * time.Millisecond: time.Second, 1500 * time.Millisecond: 2 * time.Second,
			3 * time.Second: 3 * time.Second,
		} {
			l, err := b.Locker(ctx, broker.LockConfig{TTL: in})
			require.NoError(t, err)
			require.Equal(t, want, l.TTL(), "TTL %s", in)
		}
	})

	t.Run("a lock is exclusive until released", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		other := startBroker(t, broker.Config{URL: b.ClientURL()})
		ctx := testCtx(t)
		l1, err := b.Locker(ctx, broker.LockConfig{Owner: "one"})
		require.NoError(t, err)
		l2, err := other.Locker(ctx, broker.LockConfig{Owner: "two"})
		require.NoError(t, err)

		key := broker.LockKey("gateways", "g1")
		lk, err := l1.Acquire(ctx, key)
		require.NoError(t, err)
		_, err = l2.Acquire(ctx, key)
		require.ErrorIs(t, err, broker.ErrLocked)
		_, err = l1.Acquire(ctx, key)
		require.ErrorIs(t, err, broker.ErrLocked, "not re-entrant")

		other2, err := l2.Acquire(ctx, broker.LockKey("gateways", "g2"))
		require.NoError(t, err, "other keys are free")
		require.NoError(t, other2.Release(ctx))

		require.NoError(t, lk.Release(ctx))
		lk2, err := l2.Acquire(ctx, key)
		require.NoError(t, err, "free again after release")
		require.NoError(t, lk2.Release(ctx))
	})

	t.Run("of concurrent acquirers exactly one wins", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		other := startBroker(t, broker.Config{URL: b.ClientURL()})
		ctx := testCtx(t)
		var lockers []*broker.Locker
		for _, br := range []*broker.Broker{b, other} {
			for range 4 {
				l, err := br.Locker(ctx, broker.LockConfig{})
				require.NoError(t, err)
				lockers = append(lockers, l)
			}
		}
		// Round 0 races on a fresh key; later rounds race on the marker the previous release left.
		for round := range 20 {
			var (
				wg      sync.WaitGroup
				winners atomic.Int32
				won     = make(chan *broker.Lock, len(lockers))
				errs    = make(chan error, len(lockers))
			)
			for _, l := range lockers {
				wg.Go(func() {
					lk, err := l.Acquire(ctx, "gateways.contended")
					switch {
					case err == nil:
						winners.Add(1)
						won <- lk
					case !errors.Is(err, broker.ErrLocked):
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err, "round %d", round)
			}
			require.EqualValues(t, 1, winners.Load(), "round %d", round)
			require.NoError(t, (<-won).Release(ctx))
		}
	})

	t.Run("refresh keeps the lock past its TTL", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		l, err := b.Locker(ctx, broker.LockConfig{TTL: time.Second})
		require.NoError(t, err)
		key := broker.LockKey("databases", "d1")
		lk, err := l.Acquire(ctx, key)
		require.NoError(t, err)

		rev := lk.Revision()
		start := time.Now()
		for time.Since(start) < 3*time.Second {
			time.Sleep(250 * time.Millisecond) // no signal: the heartbeat interval under test
			require.NoError(t, lk.Refresh(ctx))
			_, err := l.Acquire(ctx, key)
			require.ErrorIs(t, err, broker.ErrLocked)
		}
		require.Greater(t, lk.Revision(), rev)
		require.NoError(t, lk.Release(ctx))
	})

	t.Run("a holder that stops refreshing loses the lock after the TTL", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		l, err := b.Locker(ctx, broker.LockConfig{TTL: 2 * time.Second})
		require.NoError(t, err)
		key := broker.LockKey("buckets", "x1")
		crashed, err := l.Acquire(ctx, key)
		require.NoError(t, err)
		// It was refreshed once, then its holder died.
		require.NoError(t, crashed.Refresh(ctx))
		acquired := time.Now()

		var next *broker.Lock
		await.True(t, 10*time.Second, func() bool {
			next, err = l.Acquire(ctx, key)
			if err != nil {
				require.ErrorIs(t, err, broker.ErrLocked)
				return false
			}
			return true
		}, "lock expires")
		held := time.Since(acquired)
		t.Logf("lock with TTL 2s expired after %s", held)
		require.GreaterOrEqual(t, held, 2*time.Second, "not before the TTL")

		require.ErrorIs(t, crashed.Refresh(ctx), broker.ErrLockLost)
		require.ErrorIs(t, crashed.Release(ctx), broker.ErrLockLost, "a stale revision releases nothing")
		_, err = l.Acquire(ctx, key)
		require.ErrorIs(t, err, broker.ErrLocked, "the new holder keeps it")
		require.NoError(t, next.Refresh(ctx))
		require.NoError(t, next.Release(ctx))
	})

	t.Run("locks with different TTLs exclude each other", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		short, err := b.Locker(ctx, broker.LockConfig{TTL: time.Second})
		require.NoError(t, err)
		long, err := b.Locker(ctx, broker.LockConfig{TTL: time.Minute})
		require.NoError(t, err)
		lk, err := long.Acquire(ctx, "secrets.s1")
		require.NoError(t, err)
		_, err = short.Acquire(ctx, "secrets.s1")
		require.ErrorIs(t, err, broker.ErrLocked)
		require.NoError(t, lk.Release(ctx))
	})

	t.Run("a release after a refresh by the holder uses the new revision", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		l, err := b.Locker(ctx, broker.LockConfig{})
		require.NoError(t, err)
		lk, err := l.Acquire(ctx, "gateways.g9")
		require.NoError(t, err)
		require.NoError(t, lk.Refresh(ctx))
		require.NoError(t, lk.Refresh(ctx))
		require.NoError(t, lk.Release(ctx))
		require.ErrorIs(t, lk.Release(ctx), broker.ErrLockLost, "released twice")
		require.ErrorIs(t, lk.Refresh(ctx), broker.ErrLockLost, "refresh after release")
		lk2, err := l.Acquire(ctx, "gateways.g9")
		require.NoError(t, err)
		require.NoError(t, lk2.Release(ctx))
	})

	t.Run("locks survive a broker restart", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		l, err := b.Locker(ctx, broker.LockConfig{TTL: time.Minute})
		require.NoError(t, err)
		lk, err := l.Acquire(ctx, "gateways.g1")
		require.NoError(t, err)

		b.Embedded().Stop()
		require.NoError(t, b.Embedded().Start(ctx))
		await.True(t, 10*time.Second, b.Conn().IsConnected, "client reconnected")
		// Connected is not serving: JetStream recovers its streams after the connection is back, and a
		// lock request sent before that waited out the test's context on a loaded machine.
		await.True(t, 30*time.Second, func() bool {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := b.JetStream().AccountInfo(c)
			return err == nil
		}, "JetStream serves again")

		_, err = l.Acquire(ctx, "gateways.g1")
		require.ErrorIs(t, err, broker.ErrLocked)
		require.NoError(t, lk.Refresh(ctx))
		require.NoError(t, lk.Release(ctx))
	})
}
