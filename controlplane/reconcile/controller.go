package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// Config configures one controller. Zero values take the documented defaults.
type Config struct {
	// Workers is the number of reconciles run at once by this replica (default 4).
	Workers int
	// Timeout bounds one reconcile (default 5m).
	Timeout time.Duration
	// BackoffBase is the first retry delay after an error (default 1s); it doubles per consecutive error,
	// with ±20% jitter.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay (default 2m).
	BackoffMax time.Duration
	// LockRetry is how soon a message is redelivered when its object is locked by another worker
	// (default 250ms, with jitter).
	LockRetry time.Duration
	// Heartbeat is how often a running reconcile renews its lock and tells the broker it is in progress
	// (default 2s). It must be well under the lock TTL and the consumer's ack wait.
	Heartbeat time.Duration
	// ResyncInterval paces the passes over objects that are not reconciled (default 30s). Such a pass runs
	// only when a notification may have been lost (see Activity), one interval after the loss so that
	// the objects it left waiting have aged into it; while an object of this replica waits for a
	// dependency's notification with no timer (OnNotification); and while an owned object counts its
	// grace (see OwnerGrace). Otherwise no pass runs, at rest or after a burst of work, so the control
	// plane makes no calls of its own; the objects that wait are woken by notifications (a dependency's
	// status change, a watch event, their own requeue).
	ResyncInterval time.Duration
	// DriftInterval is how often every object, Ready ones included, is enqueued again (default 10h, like
	// controller-runtime's SyncPeriod). It is the safety net only: drift in the compute space is learned
	// from the clusters' watch events, which enqueue exactly the objects whose applied objects changed.
	DriftInterval time.Duration
	// ResyncRate is the most objects per second that a resync pass enqueues (default 5,000), through a
	// token bucket holding one second's worth (at most a listing page): a pass over a large estate never
	// floods the queue ahead of fresh work.
	ResyncRate float64
	// Activity is where the controllers that share it (those of one process should) learn that a
	// notification may have been lost, which calls for a pass over the objects that are not reconciled
	// (default: one of the controller's own).
	Activity *Activity
	// FailedRecheckInterval is how often objects Failed at their current generation are reconciled
	// again (default 5m), so that a world fixed outside QleetOS heals without a spec change.
	FailedRecheckInterval time.Duration
	// OwnerGrace is how long an object created for owners (Meta.Owners) outlives the last of them
	// before it is garbage-collected, when nothing depends on it (default 5m). Resync passes look.
	OwnerGrace time.Duration
	// ShutdownGrace is how long in-flight reconciles may run after Start's context ends (default 10s).
	ShutdownGrace time.Duration
	// LockTTL is the per-object lock TTL: how long a crashed worker blocks its object (default 10s).
	LockTTL time.Duration
	// Source names this controller in events (default "controller/<kind>").
	Source string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Metrics, when set, records reconcile durations, outcomes and queue depth.
	Metrics *Metrics
	// LockSpans, when set, gets a JSON line when a worker takes an object's lock and another when it has
	// finished reconciling and lets go, {"event":"acquired"|"released","key","holder","revision","at"}, so
	// that a checker (make chaos) can prove that no object was reconciled by two workers at once. Each line
	// is one Write: an *os.File opened with O_APPEND serves.
	LockSpans io.Writer
	// ListedMax bounds the objects a resync pass holds from its listing to hand to their reconciles
	// instead of a GET each (default 10,000; negative: none, every reconcile reads its object). A pass
	// that reaches it waits for held copies to be used, up to ListedTTL, then publishes without holding.
	// See listedCopies for when a copy is used.
	ListedMax int
	// ListedTTL is how long a listed copy may be used after its listing (default 30s, at most
	// ResyncInterval).
	ListedTTL time.Duration
	// Lookups are handed to every reconcile (LookupsFrom): its reads of other objects, forward and
	// reverse. Controllers of one process share one (default: new lookups over the controller's client).
	Lookups *Lookups
	// WakeOn names the kinds whose writes may end this controller's waits (WaitError.Kinds): the
	// controller follows their notifications from Start, on every replica.
	WakeOn []string
}

// logLockSpan writes one LockSpans line, if enabled.
func (c *Controller[S, T]) logLockSpan(event string, lock *broker.Lock) {
	if c.cfg.LockSpans == nil {
		return
	}
	line, _ := json.Marshal(map[string]any{"event": event, "key": lock.Key(), "holder": c.holder,
		"revision": lock.Revision(), "at": time.Now().UTC().Format(time.RFC3339Nano)})
	if _, err := c.cfg.LockSpans.Write(append(line, '\n')); err != nil {
		c.log.Warn("lock span log", "err", err)
	}
}

