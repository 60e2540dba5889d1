package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCovers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		live, desired any
		want          bool
	}{
		{"equal scalars", "a", "a", true},
		{"different strings", "a", "b", false},
		{"numbers compare by value", int64(3), float64(3), true},
		{"different numbers", int64(3), int64(4), false},
		{"a number is not a string", "3", int64(3), false},
		{"extra live keys are someone else's", map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1"}, true},
		{"a missing desired key", map[string]any{"b": "2"}, map[string]any{"a": "1"}, false},
		{"an empty desired map matches an absent one", map[string]any{}, map[string]any{"a": map[string]any{}}, true},
		{"a desired null matches anything", map[string]any{"a": "x"}, map[string]any{"a": nil}, true},
		{"an empty desired string matches an absent one", map[string]any{}, map[string]any{"a": ""}, true},
		{"false is a value", map[string]any{}, map[string]any{"a": false}, false},
		{"zero is a value", map[string]any{}, map[string]any{"a": int64(0)}, false},
		{"lists cover element by element", []any{map[string]any{"a": "1", "x": "y"}}, []any{map[string]any{"a": "1"}}, true},
		{"a longer live list is not covered", []any{"a", "b"}, []any{"a"}, false},
		{"a shorter live list is not covered", []any{"a"}, []any{"a", "b"}, false},
		{"a map is not a list", map[string]any{}, []any{"a"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, covers(c.live, c.desired, false))
		})
	}
	t.Run("apiVersion, kind and status are not compared at the top", func(t *testing.T) {
		live := map[string]any{"metadata": map[string]any{"name": "x"}}
		desired := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "status": map[string]any{"a": "b"}, "metadata": map[string]any{"name": "x"}}
		require.True(t, covers(live, desired, true))
		require.False(t, covers(live, desired, false))
	})
}
