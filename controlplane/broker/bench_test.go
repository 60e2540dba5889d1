package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// benchObjects is how many distinct objects the outbox rows of a relay benchmark point at.
const benchObjects = 500

// fillOutbox writes n outbox rows spread over ids (one transaction each, outside the timer).
func fillOutbox(b *testing.B, ctx context.Context, st store.Store, kind string, ids []string, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for i := range n {
		require.NoError(b, st.Enqueue(ctx, kind, ids[i%len(ids)]))
	}
}

// BenchmarkRelay measures moving outbox rows from a real SQLite store to the stream, next to its two
// halves on their own (the store's read+delete, and raw async JetStream publishes) and to the simpler
// design that publishes synchronously, one entry at a time. Run with a fixed count, since every
// iteration needs an outbox row written beforehand:
//
//	go test -run '^$' -bench . -benchtime 5000x ./controlplane/broker/
func BenchmarkRelay(b *testing.B) {
	setup := func(b *testing.B) (*broker.Broker, store.Store, []string, context.Context) {
		br := startBroker(b, broker.Config{})
		st := openStore(b)
		ctx := testCtx(b)
		ids := createObjects(b, ctx, st, "gateways", benchObjects)
		drain(b, ctx, st)
		return br, st, ids, ctx
	}
	perSecond := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	}

	b.Run("relay", func(b *testing.B) {
		br, st, ids, ctx := setup(b)
		fillOutbox(b, ctx, st, "gateways", ids, b.N)
		r := broker.NewRelay(br, st, broker.RelayConfig{Logger: quietLogger()})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		b.ResetTimer()
		go func() { done <- r.Run(runCtx) }()
		for r.Stats().Published < uint64(b.N) {
			// no signal: the relay only counts; a fixed 1ms poll keeps the timed region tight (await backs off to 250ms)
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		perSecond(b)
		cancel()
		require.NoError(b, <-done)
		require.Zero(b, r.Stats().Errors)
	})

	b.Run("alternative=sync_publish_per_entry", func(b *testing.B) {
		br, st, ids, ctx := setup(b)
		fillOutbox(b, ctx, st, "gateways", ids, b.N)
		b.ResetTimer()
		for done := 0; done < b.N; {
			entries, err := st.PendingOutbox(ctx, 256)
			require.NoError(b, err)
			acked := make([]int64, 0, len(entries))
			for _, e := range entries {
				require.NoError(b, br.Publish(ctx, e.Kind, e.ObjectID, broker.MsgIDPrefix+strconv.FormatInt(e.ID, 10)))
				acked = append(acked, e.ID)
			}
			require.NoError(b, st.DeleteOutbox(ctx, acked))
			done += len(entries)
		}
		b.StopTimer()
		perSecond(b)
	})

	b.Run("baseline=store_read_delete_only", func(b *testing.B) {
		_, st, ids, ctx := setup(b)
		fillOutbox(b, ctx, st, "gateways", ids, b.N)
		b.ResetTimer()
		for done := 0; done < b.N; {
			entries, err := st.PendingOutbox(ctx, 256)
			require.NoError(b, err)
			acked := make([]int64, len(entries))
			for i, e := range entries {
				acked[i] = e.ID
			}
			require.NoError(b, st.DeleteOutbox(ctx, acked))
			done += len(entries)
		}
		b.StopTimer()
		perSecond(b)
	})

	b.Run("baseline=jetstream_publish_async_only", func(b *testing.B) {
		br := startBroker(b, broker.Config{})
		ctx := testCtx(b)
		js := br.JetStream()
		b.ResetTimer()
		for sent := 0; sent < b.N; {
			n := min(256, b.N-sent)
			futs := make([]jetstream.PubAckFuture, n)
			for i := range n {
				m := &nats.Msg{Subject: broker.Subject("gateways", fmt.Sprintf("g%d", (sent+i)%benchObjects)), Header: nats.Header{}}
				m.Header.Set(jetstream.MsgIDHeader, broker.MsgIDPrefix+strconv.Itoa(sent+i))
				f, err := js.PublishMsgAsync(m)
				require.NoError(b, err)
				futs[i] = f
			}
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					require.NoError(b, err)
				case <-ctx.Done():
					b.Fatal(ctx.Err())
				}
			}
			sent += n
		}
		b.StopTimer()
		perSecond(b)
	})
}

// drain empties the outbox (the rows written by createObjects).
func drain(b *testing.B, ctx context.Context, st store.Store) {
	b.Helper()
	for {
		entries, err := st.PendingOutbox(ctx, 1000)
		require.NoError(b, err)
		if len(entries) == 0 {
			return
		}
		ids := make([]int64, len(entries))
		for i, e := range entries {
			ids[i] = e.ID
		}
		require.NoError(b, st.DeleteOutbox(ctx, ids))
	}
}

// BenchmarkLock measures lock acquire+release next to raw KV operations on the same bucket:
//
//	go test -run '^$' -bench Lock ./controlplane/broker/
func BenchmarkLock(b *testing.B) {
	opsPerSecond := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "locks/s")
	}

	b.Run("acquire_release/same_key", func(b *testing.B) {
		br := startBroker(b, broker.Config{})
		ctx := testCtx(b)
		l, err := br.Locker(ctx, broker.LockConfig{})
		require.NoError(b, err)
		b.ResetTimer()
		for range b.N {
			lk, err := l.Acquire(ctx, "gateways.g1")
			require.NoError(b, err)
			require.NoError(b, lk.Release(ctx))
		}
		opsPerSecond(b)
	})

	b.Run("acquire_release/fresh_keys", func(b *testing.B) {
		br := startBroker(b, broker.Config{})
		ctx := testCtx(b)
		l, err := br.Locker(ctx, broker.LockConfig{})
		require.NoError(b, err)
		b.ResetTimer()
		for i := range b.N {
			lk, err := l.Acquire(ctx, "gateways.g"+strconv.Itoa(i))
			require.NoError(b, err)
			require.NoError(b, lk.Release(ctx))
		}
		opsPerSecond(b)
	})

	b.Run("refresh", func(b *testing.B) {
		br := startBroker(b, broker.Config{})
		ctx := testCtx(b)
		l, err := br.Locker(ctx, broker.LockConfig{})
		require.NoError(b, err)
		lk, err := l.Acquire(ctx, "gateways.g1")
		require.NoError(b, err)
		b.ResetTimer()
		for range b.N {
			require.NoError(b, lk.Refresh(ctx))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "refreshes/s")
	})

	b.Run("baseline=kv_put", func(b *testing.B) {
		br := startBroker(b, broker.Config{})
		ctx := testCtx(b)
		kv, err := br.JetStream().KeyValue(ctx, broker.LockBucket)
		require.NoError(b, err)
		b.ResetTimer()
		for range b.N {
			_, err := kv.Put(ctx, "gateways.g1", []byte("x"))
			require.NoError(b, err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
	})

	b.Run("baseline=kv_create_delete_no_ttl", func(b *testing.B) {
		br := startBroker(b, broker.Config{})
		ctx := testCtx(b)
		kv, err := br.JetStream().KeyValue(ctx, broker.LockBucket)
		require.NoError(b, err)
		b.ResetTimer()
		for range b.N {
			rev, err := kv.Create(ctx, "gateways.g1", []byte("x"))
			require.NoError(b, err)
			require.NoError(b, kv.Delete(ctx, "gateways.g1", jetstream.LastRevision(rev)))
		}
		opsPerSecond(b)
	})
}