func (c *Config) applyDefaults(kind string) {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 2 * time.Minute
	}
	if c.LockRetry <= 0 {
		c.LockRetry = 250 * time.Millisecond
	}
	if c.LockTTL <= 0 {
		c.LockTTL = 10 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = min(2*time.Second, c.LockTTL/3)
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 30 * time.Second
	}
	if c.DriftInterval <= 0 {
		c.DriftInterval = DefaultDriftInterval
	}
	if c.ResyncRate <= 0 {
		c.ResyncRate = DefaultResyncRate
	}
	if c.Activity == nil {
		c.Activity = &Activity{}
	}
	if c.FailedRecheckInterval <= 0 {
		c.FailedRecheckInterval = 5 * time.Minute
	}
	if c.OwnerGrace <= 0 {
		c.OwnerGrace = 5 * time.Minute
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.Source == "" {
		c.Source = "controller/" + kind
	}
	if c.ListedMax == 0 {
		c.ListedMax = 10_000
	}
	if c.ListedTTL <= 0 {
		c.ListedTTL = min(30*time.Second, c.ResyncInterval)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Queue is what the runtime needs from the broker. *broker.Broker implements it.
type Queue interface {
	Consumer(ctx context.Context, kind string) (jetstream.Consumer, error)
	Publish(ctx context.Context, kind, id, msgID string) error
	Locker(ctx context.Context, cfg broker.LockConfig) (*broker.Locker, error)
}

// Controller runs one Reconciler for one kind.
type Controller[S any, T any] struct {
	cfg   Config
	res   *client.Resource[S, T]
	rec   Reconciler[S, T]
	queue Queue
	log   *slog.Logger

	mu       sync.Mutex
	failures map[string]int // consecutive errors per object id, for backoff
	// timers hold delayed requeues, one per object; see requeue.
	timers map[string]*requeueTimer
	// inflight holds the objects a worker of this replica is reconciling; dirty the notifications of
	// them that arrived meanwhile, which that worker reconciles once more (and acks) before it lets go
	// of the lock.
	inflight map[string]bool
	dirty    map[string][]jetstream.Msg
	// unowned holds, per object created for owners, since when none of them remains (see collect).
	unowned map[string]time.Time
	// notified holds the objects whose last reconcile here waits for a dependency's notification
	// (OnNotification), with no timer: the resync passes look at them until they are reconciled.
	notified map[string]bool
	// holder names this process and controller in LockSpans lines.
	holder string
	// listed holds the objects the resync passes listed, for their reconciles; nil when off.
	listed atomic.Pointer[listedCopies[S, T]]
	// pace bounds the rate at which resync passes enqueue objects.
	pace *pacer
	// sawFailed says that a reconcile since the last resync pass, or that pass, left objects Failed at
	// their generation, which the failed re-check looks at again.
	sawFailed atomic.Bool
	// wakes holds the objects waiting on writes to the kinds of Config.WakeOn; nil when none.
	wakes *kindWaits
	// startID is unique to this controller's run; see passMsgID.
	startID string
}

type requeueTimer struct {
	t  *time.Timer
	at time.Time
}

// New returns a controller that reconciles objects of res's kind with rec. The client behind res must
// hold a controller (or admin) token.
func New[S any, T any](queue Queue, res *client.Resource[S, T], rec Reconciler[S, T], cfg Config) *Controller[S, T] {
	cfg.applyDefaults(res.Kind())
	if cfg.Lookups == nil {
		cfg.Lookups = NewLookups(res.Client())
	}
	return &Controller[S, T]{
		cfg: cfg, res: res, rec: rec, queue: queue,
		log:      cfg.Logger.With("kind", res.Kind()),
		failures: map[string]int{},
		timers:   map[string]*requeueTimer{},
		inflight: map[string]bool{},
		dirty:    map[string][]jetstream.Msg{},
		unowned:  map[string]time.Time{},
		notified: map[string]bool{},
		holder:   fmt.Sprintf("pid %d %s", os.Getpid(), cfg.Source),
		pace:     newPacer(cfg.ResyncRate, min(cfg.ResyncRate, resyncPage)),
		wakes:    newKindWaits(cfg.WakeOn),
		startID:  fmt.Sprintf("%016x", rand.Uint64()),
	}
}

// Start runs the controller until ctx ends, then lets in-flight reconciles finish within ShutdownGrace.
func (c *Controller[S, T]) Start(ctx context.Context) error {
	kind := c.res.Kind()
	cons, err := c.queue.Consumer(ctx, kind)
	if err != nil {
		return fmt.Errorf("controller %s: consumer: %w", kind, err)
	}
	locker, err := c.queue.Locker(ctx, broker.LockConfig{TTL: c.cfg.LockTTL})
	if err != nil {
		return fmt.Errorf("controller %s: locker: %w", kind, err)
	}
	c.listed.Store(c.startListed(ctx))
	defer c.followWrites(ctx)()
	// Pull requests expire after 5s (heartbeat 2.5s) rather than the library's 30s (15s): when the NATS
	// server holding them dies, the replica notices within 5s and pulls again, instead of idling for
	// 30s (seen in make chaos).
	iter, err := cons.Messages(jetstream.PullMaxMessages(c.cfg.Workers*2), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return fmt.Errorf("controller %s: messages: %w", kind, err)
	}

	// Work runs on a context that outlives ctx by ShutdownGrace, so a shutdown does not cut reconciles short.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	msgs := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range msgs {
				c.handle(workCtx, locker, m)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.resync(ctx)
	}()
	if c.cfg.Metrics != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.cfg.Metrics.watchQueue(ctx, kind, cons)
		}()
	}

	go func() {
		<-ctx.Done()
		iter.Stop()
	}()
	c.log.Debug("controller started", "workers", c.cfg.Workers)
	for {
		m, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				break
			}
			c.log.Warn("fetch failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		select {
		case msgs <- m:
		case <-ctx.Done():
			_ = m.Nak()
		}
	}
	close(msgs)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.cfg.ShutdownGrace):
		cancelWork()
		<-done
	}
	c.stopTimers()
	c.log.Debug("controller stopped")
	return nil
}

// handle processes one notification: lock, fetch the latest object, reconcile, write status, ack.
func (c *Controller[S, T]) handle(ctx context.Context, locker *broker.Locker, m jetstream.Msg) {
	kind, id, err := broker.ParseSubject(m.Subject())
	if err != nil {
		c.log.Error("bad subject", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return
	}
	// A notification for an object this replica is reconciling right now is taken over by that worker,
	// which reconciles once more when it is done and only then acks it: no lock contention and no
	// redelivery delay, and if this process dies the notification is still unacked and redelivered.
	if !c.begin(id, m) {
		return
	}
	defer c.end(id)
	parent, link := messageTrace(m)
	lock, err := c.acquire(ctx, locker, parent, kind, id)
	if errors.Is(err, broker.ErrLocked) {
		_ = m.NakWithDelay(jitter(c.cfg.LockRetry))
		return
	}
	if err != nil {
		c.log.Debug("lock failed; redelivered later", "id", id, "err", err)
		_ = m.NakWithDelay(jitter(c.cfg.LockRetry * 4))
		return
	}
	c.logLockSpan("acquired", lock)
	lockRev := lock.Revision()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	stopBeat := c.heartbeat(rctx, cancel, lock, m, id)
	// A resync notification may come with the object its pass listed, when that is safe (listedCopies).
	listed, listedAt := c.listed.Load().take(id, m, lockRev)
	var links []trace.Link
	if link.IsValid() {
		links = append(links, trace.Link{SpanContext: link, Attributes: []attribute.KeyValue{linkRequeued}})
	}
	delay, ack, last := c.processTraced(rctx, parent, links, id, m, listed, listedAt)
	for rctx.Err() == nil {
		again := c.takeDirty(id)
		if len(again) == 0 {
			break
		}
		// The notifications that came in meanwhile are reconciled once more: that reconcile continues
		// the newest one's trace, and links to the reconcile that took them over and to the others.
		links = []trace.Link{{SpanContext: last, Attributes: []attribute.KeyValue{linkTakenOver}}}
		parent = trace.SpanContext{}
		for _, am := range again {
			p, l := messageTrace(am)
			if l.IsValid() {
				links = append(links, trace.Link{SpanContext: l, Attributes: []attribute.KeyValue{linkRequeued}})
			}
			if !p.IsValid() {
				continue
			}
			if parent.IsValid() {
				links = append(links, trace.Link{SpanContext: parent, Attributes: []attribute.KeyValue{linkCoalesced}})
			}
			parent = p
		}
		delay, ack, last = c.processTraced(rctx, parent, links, id, again[len(again)-1], nil, time.Time{})
		for _, am := range again {
			_ = am.Ack()
			if c.cfg.Metrics != nil {
				c.cfg.Metrics.delivered(kind)
			}
		}
	}
	stopBeat()
	c.logLockSpan("released", lock)
	if err := lock.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, broker.ErrLockLost) {
		c.log.Debug("unlock failed; the lock expires by itself", "id", id, "err", err)
	}
	_ = m.Ack()
	if !ack {
		c.requeue(trace.ContextWithSpanContext(ctx, last), id, delay)
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.delivered(kind)
	}
}

