package reconcile

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKindWaits(t *testing.T) {
	t.Parallel()
	require.Nil(t, newKindWaits(nil), "no kinds followed, nothing to hold")
	var none *kindWaits
	require.True(t, none.wait("a", []string{"k"}, none.begin("a")), "with none followed a wait keeps its timer")

	w := newKindWaits([]string{"runtime", "profile"})
	seen := w.begin("a")
	require.True(t, w.wait("a", []string{"runtime", "profile"}, seen))
	seen = w.begin("b")
	require.True(t, w.wait("b", []string{"profile", "bucket"}, seen), "a kind not followed is left to the timer")
	require.Equal(t, 1, w.waiting("runtime"))
	require.Equal(t, 2, w.waiting("profile"))

	woken := w.written("profile")
	slices.Sort(woken)
	require.Equal(t, []string{"a", "b"}, woken)
	require.Zero(t, w.waiting("runtime"), "a woken object waits on nothing until its reconcile says so again")
	require.Empty(t, w.written("runtime"))

	// A write between begin and wait: the reconcile may have read the world before it.
	seen = w.begin("c")
	w.written("runtime")
	require.False(t, w.wait("c", []string{"runtime"}, seen), "the write came during the reconcile: look again")
	require.Zero(t, w.waiting("runtime"))
	// A write of a kind it does not wait on does not matter.
	seen = w.begin("c")
	w.written("profile")
	require.True(t, w.wait("c", []string{"runtime"}, seen))
	require.Equal(t, []string{"c"}, w.written("runtime"))

	// begin forgets an earlier wait: the reconcile decides again.
	seen = w.begin("d")
	require.True(t, w.wait("d", []string{"runtime"}, seen))
	w.begin("d")
	require.Empty(t, w.written("runtime"))
}
