package reconcile

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the runtime's Prometheus metrics, shared by every controller of a process.
type Metrics struct {
	duration   *prometheus.HistogramVec
	deliveries *prometheus.CounterVec
	depth      *prometheus.GaugeVec
}

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
	}
	reg.MustRegister(m.duration, m.deliveries, m.depth)
	return m
}

func (m *Metrics) observe(kind, outcome string, d time.Duration) {
	m.duration.WithLabelValues(kind, outcome).Observe(d.Seconds())
}

func (m *Metrics) delivered(kind string) { m.deliveries.WithLabelValues(kind).Inc() }

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
