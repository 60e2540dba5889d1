package server

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// metrics are the API server's Prometheus metrics.
type metrics struct {
	latency *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, st store.Store) (*metrics, error) {
	m := &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "qleet",
			Subsystem: "api",
			Name:      "request_duration_seconds",
			Help:      "API request latency by route pattern, method and status code.",
			Buckets:   []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"route", "method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.latency, &outboxCollector{st: st}, &objectsCollector{st: st}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

var (
	outboxPendingDesc = prometheus.NewDesc("qleet_outbox_pending", "Outbox entries not yet published to the broker.", nil, nil)
	outboxAgeDesc     = prometheus.NewDesc("qleet_outbox_oldest_age_seconds", "Age of the oldest unpublished outbox entry (0 when none).", nil, nil)
)

// outboxCollector reads the outbox lag from the store at scrape time.
type outboxCollector struct{ st store.Store }

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxPendingDesc
	ch <- outboxAgeDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pending, oldest, err := c.st.OutboxStats(ctx)
	if err != nil {
		err = fmt.Errorf("outbox stats: %w", err)
		ch <- prometheus.NewInvalidMetric(outboxPendingDesc, err)
		ch <- prometheus.NewInvalidMetric(outboxAgeDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(outboxPendingDesc, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, oldest.Seconds())
}
