package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
)

// ListedHeader is the header of a resync notification whose object the publishing replica holds from its
// listing: "<nonce>-<page>-<resource version>", page counting the pages that controller listed. A
// replica that holds a copy of the object at that resource version may hand it to the reconcile instead
// of reading the object again (see listedCopies); a notification without it may say that the object
// changed.
const ListedHeader = "Qleet-Listed"

// Listed copies: why a reconcile may use the object its resync pass listed instead of a GET.
//
// A GET made after a notification is received sees every write committed before it. A listed copy was
// read earlier, at the listing (L), so by itself it may be stale. It is used only when all of these hold,
// checked after the reconcile took the object's lock (at revision R of the lock bucket):
//
//  1. The message is a resync notification (ListedHeader) for the copy's resource version, published by
//     this replica or by another that listed the same version (replicas' passes de-duplicate by message
//     id, so either one's message may come). Any other notification (an outbox write, a requeue, a
//     dependency's change) reads the object as before.
//  2. No other notification for the object was published since L. Every write but the controller's own
//     status write puts an outbox row in its transaction, and the relay publishes it on the object's
//     subject; this replica sees every publish on its kind's subjects (a plain subscription beside the
//     work queue), and a copy is dropped at the first one that is not a resync notification for its
//     version. Before deciding, the reconcile waits until that subscription has handled everything it
//     received, which on one NATS connection to one server includes everything published before the
//     lock was granted (across a NATS cluster, messages routed from other servers may come later).
//  3. Nobody took, renewed, released or lost the object's lock since L, except this reconcile: a watch on
//     the lock bucket records the first lock entry of the object after the listing, and the reconcile
//     waits until the watch has delivered its own acquisition (revision R); an earlier entry (< R) means
//     another reconcile, on any replica, held the lock after L and may have read and applied newer
//     spec. Locks held across L show too: they must be released or expire (a marker) before R.
//  4. The copy is younger than ListedTTL, the watch and subscription are healthy and dropped nothing.
//
// What this proves: (3) says no reconcile of the object ran between L and this one, so applies stay
// ordered by resource version (a reconcile never puts back older spec than one already applied), and
// this reconcile is equivalent to one that took the lock and read the object at L. (2) adds that every
// write whose notification was already published is seen, as with a GET. The one write a copy can miss
// is one committed after L whose outbox row the relay has not published yet when the lock is granted
// (relay lag, milliseconds): its notification still comes, and that reconcile reads the object; and the
// status write of this one carries If-Match L's resource version, so it fails (409) and requeues instead
// of recording the stale generation as reconciled. Objects notified or locked while their page is
// listed are not held at all; those locked across the listing are held, but their release or expiry
// comes before R and disqualifies the copy.
type listedCopies[S any, T any] struct {
	kind  string
	max   int
	ttl   time.Duration
	nonce string
	page  atomic.Uint64

	sub *nats.Subscription
	// hits, misses, invalidated count copies handed to a reconcile, resync messages read again though
	// a copy was held, and copies dropped by a notification or a lock entry.
	hits, misses, invalidated atomic.Int64

	mu      sync.Mutex
	cond    *sync.Cond
	healthy bool
	// lastRev is the last lock bucket revision the watch delivered.
	lastRev uint64
	copies  map[string]*heldCopy[S, T]
	// While a page is listed (listing > 0), the ids of objects that saw a notification or a lock entry
	// are kept in events, base being the count dropped from its front.
	listing int
	events  []string
	base    int
}

type heldCopy[S any, T any] struct {
	obj *api.Object[S, T]
	tag string
	// mark is the lock bucket revision the watch had delivered before the listing began; lockRev the
	// first revision of the object's lock after it (0: none yet), seen at lockAt.
	mark    uint64
	lockRev uint64
	lockAt  time.Time
	at      time.Time
}

// ListedStats counts a controller's use of listed copies (see Config.ListedMax).
type ListedStats struct {
	// Held is the number of copies held now.
	Held int
	// Hits is the number of reconciles that used a listed copy instead of reading the object.
	Hits int64
	// Misses is the number of resync notifications with a held copy that read the object after all.
	Misses int64
	// Invalidated is the number of copies dropped because the object was notified or locked meanwhile.
	Invalidated int64
}

// listingQueue is what listed copies need beyond Queue; *broker.Broker has it.
type listingQueue interface {
	Conn() *nats.Conn
	JetStream() jetstream.JetStream
}

// How long a reconcile waits for the subscription and the lock watch to catch up before it reads the
// object instead.
const (
	listedFeedWait = 100 * time.Millisecond
	listedLockWait = time.Second
)

