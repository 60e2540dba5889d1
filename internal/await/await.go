// Package await is the one way tests wait for a condition: poll it, with a deadline, and fail with the
// condition's last explanation. Tests use it instead of sleeping for "long enough" and instead of private
// copies of an eventually loop.
//
// Polling starts fast (10 ms) and backs off to at most 250 ms, so a condition that holds at once costs
// nothing and one that takes seconds does not busy-loop.
package await

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

const (
	firstPoll = 10 * time.Millisecond
	maxPoll   = 250 * time.Millisecond
)

// ErrNotYet is what a condition built from a bool reports while it does not hold.
var ErrNotYet = errors.New("condition not met")

// Until polls cond until it returns nil, ctx ends, or timeout passes. It returns nil once cond holds,
// and otherwise cond's last error wrapped with how long it waited. cond gets a context that ends at the
// deadline, so a slow call inside it cannot outlive the wait.
func Until(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	poll := firstPoll
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), err)
		case <-t.C:
		}
		poll = min(2*poll, maxPoll)
	}
}

// NoError polls cond until it returns nil, and fails the test with cond's last error when timeout
// passes first.
func NoError(t testing.TB, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	if err := Until(context.Background(), timeout, cond); err != nil {
		t.Fatalf("waiting: %v", err)
	}
}

// True polls cond until it returns true, and fails the test with the formatted description of what it
// waited for when timeout passes first.
func True(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	err := Until(context.Background(), timeout, func(context.Context) error {
		if cond() {
			return nil
		}
		return ErrNotYet
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", fmt.Sprintf(format, args...), err)
	}
}

// Explained polls cond until it returns true, and fails the test with the last explanation cond gave
// when timeout passes first.
func Explained(t testing.TB, timeout time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	err := Until(context.Background(), timeout, func(context.Context) error {
		ok, why := cond()
		if ok {
			return nil
		}
		return errors.New(why)
	})
	if err != nil {
		t.Fatalf("condition not met: %v", err)
	}
}
