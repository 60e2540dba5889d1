package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
