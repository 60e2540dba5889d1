package app

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultGCPercent is the garbage collector's target (GOGC) that a control plane process runs with when
// the GOGC environment variable is not set: the heap may grow to three times what is live before a
// collection, instead of Go's two.
//
// The control plane's allocations are almost all short-lived: JSON decoded from list pages and
// notifications, rendered manifests, status documents compared and written. Collecting half as often
// halves the marking work for the same garbage. In make bench's 100,000-instance resync on PostgreSQL the
// collector was a tenth of the process's CPU at Go's default; docs/benchmarks.md has the measurement,
// side by side with GOGC=100. The price is memory: a larger heap between collections (make bench's RSS
// goal is checked at this setting).
const DefaultGCPercent = 200

// TuneGC sets the garbage collector's target to DefaultGCPercent unless GOGC is set in the environment
// (then Go has applied it already), and returns the target in effect and whether it came from GOGC.
func TuneGC() (percent int, fromEnv bool) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return GCPercent(), true
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent, false
}

// GCPercent returns the garbage collector's target in effect (negative when collection is off).
func GCPercent() int {
	cur := debug.SetGCPercent(100)
	debug.SetGCPercent(cur)
	return cur
}

// ReleaseMemoryWhenIdle returns the heap's free memory to the operating system each time the process
// falls quiet after a burst of work, until ctx ends. At DefaultGCPercent the heap may hold up to three
// times what is live, and at rest nothing allocates, so no collection comes to shrink it: make bench's
// 10,000 instances on kubesim idled at 605 MB of RSS against 413-422 MB at GOGC 100. A burst is
// idleBurst allocated since the last release; quiet is less than idleQuiet allocated in idleCheck. The
// release (debug.FreeOSMemory: one collection, then the free pages back) comes once per burst, so a
// process at rest does not collect again and again.
func ReleaseMemoryWhenIdle(ctx context.Context) {
	releaseWhenIdle(ctx, idleCheck, idleQuiet, idleBurst, debug.FreeOSMemory)
}

const (
	idleCheck = 5 * time.Second
	idleQuiet = 1 << 20
	idleBurst = 64 << 20
)

func releaseWhenIdle(ctx context.Context, every time.Duration, quiet, burst uint64, release func()) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	last := allocated()
	released := last
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := allocated()
		if now-last < quiet && now-released >= burst {
			release()
			now = allocated()
			released = now
		}
		last = now
	}
}
