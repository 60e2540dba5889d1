package app

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestReleaseMemoryWhenIdle: the release comes once the process falls quiet after a burst of
// allocations, once per burst, and not while it allocates or after a quiet spell with no burst before.
func TestReleaseMemoryWhenIdle(t *testing.T) {
	var released atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const burst = 32 << 20
	go releaseWhenIdle(ctx, 100*time.Millisecond, 4<<20, burst, func() { released.Add(1) })

	time.Sleep(500 * time.Millisecond) // no signal: a quiet spell with no burst before it must not release
	require.Zero(t, released.Load(), "no burst, no release")

	var sink [][]byte
	for range 2 * burst / (1 << 20) {
		sink = append(sink, make([]byte, 1<<20))
	}
	runtime.KeepAlive(sink)
	sink = nil
	await.True(t, 5*time.Second, func() bool { return released.Load() == 1 }, "the release after the burst")
	time.Sleep(500 * time.Millisecond) // no signal: quiet goes on, and must not release again
	require.EqualValues(t, 1, released.Load(), "once per burst")

	for range 2 * burst / (1 << 20) {
		sink = append(sink, make([]byte, 1<<20))
	}
	runtime.KeepAlive(sink)
	await.True(t, 5*time.Second, func() bool { return released.Load() == 2 }, "the release after the next burst")
}