// Why a reconcile span links to another.
var (
	linkRequeued  = attribute.String("qleet.link", "requeued by")
	linkTakenOver = attribute.String("qleet.link", "taken over by")
	linkCoalesced = attribute.String("qleet.link", "coalesced with")
)

// messageTrace returns the span context a notification continues (its traceparent header: the outbox
// publish of the write that caused it) and the one it links to (a reconcile that requeued it).
func messageTrace(m jetstream.Msg) (parent, link trace.SpanContext) {
	h := m.Headers()
	if h == nil {
		return parent, link
	}
	return telemetry.SpanContext(h.Get(telemetry.TraceparentHeader)), telemetry.SpanContext(h.Get(telemetry.LinkHeader))
}

// acquire takes the object's lock, in a span of the notification's trace.
func (c *Controller[S, T]) acquire(ctx context.Context, locker *broker.Locker, parent trace.SpanContext, kind, id string) (*broker.Lock, error) {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := telemetry.Start(ctx, "lock acquire", trace.WithAttributes(telemetry.AttrKind.String(kind), telemetry.AttrObjectID.String(id)))
	lock, err := locker.Acquire(ctx, broker.LockKey(kind, id))
	c.cfg.Metrics.lockAttempt(kind, err)
	if errors.Is(err, broker.ErrLocked) {
		span.SetAttributes(attribute.Bool("qleet.lock.contended", true))
		span.End()
		return nil, err
	}
	telemetry.End(span, err)
	return lock, err
}

// processTraced runs process in a consumer span "reconcile <kind>", the child of parent (when valid),
// with links. It returns process's answer and the span's context.
func (c *Controller[S, T]) processTraced(ctx context.Context, parent trace.SpanContext, links []trace.Link, id string, m jetstream.Msg, listed *api.Object[S, T], listedAt time.Time) (time.Duration, bool, trace.SpanContext) {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	kind := c.res.Kind()
	attrs := []attribute.KeyValue{telemetry.AttrKind.String(kind), telemetry.AttrObjectID.String(id), attribute.String("qleet.source", c.cfg.Source)}
	if md, err := m.Metadata(); err == nil {
		attrs = append(attrs, attribute.Int64("messaging.nats.delivered", int64(md.NumDelivered)))
	}
	ctx, span := telemetry.Start(ctx, telemetry.ReconcileSpanPrefix+kind,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...), trace.WithAttributes(attrs...))
	defer span.End()
	if listed != nil {
		span.SetAttributes(attribute.Bool("qleet.listed", true))
	}
	delay, ack := c.process(ctx, id, listed, listedAt)
	if !ack {
		span.SetAttributes(attribute.Int64("qleet.requeue_after_ms", delay.Milliseconds()))
	}
	return delay, ack, span.SpanContext()
}

// begin marks id as being reconciled by this replica. When it already is, it hands m to that worker
// and returns false.
func (c *Controller[S, T]) begin(id string, m jetstream.Msg) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight[id] {
		c.dirty[id] = append(c.dirty[id], m)
		return false
	}
	c.inflight[id] = true
	return true
}

// takeDirty returns (and clears) the notifications of id handed over while it was being reconciled.
func (c *Controller[S, T]) takeDirty(id string) []jetstream.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := c.dirty[id]
	delete(c.dirty, id)
	return msgs
}

// handedOver returns the notifications of id handed over to its worker so far (a copy).
func (c *Controller[S, T]) handedOver(id string) []jetstream.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dirty[id])
}

// end clears id's in-flight mark. Notifications handed over after the last takeDirty are nak'd, for
// immediate redelivery.
func (c *Controller[S, T]) end(id string) {
	c.mu.Lock()
	left := c.dirty[id]
	delete(c.dirty, id)
	delete(c.inflight, id)
	c.mu.Unlock()
	for _, m := range left {
		_ = m.Nak()
	}
}

// requeue notifies the object again after delay. The message that brought it here is acked rather than
// nak'd with a delay: JetStream redelivers nak'd messages ahead of new ones, so objects that requeue often
// would starve fresh work (BenchmarkRequeueStarvation measures this). A re-published notification joins
// the back of the queue instead. One timer per object keeps the earliest deadline. A timer lost in a crash
// is covered by resync, which enqueues every object that is not reconciled.
func (c *Controller[S, T]) requeue(ctx context.Context, id string, delay time.Duration) {
	kind := c.res.Kind()
	at := time.Now().Add(delay)
	c.mu.Lock()
	defer c.mu.Unlock()
	if rt, ok := c.timers[id]; ok {
		if !rt.at.After(at) {
			return
		}
		rt.t.Stop()
	}
	rt := &requeueTimer{at: at}
	rt.t = time.AfterFunc(delay, func() {
		c.mu.Lock()
		if c.timers[id] == rt {
			delete(c.timers, id)
		}
		c.mu.Unlock()
		if err := c.queue.Publish(ctx, kind, id, ""); err != nil {
			c.cfg.Activity.Lost()
			c.log.Debug("requeue failed; a resync pass will pick the object up", "id", id, "err", err)
		}
	})
	c.timers[id] = rt
}

