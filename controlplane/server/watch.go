package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// watchKeepAlive is how often an idle watch stream sends a comment, so that proxies keep it open.
const watchKeepAlive = 15 * time.Second

// watchChange is the data of a "change" event on GET /v1/watch: the objects written or gone since the
// previous event.
type watchChange struct {
	// Changed are the objects created or written (spec, status, labels or deletion request).
	Changed []watchObject `json:"changed"`
	// Deleted are the ids of the objects that are gone.
	Deleted []string `json:"deleted"`
}

// watchObject names one changed object and its new resource version.
type watchObject struct {
	// Kind is the object's kind.
	Kind string `json:"kind"`
	// ID is the object's id.
	ID string `json:"id"`
	// Name is the object's name.
	Name string `json:"name"`
	// ResourceVersion is the version the watch saw.
	ResourceVersion int64 `json:"resource_version"`
}

// watchHub polls the store for changed objects while at least one watch stream is open, and fans the
// changes out to the streams. With no stream open it does nothing. Its zero value is ready.
//
// It polls rather than hooking this server's writes so that it also sees writes made through other API
// replicas. Events appended without a write to their object show at the object's next write.
type watchHub struct {
	mu     sync.Mutex
	subs   map[*watchSub]struct{}
	cancel context.CancelFunc
	// primed is closed once the running poller has read the versions it compares the next read with.
	primed chan struct{}
	// kick, while a poller runs, brings its next read forward (touch).
	kick chan struct{}
}

// watchSub is one open stream: the changes not yet sent, merged, and a channel that wakes its writer.
type watchSub struct {
	wake    chan struct{}
	closed  chan struct{}
	primed  <-chan struct{}
	changed map[string]watchObject
	deleted map[string]bool
}

// subscribe adds a stream and starts the poller with the first one. The stream's changes begin once
// sub.primed is closed. The returned func removes it, and stops the poller with the last one.
func (h *watchHub) subscribe(s *Server) (*watchSub, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*watchSub]struct{}{}
	}
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.primed, h.kick = cancel, make(chan struct{}), make(chan struct{}, 1)
		go h.poll(ctx, s, h.primed, h.kick)
	}
	sub := &watchSub{wake: make(chan struct{}, 1), closed: make(chan struct{}), changed: map[string]watchObject{}, deleted: map[string]bool{}, primed: h.primed}
	h.subs[sub] = struct{}{}
	return sub, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, sub)
		if len(h.subs) == 0 && h.cancel != nil {
			h.cancel()
			h.cancel, h.kick = nil, nil
		}
	}
}

// CloseWatches ends every open GET /v1/watch stream, so that a graceful shutdown need not wait for them
// (http.Server.Shutdown waits for requests in flight and does not cancel them): pass it to
// http.Server.RegisterOnShutdown. Streams opened later work as before.
func (s *Server) CloseWatches() {
	h := &s.watchers
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		close(sub.closed)
		delete(h.subs, sub)
	}
	if h.cancel != nil {
		h.cancel()
		h.cancel, h.kick = nil, nil
	}
}

// take returns and clears the sub's pending changes.
func (h *watchHub) take(sub *watchSub) watchChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := watchChange{Changed: []watchObject{}, Deleted: []string{}}
	for _, id := range slices.Sorted(maps.Keys(sub.changed)) {
		out.Changed = append(out.Changed, sub.changed[id])
	}
	out.Deleted = slices.Sorted(maps.Keys(sub.deleted))
	clear(sub.changed)
	clear(sub.deleted)
	return out
}

// poll reads every object's resource version and hands the differences to the subscribers, until ctx
// ends. It closes primed after the first read. It reads again WaitPollInterval after a change, backing
// off to 8 times that while nothing changes (writes through other API replicas are seen so); a write
// through this server (touch) brings the next read forward, to no sooner than WaitPollInterval after the
// last one.
func (h *watchHub) poll(ctx context.Context, s *Server, primed chan struct{}, kick <-chan struct{}) {
	base := s.cfg.WaitPollInterval
	prev, err := s.versions(ctx)
	close(primed)
	if err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "watch: read versions", slog.Any("error", err))
	}
	last, interval := time.Now(), base
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			t.Reset(max(0, time.Until(last.Add(base)))) // since Go 1.23, Reset drops a pending tick
			continue
		case <-t.C:
		}
		cur, err := s.versions(ctx)
		last = time.Now()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "watch: read versions", slog.Any("error", err))
			}
		case prev == nil:
			prev = cur
		case h.publish(prev, cur):
			prev, interval = cur, base
		default:
			interval = min(interval*2, 8*base)
		}
		t.Reset(interval)
	}
}

// touch tells the poller, if one runs, that this server wrote an object.
func (h *watchHub) touch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kick != nil {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// publish merges the differences between two snapshots into every subscriber and wakes them. It
// reports whether there were any.
func (h *watchHub) publish(prev, cur map[string]watchObject) bool {
	var changed []watchObject
	var deleted []string
	for id, o := range cur {
		if p, ok := prev[id]; !ok || p.ResourceVersion != o.ResourceVersion {
			changed = append(changed, o)
		}
	}
	for id := range prev {
		if _, ok := cur[id]; !ok {
			deleted = append(deleted, id)
		}
	}
	if len(changed) == 0 && len(deleted) == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		for _, o := range changed {
			sub.changed[o.ID] = o
			delete(sub.deleted, o.ID)
		}
		for _, id := range deleted {
			sub.deleted[id] = true
			delete(sub.changed, id)
		}
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// versions reads the resource version of every object.
func (s *Server) versions(ctx context.Context) (map[string]watchObject, error) {
	out := map[string]watchObject{}
	for _, ki := range api.Kinds() {
		err := s.eachObject(ctx, ki, func(o *store.Object) {
			out[o.ID] = watchObject{Kind: o.Kind, ID: o.ID, Name: o.Name, ResourceVersion: o.ResourceVersion}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// watch serves GET /v1/watch: a Server-Sent Events stream. It opens with a "ready" event (re-read what
// you show now: every later change is reported), then sends a "change" event (watchChange) whenever objects are written or go, seen
// within WaitPollInterval, and a comment every 15 s while idle. It authenticates like any read, with the
// Authorization header, so that no token travels in a URL.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	sub, done := s.watchers.subscribe(s)
	defer done()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	select {
	case <-sub.primed:
	case <-sub.closed:
		return
	case <-r.Context().Done():
		return
	}
	if err := send("ready", map[string]string{"status": "ok"}); err != nil {
		return
	}
	keep := time.NewTicker(watchKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.closed:
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-sub.wake:
			if err := send("change", s.watchers.take(sub)); err != nil {
				return
			}
		}
	}
}
