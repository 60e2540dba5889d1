package report

import (
	"fmt"
	"strings"
)

// Markdown renders the results as the Markdown tables of latest.md (and of docs/benchmarks.md).
func Markdown(res *Results, stamp string, charts []string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := res.Machine
	p("# QleetOS benchmark results\n\n")
	p("Run %s (%s), `%s`.\n\n", stamp, res.FinishedAt.Sub(res.StartedAt).Round(1e9), res.Command)
	gogc := ""
	if m.GOGC != 0 {
		gogc = fmt.Sprintf(", GOGC %d", m.GOGC)
	}
	p("Machine: %d CPUs (%s), %.0f GB RAM, Linux %s, %s%s, commit %s. Load average (1 min) %.1f before, %.1f after: the machine is shared, so read ratios, not absolute times.\n\n",
		m.CPUs, m.CPUModel, m.MemoryGB, m.Kernel, m.GoVersion, gogc, m.GitCommit, m.LoadBefore, m.LoadAfter)

	if len(res.Goals) > 0 {
		p("## Goals\n\n| goal | target | this run | status | note |\n|---|---|---|---|---|\n")
		for _, g := range res.Goals {
			p("| %s | %s | %s | **%s** | %s |\n", g.Name, g.Target, cell(Dash(g.Value)), g.Status, cell(g.Note))
		}
		p("\n")
	}

	if len(res.Apply) > 0 {
		p("## 1. Apply to ready (per workload; 3-replica Deployment in its own namespace)\n\n")
		p("| run | method | N | rounds | p50 ms | p99 ms | max ms | throughput /s | p50 ÷ a | p99 ÷ a | reconciles per workload | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range res.Apply {
			if r.Skipped != "" {
				p("| %d | %s | %d | – | skipped: %s | | | | | | | |\n", max(r.Run, 1), r.Method, r.N, cell(r.Skipped))
				continue
			}
			recs := "–"
			if r.ReconcilesPerWorkload > 0 {
				recs = fmt.Sprintf("%.1f", r.ReconcilesPerWorkload)
			}
			p("| %d | %s | %d | %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %s | %d |\n", max(r.Run, 1), r.Method, r.N, r.Rounds,
				r.Latency.P50MS, r.Latency.P99MS, r.Latency.MaxMS, r.Throughput, r.RatioP50, r.RatioP99, recs, r.Errors)
		}
		p("\n")
	}

	if len(res.Throughput) > 0 {
		p("## 2. API write throughput\n\n| target | concurrency | ops/s | p50 ms | p99 ms | ÷ kube-apiserver | ÷ raw commit (object + outbox row) | errors |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range res.Throughput {
			if r.Skipped != "" {
				p("| %s | %d | skipped: %s | | | | | |\n", r.Target, r.Concurrency, cell(r.Skipped))
				continue
			}
			raw := ""
			if r.RatioVsRaw > 0 {
				raw = fmt.Sprintf("%.0f%%", 100*r.RatioVsRaw)
			}
			p("| %s | %d | %.0f | %.1f | %.1f | %.2f | %s | %d |\n", r.Target, r.Concurrency, r.OpsPerSec, r.Latency.P50MS, r.Latency.P99MS, r.RatioVsKube, raw, r.Errors)
		}
		p("\n")
	}

	if len(res.Terraform) > 0 {
		p("## 3. Terraform\n\n| N | terraform apply s | plan (refresh) s | plan clean | destroy s | client-go apply+Available s | apply ÷ client-go |\n|---|---|---|---|---|---|---|\n")
		for _, r := range res.Terraform {
			if r.Skipped != "" {
				p("| %d | skipped: %s | | | | | |\n", r.N, cell(r.Skipped))
				continue
			}
			p("| %d | %.1f | %.1f | %v | %.1f | %.1f | %.2f |\n", r.N, r.ApplyS, r.PlanS, r.PlanClean, r.DestroyS, r.ClientGoS, r.Ratio)
		}
		p("\n")
	}

	if s := res.Scale; s != nil {
		p("## 4. Scale\n\n")
		p("%d instances asked for (%d reconciled) over %d runtimes in %d kubesim clusters, %d replica(s) each.\n\n", s.Instances, s.Reconciled, s.Runtimes, s.Clusters, s.Replicas)
		p("| figure | value |\n|---|---|\n")
		p("| API accepted every create in | %.1f s |\n", s.CreateAPIS)
		p("| every instance reconciled after | %.1f s |\n", s.CreateS)
		p("| idle RSS (mean / max over %.0f s) | %.0f / %.0f MB (harness baseline before the control plane: %.0f MB) |\n", s.SteadyWindowS, s.SteadyRSSMB, s.SteadyRSSMaxMB, s.BaselineRSSMB)
		p("| idle Go heap in use | %.0f MB |\n", s.SteadyHeapMB)
		p("| idle CPU | %.3f cores |\n", s.SteadyCPUCores)
		if s.IdleCountsMeasured {
			p("| idle: API requests served, cluster calls (watches apart), watches opened | %d%s, %d, %d (after %.0f s of settling) |\n",
				s.IdleAPIRequests, Parenthesized(s.IdleAPIRoutes), s.IdleClusterCalls, s.IdleClusterWatches, s.IdleSettleS)
		}
		p("| full resync (restart until every instance reconciled again) | %.1f s (%d reconciles) |\n", s.ResyncS, s.ResyncDeliveries)
		p("| churn | %.0f updates/s for %.0f s |\n", s.ChurnRate, s.ChurnWindowS)
		p("| create-to-reconciled under churn p50 / p99 / max | %.0f / %.0f / %.0f ms (n=%d) |\n", s.CreateToReconciled.P50MS, s.CreateToReconciled.P99MS, s.CreateToReconciled.MaxMS, s.CreateToReconciled.N)
		p("| update-to-reconciled under churn p50 / p99 / max | %.0f / %.0f / %.0f ms (n=%d) |\n", s.UpdateToReconciled.P50MS, s.UpdateToReconciled.P99MS, s.UpdateToReconciled.MaxMS, s.UpdateToReconciled.N)
		p("| direct client-go apply-to-Available, same window, p50 / p99 / max | %.0f / %.0f / %.0f ms (n=%d) |\n", s.DirectCreateToAvailable.P50MS, s.DirectCreateToAvailable.P99MS, s.DirectCreateToAvailable.MaxMS, s.DirectCreateToAvailable.N)
		p("| errors | %d |\n\n", s.Errors)
		for _, n := range s.Notes {
			p("- %s\n", n)
		}
		if len(s.Notes) > 0 {
			p("\n")
		}
	}

	if len(res.ColdStart) > 0 {
		p("## 5. `qleet server` start to /readyz\n\n| case | n | p50 ms | max ms |\n|---|---|---|---|\n")
		for _, r := range res.ColdStart {
			if r.Skipped != "" {
				p("| %s | skipped: %s | | |\n", r.Case, cell(r.Skipped))
				continue
			}
			p("| %s | %d | %.0f | %.0f |\n", r.Case, r.Latency.N, r.Latency.P50MS, r.Latency.MaxMS)
		}
		p("\n")
	}

	if l := res.Layers; l != nil {
		layersMarkdown(p, l)
	}

	if res.Sim != nil {
		b.WriteString(simMarkdown(res.Sim))
	}

	if res.Delete != nil {
		b.WriteString(deleteMarkdown(res.Delete))
	}

	if len(charts) > 0 {
		p("## Charts\n\n")
		for _, c := range charts {
			p("![%s](%s/%s)\n", c, stamp, c)
		}
		p("\n")
	}
	if len(res.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range res.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	if len(res.Profiles) > 0 {
		p("## Profiles\n\nIn `%s/`; open with `go tool pprof -http : <file>`.\n\n", stamp)
		for _, pr := range res.Profiles {
			p("<details><summary>%s %s (%s)</summary>\n\n```\n%s\n```\n</details>\n\n", pr.Section, pr.Kind, pr.File, headLines(pr.Top, 32))
		}
	}
	return b.String()
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "/", "\n", " ").Replace(s)
}