// cancelRequeue drops the delayed requeue of id, if one is waiting.
func (c *Controller[S, T]) cancelRequeue(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rt, ok := c.timers[id]; ok {
		rt.t.Stop()
		delete(c.timers, id)
	}
}

func (c *Controller[S, T]) stopTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, rt := range c.timers {
		rt.t.Stop()
		delete(c.timers, id)
	}
}

// heartbeat renews the lock and the ack deadlines of the message and of those handed over to this
// worker meanwhile (begin), until stopped. If the lock is lost, the reconcile's context is cancelled so
// that two workers never act on one object at once.
func (c *Controller[S, T]) heartbeat(ctx context.Context, cancel context.CancelFunc, lock *broker.Lock, m jetstream.Msg, id string) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_ = m.InProgress()
				for _, hm := range c.handedOver(id) {
					_ = hm.InProgress()
				}
				if err := lock.Refresh(ctx); err != nil {
					c.log.Warn("lock lost, cancelling reconcile", "id", id, "err", err)
					cancel()
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// process runs one reconcile of listed, or of the object read now when listed is nil, and writes its
// outcome. It returns whether to ack, or else the redelivery delay.
//
// The reconcile of a listed copy starts, for its reads of other objects (StartedAt), when the copy was
// held, after its page was listed: the copy is only used when no notification for the object came since
// the listing (listedCopies), so the reconcile is one of the object as listed, and any dependency change
// since then that concerns it notifies it again. Reads of the definition and runtime begun after the
// listing are then shared by the whole page, instead of two GETs per object (make bench, sim resync: 2
// of the 14.5 CPU-seconds of a 10,000-instance restart were those GETs).
func (c *Controller[S, T]) process(ctx context.Context, id string, listed *api.Object[S, T], listedAt time.Time) (delay time.Duration, ack bool) {
	started := time.Now()
	if listed != nil && !listedAt.IsZero() {
		started = listedAt
	}
	ctx = withLookups(context.WithValue(ctx, startedKey{}, started), c.cfg.Lookups)
	obj := listed
	if obj == nil {
		var err error
		obj, err = c.res.Get(ctx, id)
		if api.IsNotFound(err) {
			return 0, true
		}
		if err != nil {
			c.log.Debug("fetch failed; retried with backoff", "id", id, "err", err)
			return c.backoff(id), false
		}
	}
	before, _ := json.Marshal(obj.Status)
	writesSeen := c.wakes.begin(id)

	deleting := obj.DeletionRequestedAt != nil
	rctx, rec := withRecorder(ctx)
	rctx = withReconcileID(rctx, c.log, obj.ID, obj.Name, obj.Generation)
	start := time.Now()
	var res Result
	var err error
	if deleting {
		res, err = c.finalize(rctx, obj)
	} else {
		res, err = c.call(rctx, obj)
	}
	elapsed := time.Since(start)

	st := c.statusPtr(obj)
	out := c.outcome(obj, st, deleting, res, err)
	if st.Phase == api.PhaseFailed && st.ObservedGeneration == obj.Generation && !deleting {
		c.sawFailed.Store(true) // the slow re-check looks at it again
	}
	switch {
	case out.name == outcomeDone && out.ack:
		// Reconciled: a requeue that an earlier reconcile asked for would only find it done.
		c.cancelRequeue(id)
		c.setNotified(id, false)
	case out.name == outcomeWaiting && out.ack:
		// It waits for a dependency's notification, which reaches it only through a reference the
		// store knows; the passes look at it until it is reconciled (setNotified).
		c.setNotified(id, true)
	default:
		c.setNotified(id, false)
	}
	if out.name == outcomeWaiting && len(out.wakeOn) > 0 && !c.wakes.wait(id, out.wakeOn, writesSeen) {
		// A write it waits on came while it reconciled, perhaps after its reads: look again now.
		out.delay, out.ack = jitter(c.cfg.LockRetry), false
	}
	if stall := stalled(st, deleting, res); stall != "" {
		Eventf(rctx, api.EventWarning, api.ConditionStalled, "%s", stall)
	}
	scrub(&obj.Status, &out)
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.observe(c.res.Kind(), out.name, elapsed)
	}
	traceOutcome(ctx, obj.Generation, out)

	if deleting && out.name == outcomeDone {
		if err := c.res.Finalize(ctx, id); err != nil && !api.IsNotFound(err) {
			c.log.Debug("finalize failed; retried with backoff", "id", id, "err", err)
			return c.backoff(id), false
		}
		c.clearFailures(id)
		return 0, true
	}

	after, _ := json.Marshal(obj.Status)
	// Events first, so that whoever sees the new status also finds the event that explains it.
	c.recordEvents(ctx, obj, out, elapsed, rec.drain(), string(after) != string(before))
	if string(after) != string(before) {
		if _, err := c.res.UpdateStatus(ctx, id, obj.ResourceVersion, obj.Status); err != nil {
			if api.IsConflict(err) || api.IsNotFound(err) {
				// The object changed while we worked; a newer notification is queued or it is gone.
				return jitter(c.cfg.LockRetry), false
			}
			c.log.Debug("status write failed; retried with backoff", "id", id, "err", err)
			return c.backoff(id), false
		}
	}
	c.notify(ctx, obj.ID, res.Notify)
	return out.delay, out.ack
}

// notify asks for a reconcile of each object of Result.Notify, once the status they read is written.
// One that cannot be asked now (the API unreachable just after the status write went through) is asked
// again every notifyRetry, for up to a minute, without holding the worker.
func (c *Controller[S, T]) notify(ctx context.Context, from string, refs []api.ObjectRef) {
	for _, ref := range refs {
		ask := func(ctx context.Context) bool {
			err := c.res.Client().Raw(ref.Kind).RequestReconcile(ctx, ref.ID)
			return err == nil || api.IsNotFound(err)
		}
		if ask(ctx) {
			continue
		}
		go func() {
			// The reconcile's context ends with it; the retries end within a minute.
			ctx := context.WithoutCancel(ctx)
			for range 30 {
				time.Sleep(notifyRetry)
				if ask(ctx) {
					return
				}
			}
			c.log.Warn("could not notify an object of a status write for a minute; it learns of it at its next change or resync",
				"id", from, "kind", ref.Kind, "notified", ref.ID)
		}()
	}
}

