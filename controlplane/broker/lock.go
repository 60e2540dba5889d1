package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	// Owner is stored as the lock's value, followed by a space and a token of the lock's own, to show
	// who holds it. Default: the connection name.
	Owner string
}

// Locker takes per-object locks in the lock bucket. Locks are keyed <kind>.<id> (see LockKey).
//
// Each lock carries its own TTL as a per-message TTL (Nats-TTL, nats-server 2.11+, enabled on the bucket by
// LimitMarkerTTL), rather than a bucket-wide max age: one bucket then serves lockers with different TTLs,
// and they still exclude each other. Acquire is KeyValue.Create with KeyTTL; Refresh republishes the key
// with the compare-and-set header and a fresh TTL (KeyValue.Update cannot set a TTL); Release purges with
// LastRevision, leaving a marker that expires after a second.
//
// A write whose reply is lost may still have been stored: that happens when the bucket's leader stops,
// and the broker's calls retry such a request (see Broker.answered). So each lock's value is its Owner
// followed by a token of its own, and a lock that finds the key moved on after an unanswered write reads
// the key back from the bucket's leader: if it holds the lock's own value, the write landed and the lock
// carries on from there, rather than reporting ErrLocked or ErrLockLost for a lock it holds.
type Locker struct {
	b     *Broker
	kv    jetstream.KeyValue
	ttl   time.Duration
	owner string
}

// Lock is one held lock. Its methods are safe for concurrent use (a heartbeat may refresh while the
// work finishes and releases).
type Lock struct {
	l     *Locker
	key   string
	value []byte

	mu       sync.Mutex
	revision uint64
	// expires is when the lock expires at the latest, as far as this holder knows: the TTL counted from
	// when the write that set revision was sent.
	expires time.Time
	// unansweredSince is when the first write since revision that got no reply was sent (zero: none). It
	// may have been stored, and then the key's latest revision is the lock's own.
	unansweredSince time.Time
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
	var kv jetstream.KeyValue
	err := b.answered(ctx, time.Time{}, func(actx context.Context) error {
		var err error
		kv, err = b.js.KeyValue(actx, LockBucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("broker: lock bucket %s: %w", LockBucket, err)
	}
	return &Locker{b: b, kv: kv, ttl: cfg.TTL, owner: cfg.Owner}, nil
}

// TTL is the locks' effective TTL (after rounding).
func (l *Locker) TTL() time.Duration { return l.ttl }

// Acquire takes the lock on key, or fails with ErrLocked when someone else holds it. A request that gets
// no reply is retried until ctx ends, or for one TTL when ctx has no deadline.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lock, error) {
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	k := &Lock{l: l, key: key, value: []byte(l.owner + " " + hex.EncodeToString(token))}
	k.mu.Lock()
	defer k.mu.Unlock()
	var sent time.Time
	err := l.b.answered(ctx, time.Now().Add(l.ttl), func(actx context.Context) error {
		sent = time.Now()
		rev, err := l.kv.Create(actx, key, k.value, jetstream.KeyTTL(l.ttl))
		switch {
		case err == nil:
			k.written(rev, sent)
		case Unanswered(err):
			k.unanswered(sent)
		case errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err):
			// A racing acquirer that lost shows up as a wrong-last-sequence error rather than
			// ErrKeyExists when the key held a release or expiry marker; or an earlier attempt took it.
			if !k.unansweredSince.IsZero() {
				if ours, rerr := k.landed(actx); rerr != nil {
					return rerr
				} else if ours {
					return nil
				}
			}
			return fmt.Errorf("%w: %s", ErrLocked, key)
		}
		return err
	})
	if errors.Is(err, ErrLocked) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("broker: acquire lock %s: %w", key, err)
	}
	return k, nil
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
// over (its revision moved); the holder must then stop. A request that gets no reply is retried until
// ctx ends or the lock expires, whichever comes first; when the lock may have expired meanwhile, the
// answer is ErrLockLost.
func (k *Lock) Refresh(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	// KeyValue.Update sends no TTL, and a message without one would never expire; so write the key's
	// subject directly with the same compare-and-set header plus a fresh TTL.
	err := k.l.b.answered(ctx, k.expires, func(actx context.Context) error {
		for {
			sent := time.Now()
			msg := &nats.Msg{Subject: k.subject(), Data: k.value}
			ack, err := k.l.b.js.PublishMsg(actx, msg,
				jetstream.WithExpectLastSequencePerSubject(k.revision),
				jetstream.WithMsgTTL(k.l.ttl),
			)
			switch {
			case err == nil:
				k.written(ack.Sequence, sent)
				return nil
			case Unanswered(err):
				k.unanswered(sent)
				return err
			case !isWrongLastSequence(err):
				return err
			}
			if k.unansweredSince.IsZero() {
				return fmt.Errorf("%w: %s (revision %d)", ErrLockLost, k.key, k.revision)
			}
			// An earlier write may have landed: carry on from it, and refresh again.
			ours, err := k.landed(actx)
			if err != nil {
				return err
			}
			if !ours {
				return fmt.Errorf("%w: %s (revision %d)", ErrLockLost, k.key, k.revision)
			}
		}
	})
	if errors.Is(err, ErrLockLost) {
		return err
	}
	if err != nil {
		if time.Now().After(k.expires) {
			return fmt.Errorf("%w: %s: no answer before it expired: %w", ErrLockLost, k.key, err)
		}
		return fmt.Errorf("broker: refresh lock %s: %w", k.key, err)
	}
	return nil
}

