package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// presencePrefix prefixes the lock-bucket keys of the processes that announce themselves (Presence).
const presencePrefix = "members."

// PresenceConfig configures Presence.
type PresenceConfig struct {
	// TTL is how long a process's key outlives its last refresh, so how soon the others learn that it
	// died (default 30s; rounded up to whole seconds like every lock). It is refreshed every TTL/3.
	TTL time.Duration
	// Left is called with the key of another process each time that process's key goes: deleted when
	// it stopped, or expired when it died or lost the broker for a TTL. Required.
	Left func(member string)
}

// Presence announces this process to the others that share the broker, until ctx ends, and tells
// cfg.Left when one of them goes. The process holds the key members.<random token> in the lock bucket as
// a lock with cfg.TTL, refreshed every TTL/3 (one small write to the broker, not to the API or a cluster),
// and watches the other members' keys. When the key is lost (the broker was out of reach for a TTL) it
// takes a new one. On return its key is released, so that the others learn at once.
//
// Controller replicas use it to learn that a peer went with requeues held in its memory, which only a
// pass over pending objects finds again (reconcile.Activity).
func (b *Broker) Presence(ctx context.Context, cfg PresenceConfig) error {
	if cfg.Left == nil {
		return errors.New("broker: presence needs Left")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 30 * time.Second
	}
	locker, err := b.Locker(ctx, LockConfig{TTL: cfg.TTL})
	if err != nil {
		return err
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	own := presencePrefix + hex.EncodeToString(token)
	watcher, err := locker.kv.Watch(ctx, presencePrefix+"*", jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("broker: watch members: %w", err)
	}
	defer func() { _ = watcher.Stop() }()
	go func() {
		for e := range watcher.Updates() {
			if e == nil || e.Key() == own {
				continue
			}
			if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
				cfg.Left(strings.TrimPrefix(e.Key(), presencePrefix))
			}
		}
	}()

	var lock *Lock
	defer func() {
		if lock != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = lock.Release(rctx)
		}
	}()
	refresh := time.NewTimer(0)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-refresh.C:
		}
		if lock == nil {
			if lock, err = locker.Acquire(ctx, own); err != nil {
				lock = nil
			}
		} else if err = lock.Refresh(ctx); errors.Is(err, ErrLockLost) {
			// Expired while the broker was out of reach: the others took this process for gone and
			// looked after its requeues. Announce it again.
			lock = nil
			refresh.Reset(0)
			continue
		}
		if err != nil && ctx.Err() == nil {
			b.cfg.Logger.Debug("presence not refreshed; tried again", "err", err)
		}
		refresh.Reset(locker.TTL() / 3)
	}
}
