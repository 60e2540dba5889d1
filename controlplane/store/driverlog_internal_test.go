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
	require.IsType(t, &driverLog{}, pgdriver.Logger, "the store replaces pgdriver's stderr logger")

	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newDriverLog(func() *slog.Logger { return logger }, 200*time.Millisecond)
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
	info := newDriverLog(func() *slog.Logger { return slog.New(slog.NewTextHandler(&quiet, nil)) }, 0)
	info.Printf(ctx, "hidden")
	require.Empty(t, quiet.String(), "at the default info level nothing is logged")
}
