package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Lock errors. Test with errors.Is.
var (
	// ErrLocked: another holder has the lock.
	ErrLocked = errors.New("broker: lock held by another holder")
	// ErrLockLost: the lock expired or was taken over; the holder must stop working on the object.
	ErrLockLost = errors.New("broker: lock lost")
)

// LockConfig configures a Locker.
type LockConfig struct {
	// TTL is how long a lock lives without Refresh; a crashed holder blocks the object for at most this
	// long. The server counts whole seconds, so TTL is rounded up to a whole second, with a minimum of 1s.
	// Default 10s. Refresh well within it (e.g. every TTL/3).
	TTL time.Duration
	// Owner is stored as the lock's value, to show who holds it. Default: the connection name.
	Owner string
}

// Locker takes per-object locks in the lock bucket. Locks are keyed <kind>.<id> (see LockKey).
//
// Each lock carries its own TTL as a per-message TTL (Nats-TTL, nats-server 2.11+, enabled on the bucket by
// LimitMarkerTTL), rather than a bucket-wide max age: one bucket then serves lockers with different TTLs,
// and they still exclude each other. Acquire is KeyValue.Create with KeyTTL; Refresh republishes the key
// with the compare-and-set header and a fresh TTL (KeyValue.Update cannot set a TTL); Release purges with
// LastRevision, leaving a marker that expires after a second.
type Locker struct {
	b     *Broker
	kv    jetstream.KeyValue
	ttl   time.Duration
	owner []byte
}

// Lock is one held lock. Its methods are safe for concurrent use (a heartbeat may refresh while the
// work finishes and releases).
type Lock struct {
	l   *Locker
	key string

	mu       sync.Mutex
	revision uint64
}

// LockKey is the lock key of an object: <kind>.<id>.
func LockKey(kind, id string) string { return kind + "." + id }

// Locker returns a locker on the lock bucket.
func (b *Broker) Locker(ctx context.Context, cfg LockConfig) (*Locker, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	cfg.TTL = (cfg.TTL + time.Second - 1).Truncate(time.Second)
	if cfg.Owner == "" {
		cfg.Owner = b.cfg.Name
	}
	kv, err := b.js.KeyValue(ctx, LockBucket)
	if err != nil {
		return nil, fmt.Errorf("broker: lock bucket %s: %w", LockBucket, err)
	}
	return &Locker{b: b, kv: kv, ttl: cfg.TTL, owner: []byte(cfg.Owner)}, nil
}

// TTL is the locks' effective TTL (after rounding).
func (l *Locker) TTL() time.Duration { return l.ttl }

// Acquire takes the lock on key, or fails with ErrLocked when someone else holds it.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lock, error) {
	rev, err := l.kv.Create(ctx, key, l.owner, jetstream.KeyTTL(l.ttl))
	// A racing acquirer that lost shows up as a wrong-last-sequence error rather than ErrKeyExists when the
	// key held a release or expiry marker.
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, key)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: acquire lock %s: %w", key, err)
	}
	return &Lock{l: l, key: key, revision: rev}, nil
}

// Key is the locked key.
func (k *Lock) Key() string { return k.key }

// Revision is the lock's current revision in the bucket.
func (k *Lock) Revision() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.revision
}

// Refresh extends the lock by a full TTL. It fails with ErrLockLost when the lock expired or was taken
// over (its revision moved); the holder must then stop.
func (k *Lock) Refresh(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	// KeyValue.Update sends no TTL, and a message without one would never expire; so write the key's
	// subject directly with the same compare-and-set header plus a fresh TTL.
	msg := &nats.Msg{Subject: "$KV." + LockBucket + "." + k.key, Data: k.l.owner}
	ack, err := k.l.b.js.PublishMsg(ctx, msg,
		jetstream.WithExpectLastSequencePerSubject(k.revision),
		jetstream.WithMsgTTL(k.l.ttl),
	)
	if isWrongLastSequence(err) {
		return fmt.Errorf("%w: %s (revision %d)", ErrLockLost, k.key, k.revision)
	}
	if err != nil {
		return fmt.Errorf("broker: refresh lock %s: %w", k.key, err)
	}
	k.revision = ack.Sequence
	return nil
}

// Release gives the lock up. It deletes the key only if the lock's revision is still the latest, so it
// never removes someone else's lock: when the lock was lost, it returns ErrLockLost and changes nothing.
// The purge marker it leaves expires after a second.
func (k *Lock) Release(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := k.l.kv.Purge(ctx, k.key, jetstream.LastRevision(k.revision), jetstream.PurgeTTL(lockMarkerTTL))
	if isWrongLastSequence(err) {
		return fmt.Errorf("%w: %s (revision %d)", ErrLockLost, k.key, k.revision)
	}
	if err != nil {
		return fmt.Errorf("broker: release lock %s: %w", k.key, err)
	}
	return nil
}

func isWrongLastSequence(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
