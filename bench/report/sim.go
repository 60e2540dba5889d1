package report

import (
	"fmt"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// SimResult is the sim section: the control plane alone at several instance counts, with a no-op
// compute adapter (app.Config.SimulateCompute), on SQLite and on PostgreSQL.
type SimResult struct {
	// Sizes are the instance counts run, ascending; each runs on every backend.
	Sizes []int `json:"sizes,omitempty"`
	// Instances is the largest size (the one the goals judge), and Runtimes the runtimes the instances
	// are spread over (kubeconfig runtimes of one kubesim cluster that no instance ever reaches).
	Instances int `json:"instances"`
	Runtimes  int `json:"runtimes"`
	// UpdateRate is the churn's updates per second (creates run at a tenth of it).
	UpdateRate float64 `json:"update_rate_per_s"`
	// Rows holds one row per size and backend, sizes ascending.
	Rows []SimRow `json:"rows"`
}

// SimRow is one backend of the sim section at one size.
type SimRow struct {
	// Backend is e.g. "SQLite, API + 1 controller app" or "PostgreSQL, API + 2 controller replicas".
	Backend string `json:"backend"`
	// Instances is the size of this row: how many instances were asked for.
	Instances int `json:"instances,omitempty"`
	// Reconciled is how many instances were reconciled when creation ended.
	Reconciled int `json:"reconciled"`
	// CreateAPIS is the time the API took to accept every create; CreateS until every instance was
	// reconciled (or the deadline).
	CreateAPIS float64 `json:"create_api_s"`
	CreateS    float64 `json:"create_s"`
	// LastCreateToReconciledS is from the moment the API accepted the last create until the store
	// counted every instance reconciled (the goal's "within 200 s of the last create").
	LastCreateToReconciledS float64 `json:"last_create_to_reconciled_s"`
	// CreateReconciles is how many instance reconciles had run by then (more than Reconciled when
	// resync passes enqueued a backlog again, or status writes conflicted).
	CreateReconciles int `json:"create_reconciles"`
	// BaselineRSSMB is the harness process's RSS before this backend's control plane started.
	BaselineRSSMB float64 `json:"baseline_rss_mb"`
	// BaselineHeapMB is the Go heap in use then.
	BaselineHeapMB float64 `json:"baseline_heap_mb"`
	// SteadyRSSMB (mean) and SteadyRSSMaxMB over the steady window; SteadyHeapMB at its end.
	SteadyRSSMB    float64 `json:"steady_rss_mb"`
	SteadyRSSMaxMB float64 `json:"steady_rss_max_mb"`
	SteadyHeapMB   float64 `json:"steady_heap_mb"`
	// SteadyCPUCores is CPU time over wall time during the window (1.0 = one core), of this process only.
	SteadyCPUCores float64 `json:"steady_cpu_cores"`
	// SteadyReconciles is how many instance reconciles ran during the idle window, and
	// SteadyReconcilesPerS that over the window's length.
	SteadyReconciles     int     `json:"steady_reconciles"`
	SteadyReconcilesPerS float64 `json:"steady_reconciles_per_s"`
	SteadyWindowS        float64 `json:"steady_window_s"`
	// ScrapeMS is the median of five Prometheus scrapes of the API's registry at rest (its collectors
	// report every object count by kind and phase); ScrapeMaxMS the slowest of them.
	ScrapeMS    float64 `json:"scrape_ms"`
	ScrapeMaxMS float64 `json:"scrape_max_ms,omitempty"`
	// ResyncS is from a restart of the control plane until every instance had been reconciled again.
	ResyncS          float64 `json:"resync_s"`
	ResyncReconciles int     `json:"resync_reconciles"`
	// ChurnWindowS is the churn's length; UpdateToReconciled and CreateToReconciled its latencies.
	ChurnWindowS float64 `json:"churn_window_s"`
	// ChurnCPUCores, ChurnRSSMB (mean) and ChurnRSSMaxMB are sampled like the idle window's, over the
	// churn window; ChurnReconciles is how many instance reconciles ran in it, ChurnReconcilesPerS that
	// over its length.
	ChurnCPUCores       float64       `json:"churn_cpu_cores"`
	ChurnRSSMB          float64       `json:"churn_rss_mb"`
	ChurnRSSMaxMB       float64       `json:"churn_rss_max_mb"`
	ChurnReconciles     int           `json:"churn_reconciles"`
	ChurnReconcilesPerS float64       `json:"churn_reconciles_per_s"`
	UpdateToReconciled  stats.Summary `json:"update_to_reconciled"`
	CreateToReconciled  stats.Summary `json:"create_to_reconciled"`
	// Errors counts failed creates, updates and waits.
	Errors int `json:"errors"`
	// Skipped says why the backend did not run.
	Skipped string   `json:"skipped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// RowInstances is the size of a row: its own, or the section's for results written before sizes.
func (s *SimResult) RowInstances(r SimRow) int {
	if r.Instances > 0 {
		return r.Instances
	}
	return s.Instances
}

// simMarkdown renders the sim section's tables: every figure per size and backend, then how the cost
// grows with the instance count.
func simMarkdown(s *SimResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	sizes := s.Sizes
	if len(sizes) == 0 {
		sizes = []int{s.Instances}
	}
	names := make([]string, len(sizes))
	for i, n := range sizes {
		names[i] = fmt.Sprint(n)
	}
	p("## Simulation: %s instances, no-op compute\n\n", strings.Join(names, ", "))
	p("The control plane alone (API, store, NATS, reconcile runtime, status writes) with a no-op workload_instance "+
		"reconciler that reads and renders like the real one but applies nothing; %d kubeconfig runtimes; "+
		"churn at %.0f updates/s plus %.0f creates/s. RSS and CPU are the harness process's (PostgreSQL's own server is not counted).\n\n",
		s.Runtimes, s.UpdateRate, s.UpdateRate/10)
	p("| figure |")
	for _, r := range s.Rows {
		p(" %d, %s |", s.RowInstances(r), r.Backend)
	}
	p("\n|---|")
	for range s.Rows {
		p("---|")
	}
	p("\n")
	row := func(name string, f func(r SimRow) string) {
		p("| %s |", name)
		for _, r := range s.Rows {
			if r.Skipped != "" {
				p(" skipped: %s |", cell(r.Skipped))
				continue
			}
			p(" %s |", f(r))
		}
		p("\n")
	}
	row("reconciled at the end of creation", func(r SimRow) string { return fmt.Sprintf("%d of %d", r.Reconciled, s.RowInstances(r)) })
	row("API accepted every create in", func(r SimRow) string {
		return fmt.Sprintf("%.1f s (%.0f/s)", r.CreateAPIS, float64(s.RowInstances(r))/max(r.CreateAPIS, 0.001))
	})
	row("every instance reconciled after the first create", func(r SimRow) string {
		return fmt.Sprintf("%.1f s (%.0f/s; %d reconciles)", r.CreateS, float64(r.Reconciled)/max(r.CreateS, 0.001), r.CreateReconciles)
	})
	row("last create accepted to every instance reconciled", func(r SimRow) string { return fmt.Sprintf("%.1f s", r.LastCreateToReconciledS) })
	row("idle RSS mean / max (harness baseline)", func(r SimRow) string {
		return fmt.Sprintf("%.0f / %.0f MB (%.0f MB)", r.SteadyRSSMB, r.SteadyRSSMaxMB, r.BaselineRSSMB)
	})
	row("idle Go heap in use (baseline)", func(r SimRow) string {
		return fmt.Sprintf("%.0f MB (%.0f MB)", r.SteadyHeapMB, r.BaselineHeapMB)
	})
	row("idle CPU, reconciles in the window", func(r SimRow) string {
		return fmt.Sprintf("%.3f cores over %.0f s, %d reconciles (%.1f/s)", r.SteadyCPUCores, r.SteadyWindowS, r.SteadyReconciles, r.SteadyReconcilesPerS)
	})
	row("one /metrics scrape of the API, median / max of 5", func(r SimRow) string { return fmt.Sprintf("%.1f / %.1f ms", r.ScrapeMS, r.ScrapeMaxMS) })
	row("full resync (restart until every instance reconciled again)", func(r SimRow) string {
		return fmt.Sprintf("%.1f s (%d reconciles)", r.ResyncS, r.ResyncReconciles)
	})
	row("under churn: CPU, RSS mean / max, reconciles", func(r SimRow) string {
		return fmt.Sprintf("%.2f cores, %.0f / %.0f MB, %d (%.1f/s) over %.0f s", r.ChurnCPUCores, r.ChurnRSSMB, r.ChurnRSSMaxMB, r.ChurnReconciles, r.ChurnReconcilesPerS, r.ChurnWindowS)
	})
	row("update-to-reconciled p50 / p99 / max", func(r SimRow) string {
		u := r.UpdateToReconciled
		return fmt.Sprintf("%.0f / %.0f / %.0f ms (n=%d)", u.P50MS, u.P99MS, u.MaxMS, u.N)
	})
	row("create-to-reconciled p50 / p99 / max", func(r SimRow) string {
		c := r.CreateToReconciled
		return fmt.Sprintf("%.0f / %.0f / %.0f ms (n=%d)", c.P50MS, c.P99MS, c.MaxMS, c.N)
	})
	row("errors", func(r SimRow) string { return fmt.Sprintf("%d", r.Errors) })
	p("\n")
	for _, r := range s.Rows {
		for _, n := range r.Notes {
			p("- %d, %s: %s\n", s.RowInstances(r), r.Backend, n)
		}
	}
	p("\n")

	p("How the cost grows with the instance count (at rest: the idle window; under churn: %.0f updates/s):\n\n", s.UpdateRate)
	p("| backend | instances | reconciles/s at rest | under churn | CPU cores at rest | under churn | RSS MB at rest (mean / max) | under churn (mean / max) |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Rows {
		if r.Skipped != "" {
			continue
		}
		p("| %s | %d | %.1f | %.1f | %.3f | %.2f | %.0f / %.0f | %.0f / %.0f |\n", r.Backend, s.RowInstances(r),
			r.SteadyReconcilesPerS, r.ChurnReconcilesPerS, r.SteadyCPUCores, r.ChurnCPUCores, r.SteadyRSSMB, r.SteadyRSSMaxMB, r.ChurnRSSMB, r.ChurnRSSMaxMB)
	}
	p("\n")
	return b.String()
}
