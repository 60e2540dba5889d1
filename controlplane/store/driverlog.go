package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// pgdriver writes a line to stderr, through the standard log package, for each write that fails on a
// broken connection: hundreds in an API's log during a database outage, each one followed by the error
// its caller gets and handles anyway. The store sends them to slog at debug level instead, at most one per
// driverLogEvery, with a count of those left out. pgdriver has one logger per process: the lines go to
// the Logger of the PostgreSQL store opened last (the app's, which follows its log level).
var pgDriverLog = newDriverLog(slog.Default(), driverLogEvery)

func init() { pgdriver.Logger = pgDriverLog }

// driverLogEvery is the least time between two logged pgdriver lines.
const driverLogEvery = 10 * time.Second

// driverLog is pgdriver's logger: a rate-limited debug line on a slog logger.
type driverLog struct {
	logger  atomic.Pointer[slog.Logger]
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func newDriverLog(logger *slog.Logger, every time.Duration) *driverLog {
	l := &driverLog{every: every}
	l.use(logger)
	return l
}

// use sends the next lines to logger.
func (l *driverLog) use(logger *slog.Logger) { l.logger.Store(logger) }

// Printf logs the line unless another was logged less than every ago; then it only counts it.
func (l *driverLog) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	attrs := []any{"line", fmt.Sprintf(format, v...)}
	if dropped > 0 {
		attrs = append(attrs, "left_out", dropped)
	}
	l.logger.Load().DebugContext(ctx, "postgres driver", attrs...)
}
