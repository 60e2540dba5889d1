package server

import "sync"

// hub wakes the requests that wait on an object (?wait=reconciled, ?wait=gone, cascading deletes) when
// this server writes it. Writes made by other API replicas are seen by the waiters' fallback poll.
type hub struct {
	mu   sync.Mutex
	subs map[string]*hubEntry
}

type hubEntry struct {
	ch chan struct{}
	n  int
}

func newHub() *hub { return &hub{subs: map[string]*hubEntry{}} }

// subscribe returns a channel that is closed at the next notify for id, and a func to release it.
// Subscribe before reading the object, so that no write between the read and the wait is missed.
func (h *hub) subscribe(id string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.subs[id]
	if !ok {
		e = &hubEntry{ch: make(chan struct{})}
		h.subs[id] = e
	}
	e.n++
	return e.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.subs[id] == e {
			if e.n--; e.n == 0 {
				delete(h.subs, id)
			}
		}
	}
}

// notify wakes every waiter on id.
func (h *hub) notify(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.subs[id]; ok {
		close(e.ch)
		delete(h.subs, id)
	}
}
