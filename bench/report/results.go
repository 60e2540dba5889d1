// Package report holds the results of a benchmark run and writes them out: the JSON results file, a
// Markdown table and PNG charts.
package report

import (
	"time"

	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// Results is everything one run measured. It is written as bench/results/<timestamp>.json.
type Results struct {
	// StartedAt and FinishedAt bound the run.
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Command is the command line of the run.
	Command string `json:"command"`
	// Machine describes where it ran.
	Machine Machine `json:"machine"`
	// Sections lists the sections that ran.
	Sections []string `json:"sections"`

	Apply      []ApplyRow      `json:"apply,omitempty"`
	Throughput []ThroughputRow `json:"throughput,omitempty"`
	Terraform  []TerraformRow  `json:"terraform,omitempty"`
	Scale      *ScaleResult    `json:"scale,omitempty"`
	ColdStart  []ColdStartRow  `json:"cold_start,omitempty"`
	// Sim is the sim section: 100,000 instances with no-op compute (see SimResult).
	Sim *SimResult `json:"sim,omitempty"`
	// Layers is the layers section: an app with no infrastructure applied through QleetOS and directly,
	// the plan preview's latency and the graph endpoint at scale.
	Layers *LayersResult `json:"layers,omitempty"`
	// Delete is the delete section: delete-to-gone through QleetOS against client-go (see DeleteResult).
	Delete *DeleteResult `json:"delete,omitempty"`

	// Goals are the targets and where this run puts each.
	Goals []Goal `json:"goals,omitempty"`
	// Profiles are the CPU and heap profiles taken during the run.
	Profiles []Profile `json:"profiles,omitempty"`
	// Notes record what was skipped or adapted, and why.
	Notes []string `json:"notes,omitempty"`
}

// Machine describes the machine a run was on.
type Machine struct {
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpu_model"`
	MemoryGB  float64 `json:"memory_gb"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go_version"`
	// GOGC is the garbage collector's target the run's control plane had (app.TuneGC: the qleet server's
	// default, or GOGC from the environment).
	GOGC int `json:"gogc,omitempty"`
	// LoadBefore is the 1-minute load average when the run started (other work on a shared machine).
	LoadBefore float64 `json:"load_before"`
	// LoadAfter is the 1-minute load average when the run finished.
	LoadAfter float64 `json:"load_after"`
	// GitCommit is the commit of the working tree (which may have local changes).
	GitCommit string `json:"git_commit"`
}

// Apply methods.
const (
	MethodClientGo = "a: client-go SSA + watch Available"
	MethodKubectl  = "b: kubectl apply + rollout status"
	MethodAPI      = "c: QleetOS API + ?wait=reconciled"
	MethodGoClient = "d: Go client WaitReconciled"
)

// ApplyRow is one method at one N: apply-to-ready latency per workload over every round.
type ApplyRow struct {
	Method string `json:"method"`
	// N is the number of workloads applied at once in a round; Rounds how many rounds ran.
	N      int `json:"n"`
	Rounds int `json:"rounds"`
	// Run numbers the runs of the apply section in one benchmark run, from 1 (0 in results written
	// before there were several).
	Run int `json:"run,omitempty"`
	// Latency summarises apply-to-ready per workload.
	Latency stats.Summary `json:"latency"`
	// Throughput is workloads ready per second of round wall time (mean over rounds).
	Throughput float64 `json:"throughput_per_s"`
	// RatioP50 and RatioP99 divide this method's percentile by method a's at the same N.
	RatioP50 float64 `json:"ratio_p50_vs_a"`
	RatioP99 float64 `json:"ratio_p99_vs_a"`
	// Errors counts workloads that failed or timed out.
	Errors int `json:"errors"`
	// ReconcilesPerWorkload is, for the methods that go through QleetOS, how many workload_instance
	// reconciles the control plane finished during the method's batches, per workload applied.
	ReconcilesPerWorkload float64 `json:"reconciles_per_workload,omitempty"`
	// Skipped says why the method did not run.
	Skipped string `json:"skipped,omitempty"`
	// SamplesMS are the raw latencies.
	SamplesMS []float64 `json:"samples_ms,omitempty"`
}

// Throughput targets.
const (
	TargetQleetSQLite   = "QleetOS create (SQLite)"
	TargetQleetPostgres = "QleetOS create (PostgreSQL)"
	TargetKube          = "kube-apiserver ConfigMap create"
	TargetRawSQLite     = "raw SQLite commit (INSERT per tx)"
	TargetRawPostgres   = "raw PostgreSQL commit (INSERT per tx)"
	// TargetRawSQLiteOutbox and TargetRawPostgresOutbox commit an object row and an outbox row per
	// transaction, in the store's own tables: what one create must write, with nothing else.
	TargetRawSQLiteOutbox   = "raw SQLite commit (object + outbox row per tx)"
	TargetRawPostgresOutbox = "raw PostgreSQL commit (object + outbox row per tx)"
)

// ThroughputRow is one target at one concurrency.
type ThroughputRow struct {
	Target      string `json:"target"`
	Concurrency int    `json:"concurrency"`
	// OpsPerSec is successful operations per second.
	OpsPerSec float64 `json:"ops_per_s"`
	// Latency summarises per-operation latency.
	Latency stats.Summary `json:"latency"`
	// RatioVsKube divides OpsPerSec by kube-apiserver's at the same concurrency.
	RatioVsKube float64 `json:"ratio_vs_kube"`
	// RatioVsRaw divides a QleetOS target's OpsPerSec by the raw commit rate with the outbox row on the
	// same database at the same concurrency (0 for the other targets).
	RatioVsRaw float64 `json:"ratio_vs_raw,omitempty"`
	// Errors counts failed operations.
	Errors  int    `json:"errors"`
	Skipped string `json:"skipped,omitempty"`
}

// TerraformRow is terraform apply and the following plan for N workloads, next to client-go applying the
// same objects.
type TerraformRow struct {
	N int `json:"n"`
	// ApplyS is the wall time of `terraform apply` (it returns when every instance is reconciled).
	ApplyS float64 `json:"apply_s"`
	// PlanS is the wall time of the `terraform plan` that follows (a refresh of every resource).
	PlanS float64 `json:"plan_s"`
	// PlanClean says the plan found no changes.
	PlanClean bool `json:"plan_clean"`
	// DestroyS is the wall time of `terraform destroy` (cleanup; informative).
	DestroyS float64 `json:"destroy_s"`
	// ClientGoS is the wall time of client-go applying the same objects and waiting for Available, at
	// terraform's default parallelism (10).
	ClientGoS float64 `json:"client_go_s"`
	// Ratio is ApplyS / ClientGoS.
	Ratio   float64 `json:"ratio_apply_vs_client_go"`
	Skipped string  `json:"skipped,omitempty"`
}

// ScaleResult is the scale section.
type ScaleResult struct {
	// Instances asked for, and how many were reconciled when creation ended.
	Instances  int `json:"instances"`
	Reconciled int `json:"reconciled"`
	Runtimes   int `json:"runtimes"`
	Clusters   int `json:"clusters"`
	Replicas   int `json:"replicas"`
	// CreateS is the time from the first create until every instance was reconciled (or the deadline).
	CreateS float64 `json:"create_s"`
	// CreateAPIS is the time the API took to accept every create.
	CreateAPIS float64 `json:"create_api_s"`
	// BaselineRSSMB is the harness process's RSS before the control plane started (subtract it).
	BaselineRSSMB float64 `json:"baseline_rss_mb"`
	// SteadyRSSMB is the process RSS at steady state (mean and max over the window).
	SteadyRSSMB    float64 `json:"steady_rss_mb"`
	SteadyRSSMaxMB float64 `json:"steady_rss_max_mb"`
	// SteadyHeapMB is the Go heap in use at the end of the window.
	SteadyHeapMB float64 `json:"steady_heap_mb"`
	// SteadyCPUCores is CPU time over wall time during the window (1.0 = one core busy).
	SteadyCPUCores float64 `json:"steady_cpu_cores"`
	// SteadyWindowS is the length of the window.
	SteadyWindowS float64 `json:"steady_window_s"`
	// IdleSettleS is how long the section waited, after creation, for a 3 s quiet spell before the idle
	// window.
	IdleSettleS float64 `json:"idle_settle_s,omitempty"`
	// IdleCountsMeasured says whether the idle window's requests below were counted.
	IdleCountsMeasured bool `json:"idle_counts_measured,omitempty"`
	// IdleAPIRequests is how many API requests the control plane served during the idle window, and
	// IdleAPIRoutes which ("METHOD route ×count").
	IdleAPIRequests int    `json:"idle_api_requests"`
	IdleAPIRoutes   string `json:"idle_api_routes,omitempty"`
	// IdleClusterCalls is how many requests other than watches the controllers made to the clusters
	// during the idle window; IdleClusterWatches how many watches they opened in it.
	IdleClusterCalls   int64 `json:"idle_cluster_calls"`
	IdleClusterWatches int64 `json:"idle_cluster_watches"`
	// ResyncS is the time of a full resync: from a restart of the control plane until every instance had
	// been reconciled again.
	ResyncS float64 `json:"resync_s"`
	// ResyncDeliveries is how many reconciles the resync took.
	ResyncDeliveries int `json:"resync_deliveries"`
	// ChurnRate is the update rate (per second) during the churn window.
	ChurnRate    float64 `json:"churn_rate_per_s"`
	ChurnWindowS float64 `json:"churn_window_s"`
	// CreateToReconciled is create-to-reconciled of instances created during the churn.
	CreateToReconciled stats.Summary `json:"create_to_reconciled"`
	// UpdateToReconciled is update-to-reconciled of the churn updates.
	UpdateToReconciled stats.Summary `json:"update_to_reconciled"`
	// DirectCreateToAvailable is client-go apply-to-Available of Deployments created at the same rate,
	// in the same window, on the same clusters: the floor set by the cluster.
	DirectCreateToAvailable stats.Summary `json:"direct_create_to_available"`
	// Errors counts failed creates, updates and waits.
	Errors int      `json:"errors"`
	Notes  []string `json:"notes,omitempty"`
	// RSSSeries samples RSS (MB) once a second through the whole section, for the chart.
	RSSSeries []Point `json:"rss_series,omitempty"`
	// ReconciledSeries counts reconciled instances over time during creation, for the chart.
	ReconciledSeries []Point `json:"reconciled_series,omitempty"`
	// ChurnSamplesMS are the create-to-reconciled samples.
	ChurnSamplesMS []float64 `json:"churn_samples_ms,omitempty"`
	// DirectSamplesMS are the direct baseline samples.
	DirectSamplesMS []float64 `json:"direct_samples_ms,omitempty"`
}

// Point is one sample of a time series: T seconds since the start, value V.
type Point struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

// ColdStartRow is `qleet server` start to /readyz.
type ColdStartRow struct {
	// Case is "cold (empty data dir)" or "warm (existing data dir)".
	Case    string        `json:"case"`
	Latency stats.Summary `json:"latency"`
	Skipped string        `json:"skipped,omitempty"`
}

// Goal is one of the targets.
type Goal struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	// Value is what this run measured, as text.
	Value string `json:"value"`
	// Status is "met", "missed" or "not measured".
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Profile is a pprof profile taken during a section.
type Profile struct {
	Section string `json:"section"`
	Kind    string `json:"kind"`
	// File is relative to the results directory.
	File string `json:"file"`
	// Top is the head of `go tool pprof -top`.
	Top string `json:"top,omitempty"`
}

// LayersResult is the layers section.
type LayersResult struct {
	// Apply is apply-to-ready of an app with no infrastructure (a cluster from a runtime profile, support
	// services, a gateway with TLS, a database), directly and through QleetOS.
	Apply []LayersApplyRow `json:"apply,omitempty"`
	// Plan is POST /v1/plans of the quickstart at several store sizes.
	Plan []PlanLatencyRow `json:"plan,omitempty"`
	// Graph is GET /v1/graph at scale.
	Graph []GraphRow `json:"graph,omitempty"`
	// Notes record what was adapted or failed.
	Notes []string `json:"notes,omitempty"`
}

// Layers apply methods.
const (
	MethodLayersDirect = "direct: kubesim + Helm SDK + client-go, step after step"
	MethodLayersQleet  = "QleetOS API: declare, wait for instance, gateway and database Ready"
)

// LayersApplyRow is one method of the layers apply over every round.
type LayersApplyRow struct {
	Method string `json:"method"`
	Rounds int    `json:"rounds"`
	// Total summarises the time from the first call until the app, its database and its gateway were Ready.
	Total stats.Summary `json:"total"`
	// Layers is when each layer was Ready, counted from the start (medians over rounds).
	Layers []LayerTime `json:"layers"`
	// RatioP50 divides Total's p50 by the direct method's.
	RatioP50 float64 `json:"ratio_p50_vs_direct"`
	// Errors counts rounds that failed or timed out.
	Errors  int    `json:"errors"`
	Skipped string `json:"skipped,omitempty"`
	// SamplesMS are the raw totals.
	SamplesMS []float64 `json:"samples_ms,omitempty"`
}

// LayerTime is when one layer was Ready, from the start of a layers apply.
type LayerTime struct {
	Layer string `json:"layer"`
	// DoneAtMS is the median over rounds; MaxMS the largest.
	DoneAtMS float64 `json:"done_at_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// PlanLatencyRow is the plan preview of the quickstart with StoreObjects objects already stored.
type PlanLatencyRow struct {
	StoreObjects int `json:"store_objects"`
	// PlannedObjects is how many objects the plan's graph holds (requested, implied and the stored ones
	// they touch).
	PlannedObjects int           `json:"planned_objects"`
	Rounds         int           `json:"rounds"`
	Latency        stats.Summary `json:"latency"`
	ResponseBytes  int           `json:"response_bytes"`
	Errors         int           `json:"errors"`
}

// GraphRow is GET /v1/graph (whole, or with a root) with Objects objects stored.
type GraphRow struct {
	Query         string        `json:"query"`
	Objects       int           `json:"objects"`
	Nodes         int           `json:"nodes"`
	Edges         int           `json:"edges"`
	Rounds        int           `json:"rounds"`
	Latency       stats.Summary `json:"latency"`
	ResponseBytes int           `json:"response_bytes"`
	Errors        int           `json:"errors"`
}
