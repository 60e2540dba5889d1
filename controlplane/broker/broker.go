// Package broker connects the control plane to NATS JetStream: an embedded nats-server storing in the
// data dir, or an external cluster given by URL. It owns the reconcile stream and its per-kind durable
// consumers, the outbox relay that moves committed outbox rows from the store to the stream, and the
// per-object locks kept in a KV bucket.
//
// Stream QLEET takes subjects qleet.reconcile.<kind>.<id>. It is a work queue (a message is removed once
// acknowledged) that keeps at most one message per subject, the newest (MaxMsgsPerSubject 1, DiscardOld).
// Verified against nats-server 2.15 (coalesce_test.go):
//   - several pending notifications for one object coalesce into one, the newest;
//   - a notification published while an older one is delivered but unacknowledged replaces it: the new
//     one is delivered at once (possibly to another replica, while the first reconcile still runs, so the
//     per-object lock must serialise them), the old one's ack slot is freed at once, and acking the old
//     one later succeeds and leaves the new one alone; so a change made during a reconcile is never lost;
//   - NakWithDelay requeues as usual, and a notification published during the delay is delivered at once,
//     while the delayed one never comes back;
//   - redelivery after AckWait, and pending messages across a server restart, work as usual.
//
// DiscardNewPerSubject (keep the oldest, refuse newer) was rejected: it would refuse the notification of
// a change made while the older message is in flight, and that change would then be lost.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// Names fixed by the NATS contract.
const (
	// StreamName is the JetStream stream that carries reconcile notifications.
	StreamName = "QLEET"
	// SubjectPrefix prefixes every reconcile subject: qleet.reconcile.<kind>.<id>.
	SubjectPrefix = "qleet.reconcile."
	// LockBucket is the KV bucket that holds per-object locks, keyed <kind>.<id>.
	LockBucket = "qleet_locks"
	// ConsumerPrefix prefixes each kind's durable consumer: reconcile_<kind>.
	ConsumerPrefix = "reconcile_"
	// MsgIDPrefix prefixes the Nats-Msg-Id of a message published from an outbox row: outbox-<id>.
	MsgIDPrefix = "outbox-"
)

// lockMarkerTTL is how long the lock bucket keeps the marker the server writes when a key expires.
const lockMarkerTTL = time.Second

