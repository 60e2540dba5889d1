package app

import (
	"os"
	"runtime/debug"
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
