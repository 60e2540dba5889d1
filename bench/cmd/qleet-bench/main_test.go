package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]int{
		"1000,10000,100000": {1000, 10000, 100000},
		" 500 , 1000":       {500, 1000},
		"100_000":           {100000},
		"8":                 {8},
	} {
		got, err := ints(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "1000,", "ten", "1000,-5", "0", "1.5"} {
		_, err := ints(in)
		require.Error(t, err, "%q", in)
	}
}