// Config configures the connection to NATS and the stream settings.
type Config struct {
	// URL of an external NATS server or cluster (comma-separated). Empty: start an embedded server.
	URL string
	// DataDir is the JetStream store dir of the embedded server. Required when URL is empty.
	DataDir string
	// Host is the embedded server's listen address. Default "127.0.0.1".
	Host string
	// Port is the embedded server's client port. Default (0 or -1): random, kept across restarts.
	Port int
	// Replicas of the stream and lock bucket on an external cluster (3 on a three-node cluster survives
	// the loss of any one node). Default (0): an existing stream or bucket keeps its count, and a new one
	// gets 1, so that a process started without it never scales a replicated stream down. The embedded
	// server always uses 1.
	Replicas int
	// DuplicateWindow is how long the stream remembers message ids for de-duplication. Default 2m.
	DuplicateWindow time.Duration
	// AckWait is how long a consumer waits for an ack, or a sign of progress, before redelivering.
	// Default 10s. A running reconcile signals progress every few seconds (reconcile.Config.Heartbeat),
	// so only a notification held by a replica that died, or delivered to one that had just died, waits
	// this long: make chaos saw that wait (then 30s) decide how soon a killed controller's work went on.
	AckWait time.Duration
	// MaxAckPending bounds the unacknowledged messages of each consumer. Default 1000.
	MaxAckPending int
	// RequestTimeout bounds one attempt of a JetStream request made by the broker's calls (locks,
	// consumer create and info). Default 4s. A request that reaches a stream or consumer while it elects
	// a new leader (its leader's node stopped) gets no reply at all, so a call retries an attempt that
	// timed out, until its ctx ends, instead of waiting out the whole ctx on the lost one (see answered).
	RequestTimeout time.Duration
	// Name is the client connection name. Default "qleet".
	Name string
	// Logger receives connection events. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.URL == "" && c.DataDir == "" {
		return errors.New("broker: DataDir is required for the embedded server")
	}
	if c.Replicas < 0 || c.URL == "" {
		c.Replicas = 1
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.AckWait <= 0 {
		c.AckWait = 10 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 1000
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 4 * time.Second
	}
	if c.Name == "" {
		c.Name = "qleet"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// startWait bounds how long Start retries the creation of the stream and the lock bucket while
// JetStream does not answer.
const startWait = time.Minute

// Broker is a connection to NATS JetStream with the reconcile stream and lock bucket ensured.
type Broker struct {
	cfg      Config
	embedded *EmbeddedServer
	nc       *nats.Conn
	js       jetstream.JetStream
}

// Start starts the embedded server (when cfg.URL is empty) or connects to cfg.URL, and creates or
// updates the stream QLEET and the lock bucket. The connection reconnects forever, so the broker
// survives a NATS restart; calls made while disconnected fail (or time out with their ctx) and are
// retried by their callers.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg}
	url := cfg.URL
	if url == "" {
		es, err := NewEmbeddedServer(EmbeddedConfig{DataDir: cfg.DataDir, Host: cfg.Host, Port: cfg.Port})
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		if err := es.Start(ctx); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		b.embedded = es
		url = es.ClientURL()
	}
	log := cfg.Logger
	nc, err := nats.Connect(url,
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", "error", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
	)
	if err != nil {
		b.stopEmbedded()
		return nil, fmt.Errorf("broker: connect %s: %w", url, err)
	}
	b.nc = nc
	js, err := jetstream.New(nc,
		jetstream.WithDefaultTimeout(cfg.RequestTimeout),
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(10*time.Second),
	)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("broker: jetstream: %w", err)
	}
	b.js = js
	// A JetStream that does not answer for now (a server of the cluster restarting, a leader being
	// elected) is waited for, up to startWait, rather than ending the process's start: a controller
	// started again while another part is down would otherwise exit (make chaos saw it).
	if err := b.answered(ctx, time.Now().Add(startWait), b.ensure); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Broker) ensure(ctx context.Context) error {
	streamReplicas, bucketReplicas := b.cfg.Replicas, b.cfg.Replicas
	if b.cfg.Replicas == 0 {
		// Keep what exists; only a stream or bucket that is surely missing is created with 1.
		streamReplicas, bucketReplicas = 1, 1
		s, err := b.js.Stream(ctx, StreamName)
		switch {
		case err == nil:
			streamReplicas = s.CachedInfo().Config.Replicas
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return fmt.Errorf("broker: look up stream %s: %w", StreamName, err)
		}
		kv, err := b.js.KeyValue(ctx, LockBucket)
		switch {
		case err == nil:
			st, err := kv.Status(ctx)
			if err != nil {
				return fmt.Errorf("broker: look up lock bucket %s: %w", LockBucket, err)
			}
			if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
				bucketReplicas = bs.StreamInfo().Config.Replicas
			}
		case !errors.Is(err, jetstream.ErrBucketNotFound):
			return fmt.Errorf("broker: look up lock bucket %s: %w", LockBucket, err)
		}
	}
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "QleetOS reconcile notifications, one pending per object",
		Subjects:    []string{SubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		// One message per object subject: a newer notification replaces an older one, pending or in flight.
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		Duplicates:        b.cfg.DuplicateWindow,
		Replicas:          max(streamReplicas, 1),
	})
	if err != nil {
		return fmt.Errorf("broker: ensure stream %s: %w", StreamName, err)
	}
	_, err = b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      LockBucket,
		Description: "QleetOS per-object reconcile locks, key <kind>.<id>, per-key TTL",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(bucketReplicas, 1),
		// Enables per-key TTL (Nats-TTL, nats-server 2.11+); each lock carries its own TTL.
		LimitMarkerTTL: lockMarkerTTL,
	})
	if err != nil {
		return fmt.Errorf("broker: ensure lock bucket %s: %w", LockBucket, err)
	}
	return nil
}

// Close closes the connection (without draining: in-flight messages are redelivered after AckWait) and
// stops the embedded server, if any.
func (b *Broker) Close() {
	if b.nc != nil {
		b.nc.Close()
	}
	b.stopEmbedded()
}

func (b *Broker) stopEmbedded() {
	if b.embedded != nil {
		b.embedded.Stop()
	}
}

// ClientURL is the URL other processes (controllers, tests) use to reach this broker's NATS.
func (b *Broker) ClientURL() string {
	if b.embedded != nil {
		return b.embedded.ClientURL()
	}
	return b.cfg.URL
}

// Conn is the underlying NATS connection.
func (b *Broker) Conn() *nats.Conn { return b.nc }

// JetStream is the JetStream context on Conn.
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// Embedded is the embedded server, or nil when connected to an external URL. Stopping and starting it
// simulates a broker outage; the connection reconnects on its own.
func (b *Broker) Embedded() *EmbeddedServer { return b.embedded }

// Subject is the reconcile subject of one object: qleet.reconcile.<kind>.<id>.
func Subject(kind, id string) string {
	return SubjectPrefix + kind + "." + id
}

// ParseSubject splits a reconcile subject into kind and id.
func ParseSubject(subject string) (kind, id string, err error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		return "", "", fmt.Errorf("broker: subject %q lacks prefix %q", subject, SubjectPrefix)
	}
	kind, id, ok = strings.Cut(rest, ".")
	if !ok || validToken(kind) != nil || validToken(id) != nil {
		return "", "", fmt.Errorf("broker: subject %q is not %s<kind>.<id>", subject, SubjectPrefix)
	}
	return kind, id, nil
}

