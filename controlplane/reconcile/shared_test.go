package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

func TestSharedReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("reconciles that began before a read in flight share it", func(t *testing.T) {
		var s sharedReads[int]
		var fetches atomic.Int32
		release := make(chan struct{})
		began := time.Now()
		fetch := func(context.Context) (int, error) { fetches.Add(1); <-release; return 7, nil }
		var wg sync.WaitGroup
		results := make([]int, 8)
		for i := range results {
			wg.Add(1)
			go func() { defer wg.Done(); results[i], _ = s.get(ctx, "def", began, fetch) }()
		}
		await.True(t, 5*time.Second, func() bool { return fetches.Load() >= 1 }, "the first fetch to start")
		time.Sleep(50 * time.Millisecond) // no signal: nothing counts joiners; one later than this joins the finished read, which passes too
		close(release)
		wg.Wait()
		require.Equal(t, int32(1), fetches.Load(), "one read for all")
		for _, r := range results {
			require.Equal(t, 7, r)
		}
	})

	t.Run("a reconcile that began after a read never uses it", func(t *testing.T) {
		var s sharedReads[int]
		v := 0
		fetch := func(context.Context) (int, error) { v++; return v, nil }
		got, err := s.get(ctx, "def", time.Now(), fetch)
		require.NoError(t, err)
		require.Equal(t, 1, got)
		later := time.Now().Add(time.Millisecond)
		time.Sleep(2 * time.Millisecond) // no signal: the clock must pass later, so that the next read begins after it
		got, err = s.get(ctx, "def", later, fetch)
		require.NoError(t, err)
		require.Equal(t, 2, got, "read anew: the first read may predate the notification")
		got, err = s.get(ctx, "def", later, fetch)
		require.NoError(t, err)
		require.Equal(t, 2, got, "the second read began after this reconcile did: shared")
		got, err = s.get(ctx, "def", time.Time{}, fetch)
		require.NoError(t, err)
		require.Equal(t, 3, got, "no start time: always read")
	})

	t.Run("a failed read is not shared afterwards", func(t *testing.T) {
		var s sharedReads[int]
		began := time.Now()
		_, err := s.get(ctx, "def", began, func(context.Context) (int, error) { return 0, errors.New("boom") })
		require.Error(t, err)
		got, err := s.get(ctx, "def", began, func(context.Context) (int, error) { return 5, nil })
		require.NoError(t, err)
		require.Equal(t, 5, got)
	})
}
