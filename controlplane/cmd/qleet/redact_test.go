package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorsPrintURLsWithoutTheirPassword: an endpoint given with credentials is printed redacted.
func TestErrorsPrintURLsWithoutTheirPassword(t *testing.T) {
	t.Parallel()
	r := qleetIn(context.Background(), cliEnv(t), "get", "runtimes", "--endpoint", "http://ops:hunter2@127.0.0.1:1", "--token", "x")
	require.Equal(t, 1, r.code)
	require.NotContains(t, r.stderr, "hunter2")
	require.Contains(t, r.stderr, "cannot reach the QleetOS API at http://ops:xxxxx@127.0.0.1:1")
}
