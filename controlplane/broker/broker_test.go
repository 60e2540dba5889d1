package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// startBroker starts a broker on an embedded server in a fresh temp dir, closed at cleanup.
func startBroker(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	if cfg.URL == "" && cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

// testCtx is a context bounded for one test.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// streamState is the QLEET stream's state.
func streamState(t testing.TB, ctx context.Context, b *broker.Broker) jetstream.StreamState {
	t.Helper()
	s, err := b.JetStream().Stream(ctx, broker.StreamName)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State
}

// fetchOne fetches at most one message within wait; nil when none arrives.
func fetchOne(t testing.TB, c jetstream.Consumer, wait time.Duration) jetstream.Msg {
	t.Helper()
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	require.NoError(t, err)
	var got jetstream.Msg
	for m := range batch.Messages() {
		got = m
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		require.NoError(t, err)
	}
	return got
}

func seqOf(t testing.TB, m jetstream.Msg) uint64 {
	t.Helper()
	md, err := m.Metadata()
	require.NoError(t, err)
	return md.Sequence.Stream
}

func TestSubject(t *testing.T) {
	t.Parallel()
	t.Run("round trips kind and id", func(t *testing.T) {
		s := broker.Subject("workload_instances", "0190a3c4-7b1e-7c9a-9f3e-2d4c5b6a7e8f")
		require.Equal(t, "qleet.reconcile.workload_instances.0190a3c4-7b1e-7c9a-9f3e-2d4c5b6a7e8f", s)
		kind, id, err := broker.ParseSubject(s)
		require.NoError(t, err)
		require.Equal(t, "workload_instances", kind)
		require.Equal(t, "0190a3c4-7b1e-7c9a-9f3e-2d4c5b6a7e8f", id)
	})
	t.Run("rejects malformed subjects", func(t *testing.T) {
		for _, s := range []string{
			"", "qleet.reconcile.", "qleet.reconcile.gateways", "qleet.reconcile.gateways.",
			"qleet.reconcile..x", "qleet.reconcile.gateways.a.b", "other.reconcile.gateways.x",
		} {
			_, _, err := broker.ParseSubject(s)
			require.Error(t, err, "subject %q", s)
		}
	})
}

func TestStart(t *testing.T) {
	t.Parallel()
	t.Run("embedded server needs a data dir", func(t *testing.T) {
		_, err := broker.Start(context.Background(), broker.Config{})
		require.Error(t, err)
	})
	t.Run("creates the stream as a one-per-subject work queue", func(t *testing.T) {
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		s, err := b.JetStream().Stream(ctx, broker.StreamName)
		require.NoError(t, err)
		cfg := s.CachedInfo().Config
		require.Equal(t, []string{"qleet.reconcile.>"}, cfg.Subjects)
		require.Equal(t, jetstream.WorkQueuePolicy, cfg.Retention)
		require.Equal(t, jetstream.FileStorage, cfg.Storage)
		require.EqualValues(t, 1, cfg.MaxMsgsPerSubject)
		require.Equal(t, jetstream.DiscardOld, cfg.Discard)
		require.Equal(t, 2*time.Minute, cfg.Duplicates)
	})
	t.Run("a second broker on the same server reuses stream and consumer", func(t *testing.T) {
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		_, err := b.Consumer(ctx, "gateways")
		require.NoError(t, err)
		b2 := startBroker(t, broker.Config{URL: b.ClientURL()})
		c, err := b2.Consumer(ctx, "gateways")
		require.NoError(t, err)
		require.Equal(t, "reconcile_gateways", c.CachedInfo().Name)
		require.Equal(t, b.ClientURL(), b2.ClientURL())
	})
}

func TestPublish(t *testing.T) {
	t.Parallel()
	b := startBroker(t, broker.Config{})
	ctx := testCtx(t)

	t.Run("the same message id is stored once", func(t *testing.T) {
		for range 3 {
			require.NoError(t, b.Publish(ctx, "buckets", "b1", "resync-b1-1"))
		}
		require.EqualValues(t, 1, streamState(t, ctx, b).LastSeq)
	})
	t.Run("rejects ids that are not one subject token", func(t *testing.T) {
		require.Error(t, b.Publish(ctx, "buckets", "a.b", ""))
		require.Error(t, b.Publish(ctx, "buckets", "", ""))
		require.Error(t, b.Publish(ctx, "bu*ckets", "x", ""))
	})
}

func TestConsumer(t *testing.T) {
	t.Parallel()

	t.Run("is durable, explicit-ack and filtered to its kind", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{AckWait: 7 * time.Second})
		ctx := testCtx(t)
		c, err := b.Consumer(ctx, "databases")
		require.NoError(t, err)
		cfg := c.CachedInfo().Config
		require.Equal(t, "reconcile_databases", cfg.Durable)
		require.Equal(t, "qleet.reconcile.databases.>", cfg.FilterSubject)
		require.Equal(t, jetstream.AckExplicitPolicy, cfg.AckPolicy)
		require.Equal(t, 7*time.Second, cfg.AckWait)
		require.Equal(t, -1, cfg.MaxDeliver)
		require.Equal(t, 1000, cfg.MaxAckPending)

		require.NoError(t, b.Publish(ctx, "gateways", "g1", ""))
		require.NoError(t, b.Publish(ctx, "databases", "d1", ""))
		m := fetchOne(t, c, time.Second)
		require.NotNil(t, m)
		require.Equal(t, "qleet.reconcile.databases.d1", m.Subject())
		require.NoError(t, m.DoubleAck(ctx))
		require.Nil(t, fetchOne(t, c, 200*time.Millisecond), "the gateway message is not for this consumer")
	})

	t.Run("two subscribers share the work, each message once", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		ctx := testCtx(t)
		const n = 200
		// Two handles on the durable, as two controller replicas would have (one through a second connection).
		b2 := startBroker(t, broker.Config{URL: b.ClientURL()})
		c1, err := b.Consumer(ctx, "workload_instances")
		require.NoError(t, err)
		c2, err := b2.Consumer(ctx, "workload_instances")
		require.NoError(t, err)

		var mu sync.Mutex
		seen := map[string]int{}
		perSub := [2]int{}
		handler := func(i int) jetstream.MessageHandler {
			return func(m jetstream.Msg) {
				mu.Lock()
				seen[m.Subject()]++
				perSub[i]++
				mu.Unlock()
				// no signal: a deliberately slow handler, so that one subscriber cannot drain everything alone.
				time.Sleep(time.Millisecond)
				_ = m.Ack()
			}
		}
		cc1, err := c1.Consume(handler(0), jetstream.PullMaxMessages(10))
		require.NoError(t, err)
		defer cc1.Stop()
		cc2, err := c2.Consume(handler(1), jetstream.PullMaxMessages(10))
		require.NoError(t, err)
		defer cc2.Stop()

		for i := range n {
			require.NoError(t, b.Publish(ctx, "workload_instances", fmt.Sprintf("w%d", i), ""))
		}
		await.True(t, 20*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == n
		}, "all %d messages consumed", n)
		await.True(t, 10*time.Second, func() bool { return streamState(t, ctx, b).Msgs == 0 }, "stream drained")

		mu.Lock()
		defer mu.Unlock()
		for s, c := range seen {
			require.Equal(t, 1, c, "subject %s delivered once", s)
		}
		require.Positive(t, perSub[0], "first subscriber got work")
		require.Positive(t, perSub[1], "second subscriber got work")
		t.Logf("split between subscribers: %d / %d", perSub[0], perSub[1])
	})
}
