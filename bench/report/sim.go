package report

import (
	"fmt"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// SimResult is the sim section: the control plane alone at a large number of instances, with a no-op
// compute adapter (app.Config.SimulateCompute), on SQLite and on PostgreSQL.
type SimResult struct {
	// Instances asked for per backend, and the runtimes they are spread over (kubeconfig runtimes of
	// one kubesim cluster that no instance ever reaches).
	Instances int `json:"instances"`
	Runtimes  int `json:"runtimes"`
	// UpdateRate is the churn's updates per second (creates run at a tenth of it).
	UpdateRate float64 `json:"update_rate_per_s"`
	// Rows holds one row per backend.
	Rows []SimRow `json:"rows"`
}

// SimRow is one backend of the sim section.
type SimRow struct {
	// Backend is e.g. "SQLite, API + 1 controller app" or "PostgreSQL, API + 2 controller replicas".
	Backend string `json:"backend"`
	// Reconciled is how many instances were reconciled when creation ended.
	Reconciled int `json:"reconciled"`
	// CreateAPIS is the time the API took to accept every create; CreateS until every instance was
	// reconciled (or the deadline).
	CreateAPIS float64 `json:"create_api_s"`
	CreateS    float64 `json:"create_s"`
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
	// SteadyReconciles is how many instance reconciles ran during the window (the drift pass).
	SteadyReconciles int     `json:"steady_reconciles"`
	SteadyWindowS    float64 `json:"steady_window_s"`
	// ScrapeMS is how long one Prometheus scrape of the API's registry took at steady state (its
	// collectors count every object by kind and phase).
	ScrapeMS float64 `json:"scrape_ms"`
	// ResyncS is from a restart of the control plane until every instance had been reconciled again.
	ResyncS          float64 `json:"resync_s"`
	ResyncReconciles int     `json:"resync_reconciles"`
	// ChurnWindowS is the churn's length; UpdateToReconciled and CreateToReconciled its latencies.
	ChurnWindowS       float64       `json:"churn_window_s"`
	UpdateToReconciled stats.Summary `json:"update_to_reconciled"`
	CreateToReconciled stats.Summary `json:"create_to_reconciled"`
	// Errors counts failed creates, updates and waits.
	Errors int `json:"errors"`
	// Skipped says why the backend did not run.
	Skipped string   `json:"skipped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// simMarkdown renders the sim section's table.
func simMarkdown(s *SimResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Simulation: %d instances, no-op compute\n\n", s.Instances)
	p("The control plane alone (API, store, NATS, reconcile runtime, status writes) with a no-op workload_instance "+
		"reconciler that reads and renders like the real one but applies nothing; %d kubeconfig runtimes; "+
		"churn at %.0f updates/s plus %.0f creates/s. RSS and CPU are the harness process's (PostgreSQL's own server is not counted).\n\n",
		s.Runtimes, s.UpdateRate, s.UpdateRate/10)
	p("| figure |")
	for _, r := range s.Rows {
		p(" %s |", r.Backend)
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
	row("reconciled at the end of creation", func(r SimRow) string { return fmt.Sprintf("%d of %d", r.Reconciled, s.Instances) })
	row("API accepted every create in", func(r SimRow) string {
		return fmt.Sprintf("%.1f s (%.0f/s)", r.CreateAPIS, float64(s.Instances)/max(r.CreateAPIS, 0.001))
	})
	row("every instance reconciled after", func(r SimRow) string {
		return fmt.Sprintf("%.1f s (%.0f/s; %d reconciles)", r.CreateS, float64(r.Reconciled)/max(r.CreateS, 0.001), r.CreateReconciles)
	})
	row("steady-state RSS mean / max (harness baseline)", func(r SimRow) string {
		return fmt.Sprintf("%.0f / %.0f MB (%.0f MB)", r.SteadyRSSMB, r.SteadyRSSMaxMB, r.BaselineRSSMB)
	})
	row("steady-state Go heap in use (baseline)", func(r SimRow) string {
		return fmt.Sprintf("%.0f MB (%.0f MB)", r.SteadyHeapMB, r.BaselineHeapMB)
	})
	row("steady-state CPU, reconciles in the window", func(r SimRow) string {
		return fmt.Sprintf("%.2f cores over %.0f s, %d reconciles", r.SteadyCPUCores, r.SteadyWindowS, r.SteadyReconciles)
	})
	row("one /metrics scrape of the API (counts every object)", func(r SimRow) string { return fmt.Sprintf("%.0f ms", r.ScrapeMS) })
	row("full resync (restart until every instance reconciled again)", func(r SimRow) string {
		return fmt.Sprintf("%.1f s (%d reconciles)", r.ResyncS, r.ResyncReconciles)
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
			p("- %s: %s\n", r.Backend, n)
		}
	}
	p("\n")
	return b.String()
}