// startListed starts the notification subscription and the lock watch, or returns nil (every reconcile
// reads its object) when the queue cannot serve them or ListedMax is negative.
func (c *Controller[S, T]) startListed(ctx context.Context) *listedCopies[S, T] {
	q, ok := c.queue.(listingQueue)
	if !ok || c.cfg.ListedMax < 0 {
		return nil
	}
	kind := c.res.Kind()
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	l := &listedCopies[S, T]{kind: kind, max: c.cfg.ListedMax, ttl: c.cfg.ListedTTL, nonce: hex.EncodeToString(nonce),
		copies: map[string]*heldCopy[S, T]{}}
	l.cond = sync.NewCond(&l.mu)
	kv, err := q.JetStream().KeyValue(ctx, broker.LockBucket)
	if err != nil {
		c.log.Warn("listed copies off: lock bucket", "err", err)
		return nil
	}
	w, err := kv.Watch(ctx, kind+".>", jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		c.log.Warn("listed copies off: lock watch", "err", err)
		return nil
	}
	sub, err := q.Conn().Subscribe(broker.Subject(kind, "*"), l.onNotification)
	if err != nil {
		_ = w.Stop()
		c.log.Warn("listed copies off: subscribe", "err", err)
		return nil
	}
	_ = sub.SetPendingLimits(1<<20, 256<<20)
	l.sub = sub
	l.healthy = true
	go func() {
		defer func() {
			_ = sub.Unsubscribe()
			l.mu.Lock()
			l.healthy = false
			clear(l.copies)
			l.cond.Broadcast()
			l.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				_ = w.Stop()
				return
			case e, ok := <-w.Updates():
				if !ok {
					c.log.Warn("listed copies off: lock watch ended")
					return
				}
				if e != nil {
					l.onLock(strings.TrimPrefix(e.Key(), kind+"."), e.Revision())
				}
			}
		}
	}()
	return l
}

// onNotification drops the copy of a notified object, unless the notification is its own resync message.
func (l *listedCopies[S, T]) onNotification(m *nats.Msg) {
	_, id, err := broker.ParseSubject(m.Subject)
	if err != nil {
		return
	}
	tag := m.Header.Get(ListedHeader)
	l.mu.Lock()
	defer l.mu.Unlock()
	if cp := l.copies[id]; cp != nil && !listedAt(tag, cp.obj.ResourceVersion) {
		delete(l.copies, id)
		l.invalidated.Add(1)
		l.cond.Broadcast()
	}
	if l.listing > 0 && tag == "" {
		l.events = append(l.events, id)
	}
}

// listedAt reports whether tag is a ListedHeader for resource version rv.
func listedAt(tag string, rv int64) bool {
	i := strings.LastIndexByte(tag, '-')
	return i >= 0 && tag[i+1:] == strconv.FormatInt(rv, 10)
}

// onLock records a lock entry of object id (acquired, renewed, released or expired) at revision rev.
func (l *listedCopies[S, T]) onLock(id string, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastRev = max(l.lastRev, rev)
	if cp := l.copies[id]; cp != nil && rev > cp.mark && cp.lockRev == 0 {
		// It may be the acquisition of the reconcile about to take this copy: take decides.
		cp.lockRev, cp.lockAt = rev, time.Now()
	}
	if l.listing > 0 {
		l.events = append(l.events, id)
	}
	l.cond.Broadcast()
}

// listingMark is where a page's listing began.
type listingMark struct {
	rev   uint64
	event int
}

// beginListing marks the start of a page's listing; call endListing after storing its copies. The
// methods of a nil *listedCopies do nothing.
func (l *listedCopies[S, T]) beginListing() listingMark {
	if l == nil {
		return listingMark{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listing++
	return listingMark{rev: l.lastRev, event: l.base + len(l.events)}
}

// endListing ends a page's listing.
func (l *listedCopies[S, T]) endListing() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listing--
	if l.listing == 0 {
		l.base += len(l.events)
		l.events = nil
	}
}

// hold keeps the listed objects that saw no notification or lock entry since mark, up to the limit, and
// returns their tags by id.
func (l *listedCopies[S, T]) hold(mark listingMark, objs []*api.Object[S, T]) map[string]string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.healthy {
		return nil
	}
	touched := map[string]bool{}
	for _, id := range l.events[max(0, mark.event-l.base):] {
		touched[id] = true
	}
	page := l.page.Add(1)
	now := time.Now()
	tags := make(map[string]string, len(objs))
	for _, o := range objs {
		if touched[o.ID] || len(l.copies) >= l.max {
			continue
		}
		tag := fmt.Sprintf("%s-%d-%d", l.nonce, page, o.ResourceVersion)
		l.copies[o.ID] = &heldCopy[S, T]{obj: o, tag: tag, mark: mark.rev, at: now}
		tags[o.ID] = tag
	}
	return tags
}