// notifyRetry is how often notify asks again when the API did not answer.
const notifyRetry = 2 * time.Second

func (c *Controller[S, T]) statusPtr(obj *api.Object[S, T]) *api.Status {
	if a, ok := any(&obj.Status).(api.StatusAccessor); ok {
		return a.Common()
	}
	panic(fmt.Sprintf("reconcile: status type of %s does not embed api.Status", c.res.Kind()))
}

// call runs Reconcile with panic recovery.
func (c *Controller[S, T]) call(ctx context.Context, obj *api.Object[S, T]) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			loggerFrom(ctx).Error("reconcile panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("reconcile panicked: %v", p)
		}
	}()
	return c.rec.Reconcile(ctx, obj)
}

func (c *Controller[S, T]) finalize(ctx context.Context, obj *api.Object[S, T]) (res Result, err error) {
	f, ok := c.rec.(Finalizer[S, T])
	if !ok {
		return Result{}, nil
	}
	defer func() {
		if p := recover(); p != nil {
			loggerFrom(ctx).Error("finalize panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("finalize panicked: %v", p)
		}
	}()
	return f.Finalize(ctx, obj)
}

// traceOutcome records the reconcile's outcome on its span; errors and terminal failures mark it failed.
func traceOutcome(ctx context.Context, generation int64, out outcome) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("qleet.outcome", out.name), attribute.Int64("qleet.generation", generation))
	if out.name == outcomeError || out.name == outcomeTerminal {
		span.SetStatus(codes.Error, out.msg)
	}
}

const (
	outcomeDone     = "done"
	outcomeRequeue  = "requeue"
	outcomeWaiting  = "waiting"
	outcomeError    = "error"
	outcomeTerminal = "terminal"
)

type outcome struct {
	name   string
	reason string
	msg    string
	delay  time.Duration
	ack    bool
	// wakeOn are the kinds whose writes end a wait (WaitError.Kinds).
	wakeOn []string
}

// outcome turns the reconciler's answer into status fields and an ack decision.
func (c *Controller[S, T]) outcome(obj *api.Object[S, T], st *api.Status, deleting bool, res Result, err error) outcome {
	id := obj.ID
	st.ObservedGeneration = obj.Generation
	var we *WaitError
	switch {
	case err == nil && res.RequeueAfter == 0:
		c.clearFailures(id)
		if deleting {
			return outcome{name: outcomeDone, reason: "Deleted", ack: true}
		}
		if st.Phase != api.PhaseReady {
			now := time.Now().UTC().Truncate(time.Second)
			st.LastReconciledAt = &now
		}
		st.Phase = api.PhaseReady
		st.Message = ""
		st.SetCondition(api.Condition{Type: "Ready", Status: api.ConditionTrue, Reason: "Reconciled"})
		return outcome{name: outcomeDone, reason: "Reconciled", ack: res.Recheck <= 0, delay: res.Recheck}
	case err == nil:
		c.clearFailures(id)
		st.Phase = notReadyPhase(st.Phase, deleting)
		msg := st.Message
		if msg == "" {
			msg = "in progress"
		}
		st.SetCondition(api.Condition{Type: "Ready", Status: api.ConditionFalse, Reason: "InProgress", Message: msg})
		return outcome{name: outcomeRequeue, reason: "InProgress", msg: msg, delay: res.RequeueAfter}
	case errors.As(err, &we):
		c.clearFailures(id)
		since := time.Duration(0)
		for _, cond := range st.Conditions {
			if cond.Type == "Ready" && cond.WaitingOn == we.On && !cond.LastTransitionTime.IsZero() {
				since = time.Since(cond.LastTransitionTime).Truncate(time.Second)
			}
		}
		msg := we.message(since)
		st.Phase = notReadyPhase(st.Phase, deleting)
		st.Message = msg
		cond := api.Condition{Type: "Ready", Status: api.ConditionFalse, Reason: we.Reason, Message: msg, WaitingOn: we.On}
		if since == 0 {
			cond.LastTransitionTime = time.Now().UTC()
		}
		setWaitCondition(st, cond)
		after := we.After
		if after == 0 {
			after = 5 * time.Second
		}
		// The event leaves out how long it has waited, so that each pass of one wait is the same event,
		// counted on one record (the status says how long). A wait on notification sets no timer.
		return outcome{name: outcomeWaiting, reason: we.Reason, msg: we.Error(), delay: max(after, 0), ack: after < 0, wakeOn: we.Kinds}
	case IsTerminal(err):
		c.clearFailures(id)
		st.Phase = api.PhaseFailed
		if deleting {
			st.Phase = api.PhaseDeleting
		}
		st.Message = err.Error()
		st.SetCondition(api.Condition{Type: "Ready", Status: api.ConditionFalse, Reason: "Failed", Message: err.Error()})
		return outcome{name: outcomeTerminal, reason: "Failed", msg: err.Error(), ack: !deleting, delay: c.backoff(id)}
	default:
		st.Phase = notReadyPhase(st.Phase, deleting)
		st.Message = err.Error()
		st.SetCondition(api.Condition{Type: "Ready", Status: api.ConditionFalse, Reason: "Error", Message: err.Error()})
		return outcome{name: outcomeError, reason: "Error", msg: err.Error(), delay: c.backoff(id)}
	}
}

// stalled records res.Stalled as the Stalled condition, or clears the condition. It returns the message
// of a stall that is new, for an event.
func stalled(st *api.Status, deleting bool, res Result) string {
	if res.Stalled == nil || deleting {
		st.RemoveCondition(api.ConditionStalled)
		return ""
	}
	isNew := api.StalledCondition(st.ObservedGeneration, st) == nil
	st.SetCondition(api.Condition{Type: api.ConditionStalled, Status: api.ConditionTrue, Reason: res.Stalled.Reason, Message: res.Stalled.Message})
	st.Message = fmt.Sprintf("stalled (%s): %s", res.Stalled.Reason, res.Stalled.Message)
	if !isNew {
		return ""
	}
	return fmt.Sprintf("%s: %s", res.Stalled.Reason, res.Stalled.Message)
}

