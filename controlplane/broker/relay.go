package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// OutboxSource is the part of the store the relay reads from. store.Store satisfies it.
type OutboxSource interface {
	// PendingOutbox returns up to limit outbox entries, oldest first.
	PendingOutbox(ctx context.Context, limit int) ([]*store.OutboxEntry, error)
	// DeleteOutbox removes delivered outbox entries.
	DeleteOutbox(ctx context.Context, ids []int64) error
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	// BatchSize is the most outbox entries read and published at a time. Default 256.
	BatchSize int
	// PollInterval is how often the outbox is read when nothing calls Notify. Default 100ms.
	PollInterval time.Duration
	// PublishTimeout bounds the wait for the stream's acks of one batch. Default 10s.
	PublishTimeout time.Duration
	// MaxBackoff caps the wait after a failed read, publish or delete (it starts at PollInterval and
	// doubles). Default 5s.
	MaxBackoff time.Duration
	// Logger receives failures. Default slog.Default().
	Logger *slog.Logger
}

// RelayStats are the relay's counters since it was created.
type RelayStats struct {
	// Published counts outbox entries acknowledged by the stream, duplicates included: an entry whose
	// delete failed is published (and counted) again.
	Published uint64
	// Duplicates counts the published entries the stream had already seen (by message id): another
	// relay, or an earlier round whose delete failed, published them first.
	Duplicates uint64
	// Errors counts failed reads, publishes and deletes. Each is retried.
	Errors uint64
}

// Relay moves outbox entries from the store to the stream: it publishes each entry with Nats-Msg-Id
// outbox-<id>, waits for the stream's acks, and deletes only the acknowledged entries. Delivery is at
// least once; the stream's duplicate window makes a re-publish (after a crash between publish and
// delete, or by a second relay) a no-op, so several relays may run at once.
type Relay struct {
	b    *Broker
	src  OutboxSource
	cfg  RelayConfig
	wake chan struct{}

	published  atomic.Uint64
	duplicates atomic.Uint64
	errors     atomic.Uint64
}

