package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// openStore opens a real SQLite store in a temp dir, closed at cleanup.
func openStore(t testing.TB) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{
		URL:    filepath.Join(t.TempDir(), "qleet.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// createObjects creates n objects of kind (one outbox row each) and returns their ids.
func createObjects(t testing.TB, ctx context.Context, st store.Store, kind string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		o, err := st.Create(ctx, &store.CreateParams{Kind: kind, Name: fmt.Sprintf("%s-%d-%d", kind, time.Now().UnixNano(), i)})
		require.NoError(t, err)
		ids[i] = o.ID
	}
	return ids
}

// runRelay runs r until the test ends and checks that Run returns nil once its context is cancelled.
func runRelay(t testing.TB, r *broker.Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("relay did not stop")
		}
	})
}

// outboxPending is the number of outbox rows not yet relayed.
func outboxPending(t testing.TB, ctx context.Context, st store.Store) int64 {
	t.Helper()
	n, _, err := st.OutboxStats(ctx)
	require.NoError(t, err)
	return n
}

// drainIDs fetches and acks every pending message of kind and returns the object ids, in order.
func drainIDs(t testing.TB, ctx context.Context, b *broker.Broker, kind string) []string {
	t.Helper()
	c, err := b.Consumer(ctx, kind)
	require.NoError(t, err)
	var ids []string
	for {
		batch, err := c.FetchNoWait(500)
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			k, id, err := broker.ParseSubject(m.Subject())
			require.NoError(t, err)
			require.Equal(t, kind, k)
			ids = append(ids, id)
			require.NoError(t, m.Ack())
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			require.NoError(t, err)
		}
		if n == 0 {
			return ids
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestRelay(t *testing.T) {
	t.Parallel()

	t.Run("two relays publish every outbox row exactly once per message id", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		b2 := startBroker(t, broker.Config{URL: b.ClientURL()})
		st := openStore(t)
		ctx := testCtx(t)

		const objects, extra = 100, 300
		ids := createObjects(t, ctx, st, "gateways", objects)
		for i := range extra {
			require.NoError(t, st.Enqueue(ctx, "gateways", ids[i%objects]))
		}
		rows := int64(objects + extra)
		require.Equal(t, rows, outboxPending(t, ctx, st))

		// Small batches, so that the two relays overlap on the same rows.
		cfg := broker.RelayConfig{BatchSize: 16, Logger: quietLogger()}
		r1 := broker.NewRelay(b, st, cfg)
		r2 := broker.NewRelay(b2, st, cfg)
		runRelay(t, r1)
		runRelay(t, r2)

		await.True(t, 30*time.Second, func() bool { return outboxPending(t, ctx, st) == 0 }, "outbox drained")
		state := streamState(t, ctx, b)
		// Each accepted message takes a sequence; duplicates by message id do not.
		require.EqualValues(t, rows, state.LastSeq, "one stored message per outbox row")
		require.EqualValues(t, objects, state.Msgs, "notifications coalesce to one per object")

		s1, s2 := r1.Stats(), r2.Stats()
		t.Logf("relay 1: %+v, relay 2: %+v", s1, s2)
		require.Zero(t, s1.Errors+s2.Errors)
		require.EqualValues(t, rows, s1.Published+s2.Published-s1.Duplicates-s2.Duplicates)
		require.ElementsMatch(t, ids, drainIDs(t, ctx, b, "gateways"))
	})

	t.Run("Notify relays at once without waiting for the poll", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		st := openStore(t)
		ctx := testCtx(t)
		first := createObjects(t, ctx, st, "secrets", 1)
		r := broker.NewRelay(b, st, broker.RelayConfig{PollInterval: time.Hour, Logger: quietLogger()})
		runRelay(t, r)
		// The first round runs at start; after it the relay sleeps on its hour-long poll.
		await.True(t, 10*time.Second, func() bool { return r.Stats().Published == 1 }, "first round")

		second := createObjects(t, ctx, st, "secrets", 1)
		r.Notify()
		await.True(t, 10*time.Second, func() bool { return r.Stats().Published == 2 }, "published after Notify")
		require.Equal(t, append(first, second...), drainIDs(t, ctx, b, "secrets"))
		require.Zero(t, outboxPending(t, ctx, st))
	})

	t.Run("a failed delete republishes and the stream drops the duplicate", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		st := openStore(t)
		ctx := testCtx(t)
		ids := createObjects(t, ctx, st, "buckets", 10)

		src := &flakySource{Store: st}
		src.failDeletes.Store(1)
		r := broker.NewRelay(b, src, broker.RelayConfig{PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
		runRelay(t, r)

		await.True(t, 10*time.Second, func() bool { return outboxPending(t, ctx, st) == 0 }, "outbox drained")
		stats := r.Stats()
		require.EqualValues(t, 1, stats.Errors)
		require.EqualValues(t, 20, stats.Published, "every entry published twice")
		require.EqualValues(t, 10, stats.Duplicates)
		require.EqualValues(t, 10, streamState(t, ctx, b).LastSeq)
		require.ElementsMatch(t, ids, drainIDs(t, ctx, b, "buckets"))
	})

	t.Run("a failing outbox read is retried", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		st := openStore(t)
		ctx := testCtx(t)
		ids := createObjects(t, ctx, st, "buckets", 3)

		src := &flakySource{Store: st}
		src.failReads.Store(3)
		r := broker.NewRelay(b, src, broker.RelayConfig{PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
		runRelay(t, r)

		await.True(t, 10*time.Second, func() bool { return outboxPending(t, ctx, st) == 0 }, "outbox drained")
		require.EqualValues(t, 3, r.Stats().Errors)
		require.ElementsMatch(t, ids, drainIDs(t, ctx, b, "buckets"))
	})

	t.Run("malformed entries are dropped and counted, the rest relayed", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		st := openStore(t)
		ctx := testCtx(t)
		ids := createObjects(t, ctx, st, "buckets", 2)
		bad, err := st.Create(ctx, &store.CreateParams{Kind: "bad.kind", Name: "x"})
		require.NoError(t, err)
		require.NotEmpty(t, bad.ID)

		r := broker.NewRelay(b, st, broker.RelayConfig{PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
		runRelay(t, r)
		await.True(t, 10*time.Second, func() bool { return outboxPending(t, ctx, st) == 0 }, "outbox drained")
		require.EqualValues(t, 1, r.Stats().Errors)
		require.ElementsMatch(t, ids, drainIDs(t, ctx, b, "buckets"))
	})

	t.Run("catches up after a broker outage with nothing lost", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, broker.Config{})
		st := openStore(t)
		ctx := testCtx(t)
		r := broker.NewRelay(b, st, broker.RelayConfig{
			PollInterval:   20 * time.Millisecond,
			PublishTimeout: 500 * time.Millisecond,
			MaxBackoff:     200 * time.Millisecond,
			Logger:         quietLogger(),
		})
		runRelay(t, r)

		var (
			mu      sync.Mutex
			created []string
		)
		write := func(n int) {
			got := createObjects(t, ctx, st, "databases", n)
			mu.Lock()
			created = append(created, got...)
			mu.Unlock()
			r.Notify()
		}
		write(20)
		await.True(t, 10*time.Second, func() bool { return outboxPending(t, ctx, st) == 0 }, "relayed before the outage")

		// QLEET_TEST_NATS_OUTAGE (a duration, default 1.5s) sets how long NATS stays down, e.g. 10s.
		length := 1500 * time.Millisecond
		if v := os.Getenv("QLEET_TEST_NATS_OUTAGE"); v != "" {
			d, err := time.ParseDuration(v)
			require.NoError(t, err, "QLEET_TEST_NATS_OUTAGE")
			length = d
		}
		b.Embedded().Stop()
		// Writes continue while NATS is down; the rows wait in the outbox.
		outage := time.Now()
		for time.Since(outage) < length {
			write(5)
			time.Sleep(50 * time.Millisecond) // no signal: paces the writes made during the outage
		}
		await.True(t, 10*time.Second, func() bool { return r.Stats().Errors > 0 }, "relay notices the outage")
		require.Positive(t, outboxPending(t, ctx, st))

		require.NoError(t, b.Embedded().Start(ctx))
		write(20)
		await.True(t, 30*time.Second, func() bool { return outboxPending(t, ctx, st) == 0 }, "outbox drained after restart")

		mu.Lock()
		defer mu.Unlock()
		t.Logf("%d objects written, %d during the outage; relay stats %+v", len(created), len(created)-40, r.Stats())
		require.EqualValues(t, len(created), streamState(t, ctx, b).LastSeq, "each row stored once")
		require.ElementsMatch(t, created, drainIDs(t, ctx, b, "databases"))
	})
}

// flakySource wraps a real store and fails a set number of reads or deletes first.
type flakySource struct {
	store.Store
	failReads   atomic.Int32
	failDeletes atomic.Int32
}

var errInjected = errors.New("injected failure")

func (f *flakySource) PendingOutbox(ctx context.Context, limit int) ([]*store.OutboxEntry, error) {
	if f.failReads.Add(-1) >= 0 {
		return nil, errInjected
	}
	return f.Store.PendingOutbox(ctx, limit)
}

func (f *flakySource) DeleteOutbox(ctx context.Context, ids []int64) error {
	if f.failDeletes.Add(-1) >= 0 {
		return errInjected
	}
	return f.Store.DeleteOutbox(ctx, ids)
}