// setWaitCondition replaces the Ready condition, keeping its transition time while it waits on the same thing.
func setWaitCondition(st *api.Status, cond api.Condition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == cond.Type {
			if st.Conditions[i].WaitingOn == cond.WaitingOn && !st.Conditions[i].LastTransitionTime.IsZero() {
				cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = cond
			return
		}
	}
	st.Conditions = append(st.Conditions, cond)
}

func notReadyPhase(current api.Phase, deleting bool) api.Phase {
	if deleting {
		return api.PhaseDeleting
	}
	if current == api.PhasePending || current == "" || current == api.PhaseReady || current == api.PhaseFailed {
		return api.PhaseReconciling
	}
	return current
}

// recordEvents appends the outcome event (when something changed or went wrong) and the reconciler's own events.
func (c *Controller[S, T]) recordEvents(ctx context.Context, obj *api.Object[S, T], out outcome, elapsed time.Duration, extra []emitted, changed bool) {
	var evs []api.Event
	if changed || out.name == outcomeError || out.name == outcomeTerminal {
		typ := api.EventNormal
		if out.name == outcomeError || out.name == outcomeTerminal {
			typ = api.EventWarning
		}
		msg := out.msg
		if msg == "" {
			msg = "reconciled"
		}
		evs = append(evs, api.Event{Type: typ, Reason: out.reason, Message: msg, DurationMS: elapsed.Milliseconds()})
	}
	for _, e := range extra {
		evs = append(evs, api.Event{Type: e.typ, Reason: e.reason, Message: e.message})
	}
	for _, ev := range evs {
		ev.Generation = obj.Generation
		ev.Source = c.cfg.Source
		scrubEvent(&ev)
		if err := c.res.RecordEvent(ctx, obj.ID, ev); err != nil && !api.IsNotFound(err) {
			c.log.Debug("event write failed", "id", obj.ID, "err", err)
		}
	}
}

func (c *Controller[S, T]) backoff(id string) time.Duration {
	c.mu.Lock()
	n := c.failures[id]
	c.failures[id] = n + 1
	c.mu.Unlock()
	d := c.cfg.BackoffBase << min(n, 20)
	if d <= 0 || d > c.cfg.BackoffMax {
		d = c.cfg.BackoffMax
	}
	return jitter(d)
}

func (c *Controller[S, T]) clearFailures(id string) {
	c.mu.Lock()
	delete(c.failures, id)
	c.mu.Unlock()
}

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// resync is the safety net. When a notification may have been lost (Config.Activity: a requeue whose
// publish failed, a peer replica that left with requeues in its memory, a pass that failed), it enqueues
// the objects that are not reconciled one ResyncInterval later. While an object waits for a dependency's
// notification with no timer (a dependency it does not reference may never notify it), or an owned
// object counts its grace, it passes every ResyncInterval. Every DriftInterval (hours) it enqueues every object, and every
// FailedRecheckInterval the objects Failed at their current generation when the last pass saw any, so
// that a fixed world heals. Drift itself is learned from watch events, not from here. Otherwise no pass
// runs: a burst of work ends without one, since each of its objects has its notification (the outbox, a
// requeue, a watch event). Message ids de-duplicate across replicas; passes are paced (pacer).
func (c *Controller[S, T]) resync(ctx context.Context) {
	// A full pass at start makes the controller level-triggered across restarts, and covers whatever
	// was lost before it. Its notification ids are its own (startPassPrefix), so that replicas starting
	// together de-duplicate each other but a restart is not taken for a duplicate of the previous
	// process's last pass in the same bucket; nor of its start pass, for the objects not reconciled
	// (passMsgID).
	covered := time.Now()
	if _, err := c.resyncPass(ctx, startPassPrefix, true, true); err != nil && ctx.Err() == nil {
		c.cfg.Activity.Lost()
		c.log.Warn("initial resync failed", "err", err)
	}
	t := time.NewTicker(c.cfg.ResyncInterval)
	defer t.Stop()
	lastDrift, lastFailed := time.Now(), time.Now()
	var owedSince time.Time // when a loss after covered was first seen
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			drift := now.Sub(lastDrift) >= c.cfg.DriftInterval
			if drift {
				lastDrift = now
			}
			failed := c.sawFailed.Load() && now.Sub(lastFailed) >= c.cfg.FailedRecheckInterval
			if failed {
				lastFailed = now
			}
			// A loss is covered by a pass one interval after it: the objects it left waiting were written
			// before it, and the pass leaves out those written within the interval. Losses that keep
			// coming (a broker out of reach) postpone the pass, up to three intervals.
			lost := c.cfg.Activity.last()
			owed := lost.After(covered)
			if owed && owedSince.IsZero() {
				owedSince = now
			}
			owed = owed && (now.Sub(lost) >= c.cfg.ResyncInterval || now.Sub(owedSince) >= 3*c.cfg.ResyncInterval)
			if !drift && !failed && !owed && !c.graceCounting() && !c.waitingForNotification() {
				continue
			}
			if owed {
				covered, owedSince = lost, time.Time{}
			}
			if _, err := c.resyncPass(ctx, "resync-", drift, failed); err != nil && ctx.Err() == nil {
				c.cfg.Activity.Lost()
				c.log.Warn("resync failed; it runs again", "err", err)
			}
		}
	}
}

// Activity is what the controllers of one process share about notifications that may have been lost
// (Config.Activity). The zero value is ready to use.
type Activity struct{ lost atomic.Int64 } // unix nanoseconds of the latest loss

// Lost notes that a notification may have been lost just now: a publish failed, or a peer replica left
// with requeues held in its memory (broker.Presence tells). Each controller sharing the Activity then
// passes over its objects that are not reconciled, one ResyncInterval later.
func (a *Activity) Lost() { a.lost.Store(time.Now().UnixNano()) }

func (a *Activity) last() time.Time {
	n := a.lost.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// graceCounting reports whether an object created for owners is counting its grace, which only a
// resync pass ends.
func (c *Controller[S, T]) graceCounting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unowned) > 0
}

// setNotified records whether id waits for a notification (see notified).
func (c *Controller[S, T]) setNotified(id string, waits bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if waits {
		c.notified[id] = true
	} else {
		delete(c.notified, id)
	}
}

// waitingForNotification reports whether an object waits for a dependency's notification.
func (c *Controller[S, T]) waitingForNotification() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.notified) > 0
}

