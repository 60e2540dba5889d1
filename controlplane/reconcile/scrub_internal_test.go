package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScrubReachesEveryStringOfAKindsStatus(t *testing.T) {
	t.Parallel()
	const url, want = "https://u:pw@h", "https://u:xxxxx@h"
	type inner struct {
		Endpoint string
		hidden   string
	}
	type status struct {
		Endpoint string
		Ptr      *string
		List     []inner
		Array    [1]string
		Map      map[string]string
		Nested   map[string][]inner
		Any      any
		Anys     []any
	}
	p := url
	st := &status{Endpoint: url, Ptr: &p, List: []inner{{Endpoint: url, hidden: url}}, Array: [1]string{url},
		Map: map[string]string{"a": url}, Nested: map[string][]inner{"b": {{Endpoint: url}}}, Any: url,
		Anys: []any{url, map[string]any{"c": url}, 3}}
	out := outcome{msg: "failed at " + url}
	scrub(st, &out)
	require.Equal(t, &status{Endpoint: want, Ptr: st.Ptr, List: []inner{{Endpoint: want, hidden: url}}, Array: [1]string{want},
		Map: map[string]string{"a": want}, Nested: map[string][]inner{"b": {{Endpoint: want}}}, Any: want,
		Anys: []any{want, map[string]any{"c": want}, 3}}, st)
	require.Equal(t, want, *st.Ptr)
	require.Equal(t, "failed at "+want, out.msg)
}
