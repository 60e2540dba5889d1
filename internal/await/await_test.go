package await_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

func TestUntil(t *testing.T) {
	t.Run("returns once the condition holds", func(t *testing.T) {
		var calls atomic.Int32
		err := await.Until(context.Background(), 5*time.Second, func(context.Context) error {
			if calls.Add(1) < 3 {
				return await.ErrNotYet
			}
			return nil
		})
		require.NoError(t, err)
		require.EqualValues(t, 3, calls.Load())
	})

	t.Run("gives the condition's last error at the deadline", func(t *testing.T) {
		last := errors.New("pod web-0 is Pending")
		err := await.Until(context.Background(), 50*time.Millisecond, func(context.Context) error { return last })
		require.ErrorIs(t, err, last)
		require.Contains(t, err.Error(), "after ")
	})

	t.Run("the condition's context ends at the deadline", func(t *testing.T) {
		err := await.Until(context.Background(), 50*time.Millisecond, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("stops when the caller's context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := await.Until(ctx, time.Hour, func(context.Context) error { return await.ErrNotYet })
		require.ErrorIs(t, err, await.ErrNotYet)
	})
}

// recorder is a testing.TB that records a fatal failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
}

func TestTrueFailsWithWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	await.True(r, 30*time.Millisecond, func() bool { return false }, "replica %d", 2)
	require.NotEmpty(t, r.failed)

	ok := &recorder{TB: t}
	await.True(ok, time.Second, func() bool { return true }, "anything")
	require.Empty(t, ok.failed)
}