// Release gives the lock up. It deletes the key only if the lock's revision is still the latest, so it
// never removes someone else's lock: when the lock was lost, it returns ErrLockLost and changes nothing.
// The purge marker it leaves expires after a second. A request that gets no reply is retried until ctx
// ends, or until the lock expires when ctx has no deadline.
func (k *Lock) Release(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	limit := k.expires
	if _, ok := ctx.Deadline(); ok {
		limit = time.Time{}
	}
	err := k.l.b.answered(ctx, limit, func(actx context.Context) error {
		for {
			sent := time.Now()
			err := k.l.kv.Purge(actx, k.key, jetstream.LastRevision(k.revision), jetstream.PurgeTTL(lockMarkerTTL))
			switch {
			case err == nil:
				return nil
			case Unanswered(err):
				k.unanswered(sent)
				return err
			case !isWrongLastSequence(err):
				return err
			}
			if k.unansweredSince.IsZero() {
				return fmt.Errorf("%w: %s (revision %d)", ErrLockLost, k.key, k.revision)
			}
			ours, err := k.landed(actx)
			if err != nil {
				return err
			}
			if ours {
				continue // a refresh landed after all; purge its revision
			}
			// The key moved on from a revision of this lock that had not expired: only this lock's own
			// purge could have done that (anyone else may write it only once it is gone).
			if time.Now().Before(k.expires) {
				return nil
			}
			return fmt.Errorf("%w: %s (revision %d)", ErrLockLost, k.key, k.revision)
		}
	})
	if errors.Is(err, ErrLockLost) {
		return err
	}
	if err != nil {
		return fmt.Errorf("broker: release lock %s: %w", k.key, err)
	}
	return nil
}

func (k *Lock) subject() string { return "$KV." + LockBucket + "." + k.key }

// written records a write of this lock acknowledged at revision rev, sent at sent.
func (k *Lock) written(rev uint64, sent time.Time) {
	k.revision = rev
	k.expires = sent.Add(k.l.ttl)
	k.unansweredSince = time.Time{}
}

// unanswered records a write sent at sent that got no reply.
func (k *Lock) unanswered(sent time.Time) {
	if k.unansweredSince.IsZero() {
		k.unansweredSince = sent
	}
}

// landed reads the key's latest message from the bucket's leader after a compare-and-set failed
// following an unanswered write. When it is this lock's own value at a revision the lock did not know,
// that write was stored: landed adopts its revision (with the expiry counted from the first unanswered
// write, the earliest it can have been stored) and reports true.
func (k *Lock) landed(ctx context.Context) (bool, error) {
	// Not KeyValue.Get: the bucket allows direct gets, which any replica answers, possibly one that
	// lags. A stream message get is answered by the leader alone.
	req, err := json.Marshal(map[string]string{"last_by_subj": k.subject()})
	if err != nil {
		return false, fmt.Errorf("read back: %w", err)
	}
	reply, err := k.l.b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+LockBucket, req)
	if err != nil {
		return false, fmt.Errorf("read back: %w", err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Sequence uint64 `json:"seq"`
			Data     []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return false, fmt.Errorf("read back: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return false, nil
	case resp.Error != nil:
		return false, fmt.Errorf("read back: %w", resp.Error)
	case resp.Message == nil:
		return false, errors.New("read back: empty reply")
	}
	if string(resp.Message.Data) != string(k.value) || resp.Message.Sequence == k.revision {
		return false, nil
	}
	k.revision = resp.Message.Sequence
	k.expires = k.unansweredSince.Add(k.l.ttl)
	k.unansweredSince = time.Time{}
	return true, nil
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