// keepNotified drops from notified the objects that a pass's complete listing of pending objects no
// longer holds: reconciled since, here or by another replica.
func (c *Controller[S, T]) keepNotified(pending map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.notified {
		if !pending[id] {
			delete(c.notified, id)
		}
	}
}

// Resync enqueues every object that is not reconciled, or every object when all is true (a drift
// check). Objects Failed at their current generation are left to the slower re-check. It returns how
// many it enqueued.
func (c *Controller[S, T]) Resync(ctx context.Context, all bool) (int, error) {
	return c.resyncPass(ctx, "resync-", all, false)
}

// resyncPass enqueues the objects that are not reconciled, the Ready ones too when ready is true, and
// those Failed at their current generation when failed is true. It lists a page at a time, holds the
// listed objects for their reconciles (see listedCopies), and publishes a page's notifications at once,
// with message ids <idPrefix><object id>-<bucket>.
//
// Without ready, the pass lists only what the store's indexes hold as pending (and, for garbage
// collection, the owned objects), so that it costs what is pending, not the size of the kind; and it
// leaves out the objects written within the last ResyncInterval (the start pass has ready): every write queues a
// notification (the outbox, or the reconcile's own requeue), so a pass that enqueued them again would
// only make a second wave of reconciles behind the first. A lost requeue ages past the interval, and
// the next pass catches it.
func (c *Controller[S, T]) resyncPass(ctx context.Context, idPrefix string, ready, failed bool) (int, error) {
	start := time.Now()
	bucket := start.UnixNano() / int64(c.cfg.ResyncInterval)
	owners := map[string]bool{} // owner id → alive, for this pass's collect
	if !ready {
		if err := c.collectOwned(ctx, owners); err != nil {
			return 0, err
		}
	}
	opts := client.ListOptions{Limit: resyncPage, Pending: !ready}
	listed := c.listed.Load()
	n := 0
	sawFailed := false
	defer func() { c.sawFailed.Store(sawFailed) }()
	pending := map[string]bool{} // with !ready: the ids the complete listing holds
	for {
		listed.waitRoom(ctx, resyncPage)
		mark := listed.beginListing()
		page, err := c.res.List(ctx, opts)
		if err != nil {
			listed.endListing()
			return n, err
		}
		var due []*api.Object[S, T]
		for i := range page.Items {
			obj := new(api.Object[S, T])
			*obj = page.Items[i] // a copy, so that a held object does not keep its page alive
			pending[obj.ID] = true
			// Without ready, collectOwned looked at the owned objects already.
			if ready {
				if err := c.collect(ctx, obj, owners); err != nil && ctx.Err() == nil {
					c.log.Debug("garbage collection check failed; the next pass looks again", "id", obj.ID, "err", err)
				}
			}
			st := client.CommonStatus(obj)
			deleting := obj.DeletionRequestedAt != nil
			if st.Phase == api.PhaseFailed && st.ObservedGeneration == obj.Generation && !deleting {
				sawFailed = true
			}
			if !failed && st.Phase == api.PhaseFailed && st.ObservedGeneration == obj.Generation && !deleting {
				continue
			}
			if !ready && api.Reconciled(obj.Generation, st) && !deleting {
				continue
			}
			if !ready && start.Sub(obj.UpdatedAt) < c.cfg.ResyncInterval {
				continue // its notification is in flight
			}
			due = append(due, obj)
		}
		tags := listed.hold(mark, due)
		listed.endListing()
		if err := c.pace.wait(ctx, len(due)); err != nil {
			for _, obj := range due {
				listed.drop(obj.ID, tags[obj.ID])
			}
			return n, err
		}
		sent, err := c.publishResync(ctx, due, idPrefix, bucket, listed, tags)
		n += sent
		if err != nil {
			return n, err
		}
		if page.Continue == "" {
			if !ready {
				c.keepNotified(pending)
			}
			return n, nil
		}
		opts.Continue = page.Continue
	}
}

// collectOwned runs the garbage-collection check over the objects created for owners, listed from the
// store's index of them: a pass without ready lists only pending objects, and an owned object may be
// Ready while its owners go.
func (c *Controller[S, T]) collectOwned(ctx context.Context, alive map[string]bool) error {
	opts := client.ListOptions{Limit: resyncPage, Owned: true}
	for {
		page, err := c.res.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range page.Items {
			obj := &page.Items[i]
			if err := c.collect(ctx, obj, alive); err != nil && ctx.Err() == nil {
				c.log.Debug("garbage collection check failed; the next pass looks again", "id", obj.ID, "err", err)
			}
		}
		if page.Continue == "" {
			return nil
		}
		opts.Continue = page.Continue
	}
}

// startPassPrefix prefixes the message ids of the pass a controller makes when it starts.
const startPassPrefix = "resync-start-"

// passMsgID is the message id of a pass's notification of obj: <idPrefix><object id>-<bucket>, so that
// the passes of replicas in one bucket de-duplicate each other. A start pass gives an object that is not
// reconciled an id of this run's own (startID). The process this one replaces may have died holding that
// object's requeue, or its notification unacked, and that process's start pass, in the same bucket when
// it ran less than a ResyncInterval ago, would otherwise have the restart's notification taken for a
// duplicate: the object would then wait for the peers' presence timeout and a pass after it, or for
// the stream's AckWait (make chaos saw 27 s). Reconciled objects lost nothing, and keep the shared id.
func (c *Controller[S, T]) passMsgID(idPrefix string, obj *api.Object[S, T], bucket int64) string {
	if idPrefix == startPassPrefix && (obj.DeletionRequestedAt != nil || !api.Reconciled(obj.Generation, client.CommonStatus(obj))) {
		return fmt.Sprintf("%s%s-%s-%d", idPrefix, c.startID, obj.ID, bucket)
	}
	return fmt.Sprintf("%s%s-%d", idPrefix, obj.ID, bucket)
}

// resyncPage is the page size of a resync pass's listing.
const resyncPage = 1000