// drop forgets the copy of id held under tag (its publish failed).
func (l *listedCopies[S, T]) drop(id, tag string) {
	if l == nil || tag == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cp := l.copies[id]; cp != nil && cp.tag == tag {
		delete(l.copies, id)
		l.cond.Broadcast()
	}
}

// sweep drops copies older than the TTL, and copies whose object was locked by someone else more than a
// lock wait ago (no reconcile of this replica is about to take them). Callers hold l.mu.
func (l *listedCopies[S, T]) sweep(now time.Time) {
	for id, cp := range l.copies {
		if now.Sub(cp.at) > l.ttl || cp.lockRev != 0 && now.Sub(cp.lockAt) > 2*listedLockWait {
			delete(l.copies, id)
		}
	}
}

// waitRoom waits until n more copies fit under the limit, at most the TTL; the pass holds what fits.
func (l *listedCopies[S, T]) waitRoom(ctx context.Context, n int) {
	if l == nil {
		return
	}
	deadline := time.Now().Add(l.ttl)
	done := make(chan struct{})
	defer close(done)
	go func() { // wake the wait every sweepEvery, to sweep and to notice ctx and the deadline
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.mu.Lock()
				l.cond.Broadcast()
				l.mu.Unlock()
			}
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Every take, drop, notification and lock entry wakes the wait (thousands a second in a pass), and
	// those make room by themselves: the sweep, which reads every copy, runs at most every sweepEvery
	// (it was 18% of a resync's CPU when it ran on each wake-up: make bench, sim on PostgreSQL).
	var swept time.Time
	for l.healthy && ctx.Err() == nil && time.Now().Before(deadline) {
		if now := time.Now(); now.Sub(swept) >= sweepEvery {
			l.sweep(now)
			swept = now
		}
		if len(l.copies)+n <= l.max {
			return
		}
		l.cond.Wait()
	}
}

// sweepEvery is how often a pass waiting for room sweeps expired copies.
const sweepEvery = 100 * time.Millisecond

// take returns the listed copy of id for the reconcile of m, which holds the object's lock at revision
// rev, when it is safe to use (see listedCopies), or nil: then the reconcile reads the object. The copy
// is forgotten either way.
func (l *listedCopies[S, T]) take(id string, m jetstream.Msg, rev uint64) (*api.Object[S, T], time.Time) {
	if l == nil || m.Headers() == nil {
		return nil, time.Time{}
	}
	tag := m.Headers().Get(ListedHeader)
	if tag == "" {
		return nil, time.Time{}
	}
	// (2) Let the subscription handle every notification received before the lock was granted.
	fed := true
	for deadline := time.Now().Add(listedFeedWait); ; {
		n, _, err := l.sub.Pending()
		if err != nil || time.Now().After(deadline) {
			fed = false
			break
		}
		if n == 0 {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	dropped, _ := l.sub.Dropped()

	l.mu.Lock()
	defer l.mu.Unlock()
	cp := l.copies[id]
	if cp == nil || !listedAt(tag, cp.obj.ResourceVersion) {
		return nil, time.Time{} // none, dropped by a notification, or of another version (which a lock entry will clear)
	}
	delete(l.copies, id)
	l.cond.Broadcast()
	// (3) Wait until the lock watch has delivered this reconcile's own acquisition.
	deadline := time.Now().Add(listedLockWait)
	wake := time.AfterFunc(listedLockWait, func() { l.mu.Lock(); l.cond.Broadcast(); l.mu.Unlock() })
	defer wake.Stop()
	for l.healthy && l.lastRev < rev && time.Now().Before(deadline) {
		l.cond.Wait()
	}
	switch {
	case !fed || dropped > 0 || !l.healthy || l.lastRev < rev,
		cp.lockRev != 0 && cp.lockRev < rev,
		time.Since(cp.at) > l.ttl:
		l.misses.Add(1)
		return nil, time.Time{}
	}
	l.hits.Add(1)
	return cp.obj, cp.at
}

// stats returns the counters.
func (l *listedCopies[S, T]) stats() ListedStats {
	if l == nil {
		return ListedStats{}
	}
	l.mu.Lock()
	held := len(l.copies)
	l.mu.Unlock()
	return ListedStats{Held: held, Hits: l.hits.Load(), Misses: l.misses.Load(), Invalidated: l.invalidated.Load()}
}