// NewRelay returns a relay from src to b's stream. Run starts it.
func NewRelay(b *Broker, src OutboxSource, cfg RelayConfig) *Relay {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 10 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.MaxBackoff < cfg.PollInterval {
		cfg.MaxBackoff = cfg.PollInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{b: b, src: src, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Notify wakes the relay at once, e.g. right after a commit that wrote outbox rows. It never blocks.
func (r *Relay) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{Published: r.published.Load(), Duplicates: r.duplicates.Load(), Errors: r.errors.Load()}
}

// Run relays until ctx is done, and then returns nil. Failures are logged and retried with capped
// exponential backoff; an entry leaves the outbox only after the stream acknowledged it.
func (r *Relay) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		n, err := r.relayOnce(ctx)
		if ctx.Err() != nil {
			return nil //nolint:nilerr // shutting down: an error from a cancelled batch is expected, and the entries stay in the outbox
		}
		var wait time.Duration
		switch {
		case err != nil:
			r.errors.Add(1)
			backoff = min(max(2*backoff, r.cfg.PollInterval), r.cfg.MaxBackoff)
			wait = backoff
			r.cfg.Logger.WarnContext(ctx, "outbox relay failed, retrying", "error", err, "retry_in", wait)
		case n == r.cfg.BatchSize:
			// A full batch: more are likely waiting.
			backoff = 0
			continue
		default:
			backoff = 0
			wait = r.cfg.PollInterval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.wake:
			// After an error, a commit does not cut the backoff short.
			if err != nil {
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// relayOnce publishes one batch and deletes the acknowledged entries. It returns how many entries it
// read; an error means some were not relayed (they stay in the outbox).
func (r *Relay) relayOnce(ctx context.Context) (int, error) {
	// While disconnected, publishes would only pile up in the client's reconnect buffer; wait instead.
	if !r.b.nc.IsConnected() {
		return 0, fmt.Errorf("nats not connected (%s)", r.b.nc.Status())
	}
	entries, err := r.src.PendingOutbox(ctx, r.cfg.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	acked, pubErr := r.publish(ctx, entries)
	if len(acked) > 0 {
		if err := r.src.DeleteOutbox(ctx, acked); err != nil {
			// Published but still in the outbox: the next round publishes them again, and the stream
			// drops the duplicates.
			return len(entries), fmt.Errorf("delete %d relayed outbox entries: %w", len(acked), err)
		}
	}
	if pubErr != nil {
		return len(entries), pubErr
	}
	return len(entries), nil
}

// publish sends entries with async publishes and waits for their acks. It returns the ids of the
// entries to delete (acknowledged, or malformed), and the first failure.
func (r *Relay) publish(ctx context.Context, entries []*store.OutboxEntry) ([]int64, error) {
	type pending struct {
		id   int64
		fut  jetstream.PubAckFuture
		span trace.Span
	}
	futs := make([]pending, 0, len(entries))
	acked := make([]int64, 0, len(entries))
	var firstErr error
	for _, e := range entries {
		if err := errors.Join(validToken(e.Kind), validToken(e.ObjectID)); err != nil {
			// No subject can carry it, now or later; keeping it would wedge the relay. Drop it loudly.
			r.errors.Add(1)
			r.cfg.Logger.ErrorContext(ctx, "outbox relay dropped malformed entry",
				"entry_id", e.ID, "kind", e.Kind, "object_id", e.ObjectID, "error", err)
			acked = append(acked, e.ID)
			continue
		}
		msg := &nats.Msg{Subject: Subject(e.Kind, e.ObjectID), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, MsgIDPrefix+strconv.FormatInt(e.ID, 10))
		span := publishSpan(ctx, e, msg)
		fut, err := r.b.js.PublishMsgAsync(msg)
		if err != nil {
			firstErr = fmt.Errorf("publish outbox entry %d: %w", e.ID, err)
			telemetry.End(span, firstErr)
			break
		}
		futs = append(futs, pending{id: e.ID, fut: fut, span: span})
	}
	defer func() {
		for _, p := range futs {
			p.span.End() // a no-op for spans already ended
		}
	}()

	timer := time.NewTimer(r.cfg.PublishTimeout)
	defer timer.Stop()
	for i, p := range futs {
		select {
		case ack := <-p.fut.Ok():
			r.published.Add(1)
			if ack != nil && ack.Duplicate {
				r.duplicates.Add(1)
				p.span.SetAttributes(attribute.Bool("messaging.nats.duplicate", true))
			}
			p.span.End()
			acked = append(acked, p.id)
		case err := <-p.fut.Err():
			telemetry.End(p.span, err)
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox entry %d: %w", p.id, err)
			}
		case <-timer.C:
			if firstErr == nil {
				firstErr = fmt.Errorf("publish: %d of %d acks missing after %s", len(futs)-i, len(futs), r.cfg.PublishTimeout)
			}
			return acked, firstErr
		case <-ctx.Done():
			return acked, ctx.Err()
		}
	}
	return acked, firstErr
}

// publishSpan continues the trace of the write that made e (when it was traced) with a producer span
// that lasts until the stream acknowledges the message, and puts that span's traceparent on msg, so
// that the reconcile it causes is its child. Untraced entries get a non-recording span.
func publishSpan(ctx context.Context, e *store.OutboxEntry, msg *nats.Msg) trace.Span {
	if e.TraceParent == "" {
		return trace.SpanFromContext(context.Background())
	}
	pctx := telemetry.ContextWithRemoteParent(ctx, e.TraceParent)
	pctx, span := telemetry.Start(pctx, "outbox publish "+e.Kind,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			telemetry.AttrKind.String(e.Kind),
			telemetry.AttrObjectID.String(e.ObjectID),
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", msg.Subject),
			attribute.Int64("qleet.outbox.id", e.ID),
			attribute.Float64("qleet.outbox.age_ms", float64(time.Since(e.CreatedAt).Microseconds())/1000),
		))
	if tp := telemetry.Traceparent(pctx); tp != "" {
		msg.Header.Set(telemetry.TraceparentHeader, tp)
	}
	return span
}