// Parenthesized is " (s)", or nothing when s is empty.
func Parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// Dash is s, or "–" when s is empty.
func Dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func headLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// layersMarkdown renders the layers section.
func layersMarkdown(p func(string, ...any), l *LayersResult) {
	p("## 6. The layers\n\n")
	if len(l.Apply) > 0 {
		p("An app with no infrastructure: a cluster from a runtime profile, ingress and cert-manager, a gateway with TLS, a database. ")
		p("The direct method does the same steps one after another on its own kubesim; QleetOS gets the objects declared at once and orders them itself.\n\n")
		p("| method | rounds | total p50 s | total max s | ÷ direct (p50) | errors |\n|---|---|---|---|---|---|\n")
		for _, r := range l.Apply {
			p("| %s | %d | %.1f | %.1f | %.2f | %d |\n", r.Method, r.Rounds, r.Total.P50MS/1000, r.Total.MaxMS/1000, r.RatioP50, r.Errors)
		}
		p("\nWhen each layer was Ready, seconds from the start (median over rounds):\n\n| layer |")
		for _, r := range l.Apply {
			p(" %s |", r.Method)
		}
		p("\n|---|")
		for range l.Apply {
			p("---|")
		}
		p("\n")
		var names []string
		for _, r := range l.Apply {
			for _, t := range r.Layers {
				if !containsString(names, t.Layer) {
					names = append(names, t.Layer)
				}
			}
		}
		for _, n := range names {
			p("| %s |", n)
			for _, r := range l.Apply {
				v := "–"
				for _, t := range r.Layers {
					if t.Layer == n {
						v = fmt.Sprintf("%.1f", t.DoneAtMS/1000)
					}
				}
				p(" %s |", v)
			}
			p("\n")
		}
		p("\n")
	}
	if len(l.Plan) > 0 {
		p("Plan preview (POST /v1/plans) of the quickstart:\n\n| objects stored | objects in the plan | rounds | p50 ms | p99 ms | max ms | response bytes | errors |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range l.Plan {
			p("| %d | %d | %d | %.1f | %.1f | %.1f | %d | %d |\n", r.StoreObjects, r.PlannedObjects, r.Latency.N, r.Latency.P50MS, r.Latency.P99MS, r.Latency.MaxMS, r.ResponseBytes, r.Errors)
		}
		p("\n")
	}
	if len(l.Graph) > 0 {
		p("Graph endpoint (GET /v1/graph):\n\n| query | objects stored | nodes | edges | rounds | p50 ms | p99 ms | max ms | response bytes | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range l.Graph {
			p("| %s | %d | %d | %d | %d | %.0f | %.0f | %.0f | %d | %d |\n", r.Query, r.Objects, r.Nodes, r.Edges, r.Latency.N, r.Latency.P50MS, r.Latency.P99MS, r.Latency.MaxMS, r.ResponseBytes, r.Errors)
		}
		p("\n")
	}
	for _, n := range l.Notes {
		p("- %s\n", cell(n))
	}
	if len(l.Notes) > 0 {
		p("\n")
	}
}

func containsString(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