// publishResync notifies objs, with their listed-copy tags, and returns how many were published. Message
// ids de-duplicate across replicas within a bucket. Through a broker it publishes them all at once and
// then waits for the acks.
func (c *Controller[S, T]) publishResync(ctx context.Context, objs []*api.Object[S, T], idPrefix string, bucket int64, listed *listedCopies[S, T], tags map[string]string) (int, error) {
	kind := c.res.Kind()
	q, ok := c.queue.(listingQueue)
	if !ok {
		for i, obj := range objs {
			if err := c.queue.Publish(ctx, kind, obj.ID, c.passMsgID(idPrefix, obj, bucket)); err != nil {
				return i, err
			}
		}
		return len(objs), nil
	}
	js := q.JetStream()
	futs := make([]jetstream.PubAckFuture, 0, len(objs))
	var firstErr error
	for _, obj := range objs {
		msg := &nats.Msg{Subject: broker.Subject(kind, obj.ID), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, c.passMsgID(idPrefix, obj, bucket))
		if tag := tags[obj.ID]; tag != "" {
			msg.Header.Set(ListedHeader, tag)
		}
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			firstErr = fmt.Errorf("publish %s: %w", msg.Subject, err)
			break
		}
		futs = append(futs, f)
	}
	n := 0
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for i, f := range futs {
		id := objs[i].ID
		select {
		case <-f.Ok():
			// A duplicate (another replica notified it in this bucket) keeps the copy: that replica's
			// message names the resource version it listed, and the copy serves it if it is the same.
			n++
		case err := <-f.Err():
			listed.drop(id, tags[id])
			if firstErr == nil {
				firstErr = fmt.Errorf("publish %s: %w", broker.Subject(kind, id), err)
			}
		case <-timeout.C:
			if firstErr == nil {
				firstErr = fmt.Errorf("publish: %d of %d acks missing after 30s", len(futs)-i, len(futs))
			}
			return n, firstErr
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	for _, obj := range objs[len(futs):] {
		listed.drop(obj.ID, tags[obj.ID])
	}
	return n, firstErr
}

// ListedStats returns the controller's counts of listed copies (zero before Start, or when off).
func (c *Controller[S, T]) ListedStats() ListedStats { return c.listed.Load().stats() }

// ReasonGarbageCollected is the event reason of an object deleted because its owners are gone.
const ReasonGarbageCollected = "GarbageCollected"

// collect garbage-collects an object created for owners once none of them remains (gone, or being
// deleted) and nothing depends on it, for OwnerGrace: the grace counts from when the last of both went. Objects without owners, which users declared, are never
// collected. The grace is counted in memory, so a restart starts it again: later, never sooner.
//
// alive caches, for one pass, whether each owner looked up exists and is not being deleted: objects
// created for the same owner share one read.
func (c *Controller[S, T]) collect(ctx context.Context, obj *api.Object[S, T], alive map[string]bool) error {
	if len(obj.Owners) == 0 || obj.DeletionRequestedAt != nil {
		c.setUnowned(obj.ID, false)
		return nil
	}
	for _, o := range obj.Owners {
		ok, seen := alive[o.ID]
		if !seen {
			owner, err := c.res.Client().Raw(o.Kind).Get(ctx, o.ID)
			if err != nil && !api.IsNotFound(err) {
				return fmt.Errorf("get owner %s %q: %w", o.Kind, o.ID, err)
			}
			ok = err == nil && owner.DeletionRequestedAt == nil
			alive[o.ID] = ok
		}
		if ok {
			c.setUnowned(obj.ID, false)
			return nil
		}
	}
	used, err := HasConsumers(ctx, c.res.Client(), obj.ID)
	if err != nil {
		return err
	}
	if used {
		c.setUnowned(obj.ID, false) // the grace counts from when the last consumer goes
		return nil
	}
	since := c.setUnowned(obj.ID, true)
	if time.Since(since) < c.cfg.OwnerGrace {
		return nil
	}
	err = c.res.Delete(ctx, obj.ID, client.DeleteOptions{})
	if api.IsConflict(err) {
		return nil // something came to depend on it
	}
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	c.setUnowned(obj.ID, false)
	ev := api.Event{Type: api.EventNormal, Reason: ReasonGarbageCollected, Source: c.cfg.Source, Generation: obj.Generation,
		Message: fmt.Sprintf("deleted: its owners are gone since %s and nothing depends on it", since.UTC().Format(time.RFC3339))}
	if err := c.res.RecordEvent(ctx, obj.ID, ev); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("record event: %w", err)
	}
	return nil
}

// HasConsumers reports whether any object references id (in its spec or its status): the consumers
// that keep an owned object alive.
func HasConsumers(ctx context.Context, cl *client.Client, id string) (bool, error) {
	n, err := CountConsumers(ctx, cl, id)
	return n > 0, err
}

// CountConsumers counts the objects of every kind that reference id.
func CountConsumers(ctx context.Context, cl *client.Client, id string) (int, error) {
	n := 0
	for _, ki := range api.Kinds() {
		c, err := cl.Raw(ki.Kind).Count(ctx, client.ListOptions{References: id})
		if err != nil {
			return 0, fmt.Errorf("count %s referencing it: %w", ki.Plural, err)
		}
		n += c
	}
	return n, nil
}

// setUnowned records whether id has lost its owners and returns since when.
func (c *Controller[S, T]) setUnowned(id string, unowned bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !unowned {
		delete(c.unowned, id)
		return time.Time{}
	}
	since, ok := c.unowned[id]
	if !ok {
		since = time.Now()
		c.unowned[id] = since
	}
	return since
}

type loggerKey struct{}

type startedKey struct{}

// StartedAt returns when the reconcile running in ctx started: after the notification that caused it
// was received, and before its object was read (or, for a copy its resync pass listed, when the copy
// was held after the listing: see process and listedCopies). A read of another object that began at or
// after this time sees every write committed before the notification (see workload's shared reads). It
// returns the zero time outside a reconcile.
func StartedAt(ctx context.Context) time.Time {
	t, _ := ctx.Value(startedKey{}).(time.Time)
	return t
}

// withReconcileID gives the reconcile a logger carrying the object and a fresh reconcile id.
func withReconcileID(ctx context.Context, base *slog.Logger, id, name string, generation int64) context.Context {
	l := base.With("id", id, "name", name, "generation", generation, "reconcile_id", uuid.NewString())
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		l = l.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
	return context.WithValue(ctx, loggerKey{}, l)
}

func loggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// Logger returns the logger of the reconcile running in ctx; it carries the kind, object id and a
// reconcile id.
func Logger(ctx context.Context) *slog.Logger { return loggerFrom(ctx) }
