package report

import (
	"fmt"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// Delete methods.
const (
	// DeleteClientGo deletes a namespace (holding a Deployment) with client-go and watches until it is gone.
	DeleteClientGo = "client-go delete namespace + watch gone"
	// DeleteAPI deletes an instance through the API and waits with GET ?wait=gone until 404.
	DeleteAPI = "QleetOS API DELETE + ?wait=gone"
	// DeleteClientGoParallel is DeleteClientGo at terraform's parallelism (10).
	DeleteClientGoParallel = "client-go delete namespace + watch gone, 10 at a time"
	// DeleteTerraform is `terraform destroy` of instances (parallelism 10).
	DeleteTerraform = "terraform destroy"
)

// DeleteResult is the delete section: delete-to-gone through QleetOS beside client-go deleting the
// same kind of namespaces on the same cluster.
type DeleteResult struct {
	// Rows hold, per N, the client-go baseline first and then QleetOS.
	Rows []DeleteRow `json:"rows"`
	// Notes record what was skipped, and why.
	Notes []string `json:"notes,omitempty"`
}

// DeleteRow is one method at one N.
type DeleteRow struct {
	Method string `json:"method"`
	N      int    `json:"n"`
	Rounds int    `json:"rounds"`
	// Latency is per workload, from its delete request until it was seen gone (empty for terraform,
	// which is timed as a whole).
	Latency   stats.Summary `json:"latency"`
	SamplesMS []float64     `json:"samples_ms,omitempty"`
	// WallS is the mean wall time of a batch of N.
	WallS float64 `json:"wall_s"`
	// RatioP50, RatioP99 and RatioWall divide this row's figures by the client-go row's at the same N.
	RatioP50  float64 `json:"ratio_p50"`
	RatioP99  float64 `json:"ratio_p99"`
	RatioWall float64 `json:"ratio_wall"`
	// Errors counts workloads that failed (to be created, deleted, or that left their namespace behind).
	Errors  int    `json:"errors"`
	Skipped string `json:"skipped,omitempty"`
}

// deleteMarkdown renders the delete section.
func deleteMarkdown(d *DeleteResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Delete to gone (per workload: a 3-replica Deployment in its own namespace)\n\n")
	p("| method | N | rounds | p50 ms | p99 ms | max ms | batch wall s | p50 ÷ client-go | p99 ÷ client-go | wall ÷ client-go | errors |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range d.Rows {
		if r.Skipped != "" {
			p("| %s | %d | – | skipped: %s | | | | | | | |\n", r.Method, r.N, cell(r.Skipped))
			continue
		}
		if r.Latency.N == 0 {
			p("| %s | %d | %d | – | – | – | %.1f | – | – | %.2f | %d |\n", r.Method, r.N, r.Rounds, r.WallS, r.RatioWall, r.Errors)
			continue
		}
		p("| %s | %d | %d | %.0f | %.0f | %.0f | %.1f | %.2f | %.2f | %.2f | %d |\n", r.Method, r.N, r.Rounds,
			r.Latency.P50MS, r.Latency.P99MS, r.Latency.MaxMS, r.WallS, r.RatioP50, r.RatioP99, r.RatioWall, r.Errors)
	}
	p("\n")
	for _, n := range d.Notes {
		p("- %s\n", n)
	}
	if len(d.Notes) > 0 {
		p("\n")
	}
	return b.String()
}
