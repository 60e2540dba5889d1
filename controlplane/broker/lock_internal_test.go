package broker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestLockUnansweredWrites covers a lock write whose reply was lost (as when the lock bucket's leader
// stops) but which the bucket stored: the next call must carry on from it, not report the lock lost.
// The lost reply is staged by writing what the lock would have written, behind its back.
func TestLockUnansweredWrites(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	b, err := Start(ctx, Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	l, err := b.Locker(ctx, LockConfig{TTL: 10 * time.Second, Owner: "me"})
	require.NoError(t, err)

	// lostReply stores write's effect and records it as a write of k that got no reply.
	lostReply := func(t *testing.T, k *Lock, write func() error) {
		t.Helper()
		k.mu.Lock()
		defer k.mu.Unlock()
		k.unanswered(time.Now())
		require.NoError(t, write())
	}

	t.Run("a refresh that was stored though its reply was lost", func(t *testing.T) {
		k, err := l.Acquire(ctx, "gateways.refreshed")
		require.NoError(t, err)
		before := k.Revision()
		lostReply(t, k, func() error {
			_, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: k.subject(), Data: k.value},
				jetstream.WithExpectLastSequencePerSubject(k.revision), jetstream.WithMsgTTL(l.ttl))
			return err
		})
		require.NoError(t, k.Refresh(ctx))
		require.Greater(t, k.Revision(), before+1, "refreshed from the stored write's revision")
		require.NoError(t, k.Release(ctx))
		_, err = l.Acquire(ctx, k.Key())
		require.NoError(t, err, "released")
	})

	t.Run("a release that was stored though its reply was lost", func(t *testing.T) {
		k, err := l.Acquire(ctx, "gateways.released")
		require.NoError(t, err)
		lostReply(t, k, func() error {
			return l.kv.Purge(ctx, k.key, jetstream.LastRevision(k.revision), jetstream.PurgeTTL(lockMarkerTTL))
		})
		require.NoError(t, k.Release(ctx))
		_, err = l.Acquire(ctx, k.Key())
		require.NoError(t, err, "released")
	})

	t.Run("after an unanswered write, another holder's lock is still a lost lock", func(t *testing.T) {
		short, err := b.Locker(ctx, LockConfig{TTL: time.Second, Owner: "me"})
		require.NoError(t, err)
		k, err := short.Acquire(ctx, "gateways.taken")
		require.NoError(t, err)
		k.mu.Lock()
		k.unanswered(time.Now())
		k.mu.Unlock()
		var other *Lock
		await.True(t, 10*time.Second, func() bool {
			other, err = l.Acquire(ctx, k.Key())
			return err == nil
		}, "the lock expires and the same owner name takes it again")
		require.ErrorIs(t, k.Refresh(ctx), ErrLockLost)
		require.ErrorIs(t, k.Release(ctx), ErrLockLost)
		require.NoError(t, other.Refresh(ctx))
		require.NoError(t, other.Release(ctx))
	})
}
