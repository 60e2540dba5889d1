package reconcile

import (
	"context"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
)

// kindWaits holds the objects of this replica that wait on writes to other kinds (WaitError.Kinds), and
// per kind a count of the writes seen. A reconcile notes the counts before it reads anything (begin); if a
// write of a kind it then waits on came meanwhile, the write may be one its reads missed, so it looks
// again at once instead of waiting (wait). The zero of a nil *kindWaits is "no kind wakes anything".
type kindWaits struct {
	mu    sync.Mutex
	seen  map[string]uint64          // kind → writes seen since Start
	waits map[string]map[string]bool // kind → ids of objects waiting on it
}

func newKindWaits(kinds []string) *kindWaits {
	if len(kinds) == 0 {
		return nil
	}
	w := &kindWaits{seen: map[string]uint64{}, waits: map[string]map[string]bool{}}
	for _, k := range kinds {
		w.seen[k] = 0
		w.waits[k] = map[string]bool{}
	}
	return w
}

// begin forgets id's wait, if any (its reconcile decides again), and returns the counts of writes seen.
func (w *kindWaits) begin(id string) map[string]uint64 {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ids := range w.waits {
		delete(ids, id)
	}
	seen := make(map[string]uint64, len(w.seen))
	for k, n := range w.seen {
		seen[k] = n
	}
	return seen
}

// wait records that id waits on writes to kinds, as counted by begin in seen. It reports false when a
// write to one of them came since: then id is not recorded, and should look again now. Kinds this
// replica does not follow (Config.WakeOn) are left to the wait's timer.
func (w *kindWaits) wait(id string, kinds []string, seen map[string]uint64) bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range kinds {
		if n, ok := w.seen[k]; ok && n != seen[k] {
			return false
		}
	}
	for _, k := range kinds {
		if ids, ok := w.waits[k]; ok {
			ids[id] = true
		}
	}
	return true
}

// written counts a write to kind and returns the objects that waited on it, which wait no more.
func (w *kindWaits) written(kind string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[kind]++
	ids := make([]string, 0, len(w.waits[kind]))
	for id := range w.waits[kind] {
		ids = append(ids, id)
		for _, others := range w.waits {
			delete(others, id)
		}
	}
	return ids
}

// waiting returns how many objects wait on kind's writes.
func (w *kindWaits) waiting(kind string) int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waits[kind])
}

// followWrites subscribes to the notifications of the kinds in Config.WakeOn and returns a function that
// ends the subscriptions. A write is a notification from the outbox (Nats-Msg-Id broker.MsgIDPrefix…):
// an object created, its spec or labels changed, its deletion requested, an object it owns changed
// readiness. Requeues and resync passes of that kind are not writes, and wake nothing. Every replica
// sees every notification, and wakes the objects that wait on this replica. A wake is published like a
// requeue; one that cannot be published is a loss (Activity), which a pass covers.
func (c *Controller[S, T]) followWrites(ctx context.Context) func() {
	if c.wakes == nil {
		return func() {}
	}
	q, ok := c.queue.(listingQueue)
	if !ok {
		c.log.Debug("waits on other kinds' writes use their timers: the queue has no connection to subscribe on")
		return func() {}
	}
	var subs []*nats.Subscription
	for _, kind := range c.cfg.WakeOn {
		sub, err := q.Conn().Subscribe(broker.Subject(kind, "*"), func(m *nats.Msg) {
			msgID := m.Header.Get(jetstream.MsgIDHeader)
			if !strings.HasPrefix(msgID, broker.MsgIDPrefix) {
				return
			}
			if ids := c.wakes.written(kind); len(ids) > 0 {
				go c.wake(ctx, kind, msgID, ids)
			}
		})
		if err != nil {
			c.log.Warn("waits on writes use their timers: subscribe", "kind", kind, "err", err)
			continue
		}
		_ = sub.SetPendingLimits(-1, 64<<20)
		subs = append(subs, sub)
	}
	return func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
}

// wake notifies ids, which waited on writes to kind, after the write whose notification was msgID.
func (c *Controller[S, T]) wake(ctx context.Context, kind, msgID string, ids []string) {
	own := c.res.Kind()
	for _, id := range ids {
		if err := c.queue.Publish(ctx, own, id, "wake-"+msgID+"-"+id); err != nil {
			if ctx.Err() == nil {
				c.cfg.Activity.Lost()
				c.log.Debug("wake failed; a resync pass will pick the object up", "id", id, "after", kind, "err", err)
			}
			return
		}
	}
	c.log.Debug("woke objects waiting on a write", "kind", kind, "objects", len(ids))
}
