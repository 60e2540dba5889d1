package server

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// objectsScrapeTimeout bounds the store queries of one scrape.
const objectsScrapeTimeout = 2 * time.Second

// conditionConnected is the runtime condition whose status says whether the runtime's Kubernetes API
// answers (written by the runtime controller).
const conditionConnected = "Connected"

var (
	objectsDesc = prometheus.NewDesc("qleet_objects",
		"Objects by kind and phase (Pending, Reconciling, Ready, Failed, Deleting).", []string{"kind", "phase"}, nil)
	unreconciledDesc = prometheus.NewDesc("qleet_objects_unreconciled",
		"Objects that are not reconciled (phase not Ready, observed_generation behind generation, or deletion requested), by kind.",
		[]string{"kind"}, nil)
	oldestUnreconciledDesc = prometheus.NewDesc("qleet_oldest_unreconciled_age_seconds",
		"Time since the last write of the least recently written object that is not reconciled, by kind (0 when all are).",
		[]string{"kind"}, nil)
	runtimeReachableDesc = prometheus.NewDesc("qleet_runtime_reachable",
		"1 when the runtime's Kubernetes API answered its controller's last check (condition Connected is True), else 0.",
		[]string{"runtime", "name", "region"}, nil)
	supportServicesDesc = prometheus.NewDesc("qleet_support_services",
		"Support services by runtime id, type and phase.", []string{"runtime", "type", "phase"}, nil)
)

// standardPhases are reported for every kind, as 0 when no object is in them, so that a series exists
// before the first object reaches a phase.
var standardPhases = []api.Phase{api.PhasePending, api.PhaseReconciling, api.PhaseReady, api.PhaseFailed, api.PhaseDeleting}

// objectsCollector reads object counts, runtime reachability and support services from the store at
// scrape time. The object counts are kept by the store on every write (CountObjectsByKind), so a scrape
// does not read every object; runtimes and support services are few, and are aggregated from their rows.
type objectsCollector struct{ st store.Store }

func (c *objectsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- objectsDesc
	ch <- unreconciledDesc
	ch <- oldestUnreconciledDesc
	ch <- runtimeReachableDesc
	ch <- supportServicesDesc
}

func (c *objectsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), objectsScrapeTimeout)
	defer cancel()
	c.collectObjects(ctx, ch)
	c.collectRuntimes(ctx, ch)
	c.collectSupportServices(ctx, ch)
}

// collectObjects reports qleet_objects, qleet_objects_unreconciled and qleet_oldest_unreconciled_age_seconds.
func (c *objectsCollector) collectObjects(ctx context.Context, ch chan<- prometheus.Metric) {
	counts, err := c.st.CountObjectsByKind(ctx)
	if err != nil {
		err = fmt.Errorf("count objects: %w", err)
		for _, d := range []*prometheus.Desc{objectsDesc, unreconciledDesc, oldestUnreconciledDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	type kindStats struct {
		phases       map[string]int64
		unreconciled int64
		oldest       time.Time
	}
	kinds := map[string]*kindStats{}
	stats := func(kind string) *kindStats {
		if kinds[kind] == nil {
			kinds[kind] = &kindStats{phases: map[string]int64{}}
			for _, p := range standardPhases {
				kinds[kind].phases[string(p)] = 0
			}
		}
		return kinds[kind]
	}
	for _, ki := range api.Kinds() {
		stats(ki.Kind)
	}
	for _, n := range counts {
		k := stats(n.Values[0])
		k.phases[n.Phase] += n.Count
		k.unreconciled += n.Unreconciled
		if !n.OldestUnreconciled.IsZero() && (k.oldest.IsZero() || n.OldestUnreconciled.Before(k.oldest)) {
			k.oldest = n.OldestUnreconciled
		}
	}
	now := time.Now()
	for kind, k := range kinds {
		for phase, n := range k.phases {
			ch <- prometheus.MustNewConstMetric(objectsDesc, prometheus.GaugeValue, float64(n), kind, phase)
		}
		ch <- prometheus.MustNewConstMetric(unreconciledDesc, prometheus.GaugeValue, float64(k.unreconciled), kind)
		var age time.Duration
		if !k.oldest.IsZero() {
			age = max(now.Sub(k.oldest), 0)
		}
		ch <- prometheus.MustNewConstMetric(oldestUnreconciledDesc, prometheus.GaugeValue, age.Seconds(), kind)
	}
}

// collectRuntimes reports qleet_runtime_reachable for every runtime.
func (c *objectsCollector) collectRuntimes(ctx context.Context, ch chan<- prometheus.Metric) {
	counts, err := c.st.CountObjects(ctx, &store.CountParams{Kind: api.KindKubernetesRuntime,
		GroupBy: []string{"id", "name", "status.region", "spec.region"}, Condition: conditionConnected})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(runtimeReachableDesc, fmt.Errorf("count runtimes: %w", err))
		return
	}
	for _, n := range counts { // one group per runtime: grouped by id
		reachable := 0.0
		if n.Condition == string(api.ConditionTrue) {
			reachable = 1
		}
		region := cmp.Or(n.Values[2], n.Values[3])
		ch <- prometheus.MustNewConstMetric(runtimeReachableDesc, prometheus.GaugeValue, reachable, n.Values[0], n.Values[1], region)
	}
}

// collectSupportServices reports qleet_support_services.
func (c *objectsCollector) collectSupportServices(ctx context.Context, ch chan<- prometheus.Metric) {
	counts, err := c.st.CountObjects(ctx, &store.CountParams{Kind: api.KindSupportService,
		GroupBy: []string{"spec.runtime_id", "spec.type"}})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(supportServicesDesc, fmt.Errorf("count support services: %w", err))
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(supportServicesDesc, prometheus.GaugeValue, float64(n.Count), n.Values[0], n.Values[1], n.Phase)
	}
}
