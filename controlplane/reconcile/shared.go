package reconcile

import (
	"context"
	"sync"
	"time"
)

// sharedReads lets concurrent reconciles share reads of the same object (the definition and runtime
// that thousands of instances reference) without ever reading something older than they may: a
// reconcile joins a read only if that read began at or after the reconcile itself began
// (reconcile.StartedAt), so the result reflects every write committed before its notification. At
// a full resync of 10,000 instances over one definition and 10 runtimes this removes most of the
// definition and runtime GETs (make bench, scale section).
type sharedReads[T any] struct {
	mu   sync.Mutex
	last map[string]*sharedRead[T] // id -> the newest read begun
}

type sharedRead[T any] struct {
	began time.Time
	done  chan struct{}
	val   T
	err   error
}

// get returns fetch's result for id, from a read that began at or after notBefore: one in flight or
// just finished, or a new one. A zero notBefore always reads anew.
func (s *sharedReads[T]) get(ctx context.Context, id string, notBefore time.Time, fetch func(context.Context) (T, error)) (T, error) {
	s.mu.Lock()
	if s.last == nil {
		s.last = map[string]*sharedRead[T]{}
	}
	r, ok := s.last[id]
	if !ok || notBefore.IsZero() || r.began.Before(notBefore) {
		r = &sharedRead[T]{began: time.Now(), done: make(chan struct{})}
		s.last[id] = r
		s.mu.Unlock()
		// The read outlives a cancelled joiner: others may be waiting on it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		r.val, r.err = fetch(rctx)
		cancel()
		close(r.done)
		if r.err != nil {
			s.forget(id, r)
		}
		return r.val, r.err
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// forget drops a failed read, so that later reconciles do not share its error.
func (s *sharedReads[T]) forget(id string, r *sharedRead[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last[id] == r {
		delete(s.last, id)
	}
}
