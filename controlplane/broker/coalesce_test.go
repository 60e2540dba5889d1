package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// These tests pin down how a WorkQueue stream with MaxMsgsPerSubject=1 (DiscardOld) behaves on
// nats-server 2.15, because the reconcile runtime relies on it.
func TestCoalescing(t *testing.T) {
	t.Parallel()

	t.Run("pending notifications for one object coalesce into one", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)
		for range 5 {
			require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		}
		require.NoError(t, b.Publish(ctx, "gateways", "g2", ""))

		st := streamState(t, ctx, b)
		require.EqualValues(t, 2, st.Msgs, "one message per object")
		require.EqualValues(t, 6, st.LastSeq)
		// The consumer's counts follow the stream's asynchronously inside nats-server: right after the
		// publish acks they may still count the replaced messages.
		consumerSettles(t, c, 2, 0)

		m1 := fetchOne(t, c, time.Second)
		require.NotNil(t, m1)
		require.Equal(t, uint64(5), seqOf(t, m1), "the newest notification for g1 survives")
		require.NoError(t, m1.DoubleAck(ctx))
		m2 := fetchOne(t, c, time.Second)
		require.NotNil(t, m2)
		require.Equal(t, "qleet.reconcile.gateways.g2", m2.Subject())
		require.NoError(t, m2.DoubleAck(ctx))
		require.Nil(t, fetchOne(t, c, 200*time.Millisecond))
		require.Zero(t, streamState(t, ctx, b).Msgs)
	})

	t.Run("a notification arriving while the older one is in flight replaces it and is delivered", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		old := fetchOne(t, c, time.Second)
		require.NotNil(t, old)
		require.Equal(t, uint64(1), seqOf(t, old))

		// The object changes while the first reconcile runs (it may have read the old spec).
		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		st := streamState(t, ctx, b)
		require.EqualValues(t, 1, st.Msgs, "the in-flight message was replaced")
		require.EqualValues(t, 2, st.FirstSeq)

		// The new message is delivered at once, even though the old one is not acked yet. Two workers
		// can therefore hold notifications for one object at the same time; the per-object lock
		// serialises them.
		next := fetchOne(t, c, time.Second)
		require.NotNil(t, next)
		require.Equal(t, uint64(2), seqOf(t, next))

		// Acking the replaced message succeeds and does not remove the new one.
		require.NoError(t, old.DoubleAck(ctx))
		require.EqualValues(t, 1, streamState(t, ctx, b).Msgs)
		require.NoError(t, next.DoubleAck(ctx))
		require.Zero(t, streamState(t, ctx, b).Msgs)
		info, err := c.Info(ctx)
		require.NoError(t, err)
		require.Zero(t, info.NumAckPending)
		require.Zero(t, info.NumPending)
	})

	t.Run("acking the in-flight message after a replacement leaves the replacement to be delivered", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		old := fetchOne(t, c, time.Second)
		require.NotNil(t, old)
		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		require.NoError(t, old.DoubleAck(ctx))

		next := fetchOne(t, c, time.Second)
		require.NotNil(t, next, "the change made during the first reconcile is not lost")
		require.Equal(t, uint64(2), seqOf(t, next))
		require.NoError(t, next.DoubleAck(ctx))
	})

	t.Run("a replaced in-flight message frees its ack-pending slot", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		old := fetchOne(t, c, time.Second)
		require.NotNil(t, old)
		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		// So replaced messages never eat into MaxAckPending while their slow reconcile finishes.
		consumerSettles(t, c, 1, 0)
	})

	t.Run("NakWithDelay requeues when nothing newer arrives", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		m := fetchOne(t, c, time.Second)
		require.NotNil(t, m)
		start := time.Now()
		require.NoError(t, m.NakWithDelay(time.Second))
		require.Nil(t, fetchOne(t, c, 500*time.Millisecond), "not redelivered before the delay")
		again := fetchOne(t, c, 3*time.Second)
		require.NotNil(t, again)
		require.GreaterOrEqual(t, time.Since(start), time.Second)
		require.Equal(t, uint64(1), seqOf(t, again))
		md, err := again.Metadata()
		require.NoError(t, err)
		require.EqualValues(t, 2, md.NumDelivered)
		require.NoError(t, again.DoubleAck(ctx))
	})

	t.Run("a new notification during a NakWithDelay is delivered at once and the delayed one never returns", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		m := fetchOne(t, c, time.Second)
		require.NotNil(t, m)
		require.NoError(t, m.NakWithDelay(2*time.Second))
		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))

		start := time.Now()
		next := fetchOne(t, c, time.Second)
		require.NotNil(t, next)
		require.Less(t, time.Since(start), time.Second, "not held back by the older message's delay")
		require.Equal(t, uint64(2), seqOf(t, next))
		require.NoError(t, next.DoubleAck(ctx))
		// Past the old delay: the replaced message is gone for good.
		require.Nil(t, fetchOne(t, c, 3*time.Second))
		require.Zero(t, streamState(t, ctx, b).Msgs)
	})

	t.Run("an unacked message is redelivered after AckWait", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{AckWait: time.Second})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		require.NotNil(t, fetchOne(t, c, time.Second))
		again := fetchOne(t, c, 3*time.Second)
		require.NotNil(t, again)
		require.Equal(t, uint64(1), seqOf(t, again))
		require.NoError(t, again.DoubleAck(ctx))
	})

	t.Run("pending messages survive a broker restart", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)
		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))

		b.Embedded().Stop()
		require.NoError(t, b.Embedded().Start(ctx))
		await.True(t, 10*time.Second, b.Conn().IsConnected, "client reconnected")

		// JetStream recovers the stream from disk after the restart; on a loaded machine that can take a
		// few seconds, so keep fetching until a deadline.
		var m jetstream.Msg
		err = await.Until(ctx, 20*time.Second, func(context.Context) error {
			batch, err := c.Fetch(1, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				return err // the stream is not back yet
			}
			for msg := range batch.Messages() {
				m = msg
			}
			if m == nil {
				return await.ErrNotYet
			}
			return nil
		})
		require.NoError(t, err, "the pending message is delivered after the restart")
		require.NotNil(t, m, "the pending message is delivered after the restart")
		require.Equal(t, uint64(2), seqOf(t, m))
		require.NoError(t, m.DoubleAck(ctx))
		require.Nil(t, fetchOne(t, c, 200*time.Millisecond))
	})
}

// consumerSettles waits (briefly) until the consumer counts pending and ack-pending messages as given:
// nats-server updates a consumer's counts asynchronously after a stream write, so reading them right
// after a publish flaked (TestCoalescing failed 5 times in 30 runs with -count=30).
func consumerSettles(t *testing.T, c jetstream.Consumer, pending uint64, ackPending int) {
	t.Helper()
	var info *jetstream.ConsumerInfo
	await.True(t, 2*time.Second, func() bool {
		var err error
		info, err = c.Info(testCtx(t))
		require.NoError(t, err)
		return info.NumPending == pending && info.NumAckPending == ackPending
	}, "pending %d, ack pending %d", pending, ackPending)
}
