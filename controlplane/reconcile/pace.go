package reconcile

import (
	"context"
	"sync"
	"time"
)

// Defaults of the safety net (Config.DriftInterval, Config.ResyncRate).
const (
	// DefaultDriftInterval is how often every object is enqueued again when nothing else asks: the
	// safety net behind watch events, as rare as controller-runtime's SyncPeriod.
	DefaultDriftInterval = 10 * time.Hour
	// DefaultResyncRate is the most objects per second a resync pass enqueues: above what two cores
	// reconcile when nothing changed (about 4,000/s for no-op instances, make bench sim at 10,000), so
	// that a restart re-checks 100,000 objects in under 30 s, while the bucket (one page) still keeps
	// the queue ahead of fresh work short. At 1,000/s the pace alone made that 100 s.
	DefaultResyncRate = 5000
)

// pacer is a token bucket: tokens accrue at rate per second up to burst, and wait takes them, blocking
// until there are enough. A resync pass takes one per object it enqueues, so that a pass over 100,000
// objects spreads over minutes instead of landing in the queue at once.
type pacer struct {
	rate  float64
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newPacer returns a full bucket. A burst below one is one.
func newPacer(rate, burst float64) *pacer {
	burst = max(burst, 1)
	return &pacer{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// wait takes n tokens, in bursts of at most the bucket's size, blocking until each is available or ctx
// ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	left := float64(n)
	for left > 0 {
		take := min(left, p.burst)
		d := p.reserve(take)
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		left -= take
	}
	return nil
}

// reserve takes n tokens, possibly going into debt, and returns how long until the debt is paid.
func (p *pacer) reserve(n float64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	p.last = now
	p.tokens -= n
	if p.tokens >= 0 {
		return 0
	}
	return time.Duration(-p.tokens / p.rate * float64(time.Second))
}
