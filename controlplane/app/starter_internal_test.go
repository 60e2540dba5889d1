package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// startFunc is a starter made of a function.
type startFunc func(context.Context) error

func (f startFunc) Start(ctx context.Context) error { return f(ctx) }

// TestRunStarterRetriesAStartTheBrokerDidNotAnswer: a controller whose start got no answer from the
// broker starts again, and the process does not fail; any other start error fails it.
func TestRunStarterRetriesAStartTheBrokerDidNotAnswer(t *testing.T) {
	newApp := func() *App {
		return &App{log: slog.New(slog.NewTextHandler(io.Discard, nil)), failed: make(chan struct{})}
	}
	t.Run("unanswered starts are tried again until one runs", func(t *testing.T) {
		a := newApp()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		unanswered := []error{
			fmt.Errorf("controller gateway: consumer: %w", context.DeadlineExceeded),
			fmt.Errorf("broker: watch members: %w", &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}),
		}
		calls := 0
		a.runStarter(ctx, startFunc(func(context.Context) error {
			calls++
			if calls <= len(unanswered) {
				return unanswered[calls-1]
			}
			return nil // ran until its context ended, in a real controller
		}))
		require.Equal(t, 3, calls, "two unanswered starts, then the one that ran")
		require.NoError(t, a.Err())
	})
	t.Run("any other start error fails the process", func(t *testing.T) {
		a := newApp()
		calls := 0
		bad := errors.New("controller gateway: consumer: invalid kind")
		a.runStarter(t.Context(), startFunc(func(context.Context) error { calls++; return bad }))
		require.Equal(t, 1, calls)
		require.ErrorIs(t, a.Err(), bad)
	})
	t.Run("a start that gives up when the process stops is not retried", func(t *testing.T) {
		a := newApp()
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		a.runStarter(ctx, startFunc(func(context.Context) error {
			calls++
			cancel()
			return context.Canceled
		}))
		require.Equal(t, 1, calls)
		require.NoError(t, a.Err())
	})
}
