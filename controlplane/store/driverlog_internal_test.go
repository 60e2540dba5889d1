package store

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"
)

func TestDriverLinesGoToSlogAtDebugAndAreRateLimited(t *testing.T) {
	require.Same(t, pgDriverLog, pgdriver.Logger, "the store replaces pgdriver's stderr logger")

	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newDriverLog(logger, 200*time.Millisecond)
	ctx := context.Background()
	for i := range 50 {
		l.Printf(ctx, "pgdriver: Conn.Write failed (zero-length): %d", i)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, "50 lines at once log as one")
	require.Contains(t, lines[0], "level=DEBUG")
	require.Contains(t, lines[0], "Conn.Write failed (zero-length): 0")

	time.Sleep(250 * time.Millisecond) // past the interval: the next line is logged, with the count left out
	l.Printf(ctx, "pgdriver: Conn.Write failed (zero-length): %s", "later")
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[1], "left_out=49")
	require.Contains(t, lines[1], "later")

	var quiet bytes.Buffer
	info := newDriverLog(slog.New(slog.NewTextHandler(&quiet, nil)), 0)
	info.Printf(ctx, "hidden")
	require.Empty(t, quiet.String(), "at the default info level nothing is logged")
}

func TestDriverLinesGoToTheLoggerOfThePostgresStore(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() { pgDriverLog.use(slog.Default()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Nothing listens on port 1: Open fails, after choosing the logger, which is all this test needs.
	st, err := Open(ctx, Config{URL: "postgres://qleet@127.0.0.1:1/qleet?sslmode=disable&dial_timeout=1s", Logger: logger})
	if err == nil {
		_ = st.Close()
	}
	pgDriverLog.mu.Lock()
	pgDriverLog.last = time.Time{}
	pgDriverLog.mu.Unlock()
	pgdriver.Logger.Printf(ctx, "pgdriver: Conn.Write failed (zero-length): %s", "broken pipe")
	require.Contains(t, buf.String(), "broken pipe", "the line reached the store's logger")
}
