package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// TestWatchPollsOnlyWhileAStreamIsOpen: the poller starts with the first stream and stops with the
// last, so that the watch costs nothing while no web view is open; changes merge per stream until sent.
func TestWatchPollsOnlyWhileAStreamIsOpen(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), store.Config{URL: filepath.Join(t.TempDir(), "qleet.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WaitPollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	running := func() bool {
		s.watchers.mu.Lock()
		defer s.watchers.mu.Unlock()
		return s.watchers.cancel != nil
	}
	require.False(t, running(), "no poller before any stream")

	a, doneA := s.watchers.subscribe(s)
	b, doneB := s.watchers.subscribe(s)
	require.True(t, running())

	s.watchers.publish(map[string]watchObject{"x": {ID: "x", ResourceVersion: 1}, "y": {ID: "y", ResourceVersion: 1}},
		map[string]watchObject{"x": {ID: "x", ResourceVersion: 2}, "z": {ID: "z", ResourceVersion: 1}})
	s.watchers.publish(map[string]watchObject{"x": {ID: "x", ResourceVersion: 2}, "z": {ID: "z", ResourceVersion: 1}},
		map[string]watchObject{"x": {ID: "x", ResourceVersion: 3}})
	<-a.wake
	got := s.watchers.take(a)
	require.Equal(t, []watchObject{{ID: "x", ResourceVersion: 3}}, got.Changed, "two writes merge into the latest version")
	require.Equal(t, []string{"y", "z"}, got.Deleted, "an object created and gone between sends is reported gone")
	require.Len(t, s.watchers.take(b).Changed, 1, "every stream gets the change")

	doneA()
	require.True(t, running(), "one stream is still open")
	doneB()
	require.False(t, running(), "the last stream stops the poller")
}

// countingStore counts the watch's reads: each lists every kind once, the last kind last.
type countingStore struct {
	store.Store
	last  string
	reads atomic.Int64
	read  chan struct{}
}

func (c *countingStore) List(ctx context.Context, p *store.ListParams) (*store.ListResult, error) {
	if p.Kind == c.last {
		c.reads.Add(1)
		select {
		case c.read <- struct{}{}:
		default:
		}
	}
	return c.Store.List(ctx, p)
}

// TestWatchBacksOffWhileIdleAndWakesOnAWrite: with nothing changing the poller reads less and less
// often (to 8 times WaitPollInterval); a write through this server brings the next read forward.
func TestWatchBacksOffWhileIdleAndWakesOnAWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: filepath.Join(t.TempDir(), "qleet.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	kinds := api.Kinds()
	cs := &countingStore{Store: st, last: kinds[len(kinds)-1].Kind, read: make(chan struct{}, 1)}
	const base = 100 * time.Millisecond
	s, err := New(Config{Store: cs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WaitPollInterval: base})
	require.NoError(t, err)
	sub, done := s.watchers.subscribe(s)
	defer done()
	<-sub.primed

	start, before := time.Now(), cs.reads.Load()
	time.Sleep(3 * time.Second) // no signal: measuring how often it reads while idle, a fixed window is the point
	reads := cs.reads.Load() - before
	t.Logf("idle: %d reads in %s (at a fixed %s: %d)", reads, time.Since(start).Round(time.Millisecond), base, 3*time.Second/base)
	require.LessOrEqual(t, reads, int64(10), "backs off: 100, 200, 400, then 800 ms")

	// At the end of a read (it has listed the first kind): the next one is 800 ms away unless a write
	// brings it forward.
	select {
	case <-cs.read: // a read of the idle window
	default:
	}
	<-cs.read
	_, err = st.Create(ctx, &store.CreateParams{Kind: kinds[0].Kind, Name: "new", Spec: []byte(`{}`), Status: []byte(`{}`)})
	require.NoError(t, err)
	wrote := time.Now()
	s.watchers.touch()
	select {
	case <-sub.wake:
		t.Logf("a write seen after %s", time.Since(wrote).Round(time.Millisecond))
		require.Len(t, s.watchers.take(sub).Changed, 1)
	case <-time.After(600 * time.Millisecond):
		t.Fatal("the write was not seen within 600 ms")
	}
}

// BenchmarkWatchPoll measures one poll of the watch (every object's resource version) beside one
// GET /v1/graph build, which a page does after each change, over 1000 objects on SQLite. The poll runs
// every WaitPollInterval (500 ms) while a web view is open, and never otherwise.
func BenchmarkWatchPoll(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: filepath.Join(b.TempDir(), "qleet.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	spec := []byte(`{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"container_port":80}]}]}`)
	for i := range 1000 {
		_, err := st.Create(ctx, &store.CreateParams{Kind: "workload_definition", Name: fmt.Sprintf("def-%04d", i), Spec: spec,
			Status: []byte(`{"phase":"Ready","observed_generation":1}`)})
		require.NoError(b, err)
	}
	s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(b, err)
	b.Run("versions", func(b *testing.B) {
		for b.Loop() {
			v, err := s.versions(ctx)
			require.NoError(b, err)
			require.Len(b, v, 1000)
		}
	})
	b.Run("graph", func(b *testing.B) {
		for b.Loop() {
			g, err := s.buildGraph(ctx)
			require.NoError(b, err)
			require.Len(b, g.Nodes, 1000)
		}
	})
}