// validToken checks that s is usable as one subject token (and in consumer names and KV keys).
func validToken(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if i := strings.IndexAny(s, ".*> \t\r\n"); i >= 0 {
		return fmt.Errorf("contains %q", s[i])
	}
	return nil
}

// ConsumerName is the durable consumer name of a kind: reconcile_<kind>.
func ConsumerName(kind string) string { return ConsumerPrefix + kind }

// Consumer creates or updates the durable pull consumer of a kind (reconcile_<kind>, filtered to
// qleet.reconcile.<kind>.>). Any number of processes may consume from it; each message goes to one.
// The consumer's Info retries a request that got no reply, like the broker's own calls (see answered).
func (b *Broker) Consumer(ctx context.Context, kind string) (jetstream.Consumer, error) {
	if err := validToken(kind); err != nil {
		return nil, fmt.Errorf("broker: kind %q: %w", kind, err)
	}
	var c jetstream.Consumer
	err := b.answered(ctx, time.Time{}, func(actx context.Context) error {
		var err error
		c, err = b.js.CreateOrUpdateConsumer(actx, StreamName, jetstream.ConsumerConfig{
			Durable:       ConsumerName(kind),
			Description:   "reconcile " + kind,
			FilterSubject: SubjectPrefix + kind + ".>",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       b.cfg.AckWait,
			MaxDeliver:    -1,
			MaxAckPending: b.cfg.MaxAckPending,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("broker: consumer %s: %w", ConsumerName(kind), err)
	}
	return &consumer{Consumer: c, b: b}, nil
}

// consumer is a durable consumer whose Info retries a request that got no reply.
type consumer struct {
	jetstream.Consumer
	b *Broker
}

// Info returns the consumer's state from its leader. While the consumer elects a leader, a request gets
// no reply; Info then asks again, every RequestTimeout, until ctx ends (a ctx without a deadline gets
// one attempt).
func (c *consumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	var info *jetstream.ConsumerInfo
	err := c.b.answered(ctx, time.Time{}, func(actx context.Context) error {
		var err error
		info, err = c.Consumer.Info(actx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("broker: consumer info: %w", err)
	}
	return info, nil
}

// answered runs attempt until it gets an answer, each attempt bounded by RequestTimeout. An attempt
// that got none (see unanswered) is tried again after a short pause while ctx lasts and before limit
// (the earlier of the two; limit zero: ctx's deadline, and one attempt when ctx has none). At least one
// attempt runs, even when limit has passed.
//
// Why: nats-server drops a JetStream API request that reaches a replicated stream or consumer while it
// elects a leader (the replicas that are not leader stay silent: jsConsumerInfoRequest and friends
// "bail" once the group had a leader), and a publish to a stream with no leader gets no ack. The
// client's request then waits for its context's deadline, however far off, although the new leader is
// elected within a second or two. In TestCluster this turned the loss of the consumer's leader into a
// 40 s stall: the consumer info sent right after the fetch saw "server shutdown" was dropped and waited
// out the round's 45 s context, while fresh requests were answered after about one second.
func (b *Broker) answered(ctx context.Context, limit time.Time, attempt func(context.Context) error) error {
	if d, ok := ctx.Deadline(); ok && (limit.IsZero() || d.Before(limit)) {
		limit = d
	}
	if limit.IsZero() {
		limit = time.Now().Add(b.cfg.RequestTimeout)
	}
	pause := 50 * time.Millisecond
	for {
		end := time.Now().Add(b.cfg.RequestTimeout)
		if limit.After(time.Now()) && limit.Before(end) {
			end = limit
		}
		actx, cancel := context.WithDeadline(ctx, end)
		err := attempt(actx)
		cancel()
		if err == nil || !Unanswered(err) || ctx.Err() != nil || time.Until(limit) < pause {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// Unanswered reports whether err means that a request to the broker got no answer: it timed out, found
// no responder, or JetStream said it is not available for now (no leader yet). Such a request may or may
// not have taken effect, and asking again later may succeed.
func Unanswered(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503
}

// Publish notifies the controller of kind that object id needs reconciling. A non-empty msgID is sent as
// Nats-Msg-Id, so that publishing it again within the duplicate window is a no-op. When ctx holds a
// span (a reconcile asking for another later), the notification carries it in telemetry.LinkHeader:
// the next reconcile starts a trace of its own that links to it.
func (b *Broker) Publish(ctx context.Context, kind, id, msgID string) error {
	if err := validToken(kind); err != nil {
		return fmt.Errorf("broker: kind %q: %w", kind, err)
	}
	if err := validToken(id); err != nil {
		return fmt.Errorf("broker: id %q: %w", id, err)
	}
	msg := &nats.Msg{Subject: Subject(kind, id), Header: nats.Header{}}
	if msgID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if tp := telemetry.Traceparent(ctx); tp != "" {
		msg.Header.Set(telemetry.LinkHeader, tp)
	}
	if _, err := b.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("broker: publish %s: %w", Subject(kind, id), err)
	}
	return nil
}
