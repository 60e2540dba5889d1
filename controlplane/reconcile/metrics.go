package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qleetos/terraform-provider-qleet/controlplane/broker"
)

// Metrics are the runtime's Prometheus metrics, shared by every controller of a process.
type Metrics struct {
	duration   *prometheus.HistogramVec
	deliveries *prometheus.CounterVec
	depth      *prometheus.GaugeVec
	locks      *prometheus.CounterVec
	// finished counts reconciles per kind (*atomic.Int64), read by Finished without a scrape.
	finished sync.Map
}

// Results of a lock acquisition, the result label of qleet_lock_acquisitions_total.
const (
	lockAcquired  = "acquired"
	lockContended = "contended"
	lockError     = "error"
)

// NewMetrics registers the runtime's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "qleet_reconcile_duration_seconds",
			Help:    "Duration of reconciles, by kind and outcome (done, requeue, waiting, error, terminal).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"kind", "outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qleet_reconcile_deliveries_total",
			Help: "Queue messages handled, by kind.",
		}, []string{"kind"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "qleet_reconcile_queue_depth",
			Help: "Messages pending or in flight in a kind's consumer.",
		}, []string{"kind"}),
		locks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qleet_lock_acquisitions_total",
			Help: "Attempts to lock an object for a reconcile, by kind and result: acquired, contended (another holder had it) or error.",
		}, []string{"kind", "result"}),
	}
	reg.MustRegister(m.duration, m.deliveries, m.depth, m.locks)
	return m
}

func (m *Metrics) observe(kind, outcome string, d time.Duration) {
	m.duration.WithLabelValues(kind, outcome).Observe(d.Seconds())
	n, _ := m.finished.LoadOrStore(kind, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// Finished is how many reconciles of kind have finished (the sample count of
// qleet_reconcile_duration_seconds over its outcomes), read without gathering the registry: a gather also
// runs the collectors registered beside these metrics, such as the API's count of every object.
func (m *Metrics) Finished(kind string) int64 {
	if m == nil {
		return 0
	}
	n, ok := m.finished.Load(kind)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func (m *Metrics) delivered(kind string) { m.deliveries.WithLabelValues(kind).Inc() }

// lockAttempt counts an attempt to lock an object of kind that ended with err (from Locker.Acquire).
// A nil Metrics counts nothing.
func (m *Metrics) lockAttempt(kind string, err error) {
	if m == nil {
		return
	}
	result := lockAcquired
	switch {
	case errors.Is(err, broker.ErrLocked):
		result = lockContended
	case err != nil:
		result = lockError
	}
	m.locks.WithLabelValues(kind, result).Inc()
}

// watchQueue samples the consumer's backlog every few seconds.
func (m *Metrics) watchQueue(ctx context.Context, kind string, cons jetstream.Consumer) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			info, err := cons.Info(ctx)
			if err == nil {
				m.depth.WithLabelValues(kind).Set(float64(info.NumPending + uint64(info.NumAckPending)))
			}
		}
	}
}
