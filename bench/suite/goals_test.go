package suite

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// goal returns the goal named name, failing the test when there is none or several.
func goal(t *testing.T, res *report.Results, name string) report.Goal {
	t.Helper()
	var found []report.Goal
	for _, g := range res.Goals {
		if g.Name == name {
			found = append(found, g)
		}
	}
	require.Len(t, found, 1, "goal %q among %v", name, goalNames(res.Goals))
	return found[0]
}

func goalNames(goals []report.Goal) []string {
	var out []string
	for _, g := range goals {
		out = append(out, g.Name)
	}
	return out
}

// evaluate runs EvaluateGoals on res and returns it.
func evaluate(res *report.Results) *report.Results {
	EvaluateGoals(res)
	return res
}

func applyRow(n, run int, p50, p99 float64) report.ApplyRow {
	return report.ApplyRow{Method: report.MethodAPI, N: n, Run: run, Rounds: 2, Latency: stats.Summary{N: 10, P50MS: 1000, P99MS: 2000},
		RatioP50: p50, RatioP99: p99}
}

func TestApplyGoalsJudgeEveryRun(t *testing.T) {
	t.Parallel()
	t.Run("met in both runs", func(t *testing.T) {
		res := evaluate(&report.Results{Apply: []report.ApplyRow{
			applyRow(1, 1, 0.95, 1.30), applyRow(100, 1, 1.05, 1.20),
			applyRow(1, 2, 1.08, 1.12), applyRow(100, 2, 1.02, 1.40),
		}})
		g := goal(t, res, "apply-to-ready overhead, N=1")
		require.Equal(t, goalMet, g.Status, "p99 above 1.10 does not fail the p50 goal")
		require.Equal(t, "run 1: p50 0.95, p99 1.30; run 2: p50 1.08, p99 1.12", g.Value, "each run's ratios show the spread")
		require.Empty(t, g.Note)
		require.Equal(t, goalMet, goal(t, res, "apply-to-ready overhead, N=100").Status)
	})
	t.Run("missed in one run of two", func(t *testing.T) {
		res := evaluate(&report.Results{Apply: []report.ApplyRow{
			applyRow(1, 1, 0.84, 1.0), applyRow(100, 1, 1.48, 1.6),
			applyRow(1, 2, 1.28, 1.49), applyRow(100, 2, 1.09, 1.2),
		}})
		g := goal(t, res, "apply-to-ready overhead, N=1")
		require.Equal(t, goalMissed, g.Status)
		require.Contains(t, g.Value, "run 1: p50 0.84")
		require.Contains(t, g.Value, "run 2: p50 1.28, p99 1.49")
		require.Equal(t, goalMissed, goal(t, res, "apply-to-ready overhead, N=100").Status)
	})
	t.Run("one run only is said so", func(t *testing.T) {
		res := evaluate(&report.Results{Apply: []report.ApplyRow{applyRow(1, 1, 1.0, 1.0)}})
		g := goal(t, res, "apply-to-ready overhead, N=1")
		require.Equal(t, goalMet, g.Status)
		require.Contains(t, g.Note, "one run only")
	})
	t.Run("a skipped run leaves the goal unmeasured", func(t *testing.T) {
		res := evaluate(&report.Results{Apply: []report.ApplyRow{
			applyRow(1, 1, 1.0, 1.0), {Method: report.MethodAPI, N: 1, Run: 2, Skipped: "no instances"},
		}})
		g := goal(t, res, "apply-to-ready overhead, N=1")
		require.Equal(t, goalNotMeasured, g.Status)
		require.Contains(t, g.Note, "run 2: no instances")
	})
}

func layersResult(qleetS, directS float64) *report.LayersResult {
	return &report.LayersResult{Apply: []report.LayersApplyRow{
		{Method: report.MethodLayersDirect, Total: stats.Summary{N: 3, P50MS: directS * 1000}, RatioP50: 1},
		{Method: report.MethodLayersQleet, Total: stats.Summary{N: 3, P50MS: qleetS * 1000}, RatioP50: qleetS / directS},
	}}
}

func TestLayersGoalIsMetOrMissed(t *testing.T) {
	t.Parallel()
	const name = "layers: app with no infrastructure Ready"
	g := goal(t, evaluate(&report.Results{Layers: layersResult(6.0, 6.5)}), name)
	require.Equal(t, goalMet, g.Status)
	require.Equal(t, "0.92× (QleetOS 6.0 s, direct 6.5 s, p50)", g.Value)

	g = goal(t, evaluate(&report.Results{Layers: layersResult(9.2, 6.5)}), name)
	require.Equal(t, goalMissed, g.Status)
	require.Contains(t, g.Value, "1.42×")
}

func scaleResult(cpu float64, apiCalls int, clusterCalls int64) *report.ScaleResult {
	return &report.ScaleResult{
		Instances: 10000, Reconciled: 10000, SteadyWindowS: 30, SteadyCPUCores: cpu, SteadyRSSMB: 400, BaselineRSSMB: 90,
		IdleCountsMeasured: true, IdleAPIRequests: apiCalls, IdleClusterCalls: clusterCalls, IdleClusterWatches: 0,
	}
}

func TestScaleIdleGoals(t *testing.T) {
	t.Parallel()
	res := evaluate(&report.Results{Scale: scaleResult(0.012, 0, 0)})
	g := goal(t, res, "idle CPU, real compute")
	require.Equal(t, goalMet, g.Status)
	require.Equal(t, "0.012 cores over 30 s", g.Value)
	require.Empty(t, g.Note)
	g = goal(t, res, "idle calls, real compute")
	require.Equal(t, goalMet, g.Status)
	require.Equal(t, "0 API requests, 0 cluster calls, 0 watches opened, over 30 s", g.Value)

	s := scaleResult(0.31, 15, 0)
	s.IdleAPIRoutes = "GET /v1/kubernetes_runtimes ×15"
	res = evaluate(&report.Results{Scale: s})
	g = goal(t, res, "idle CPU, real compute")
	require.Equal(t, goalMissed, g.Status)
	require.Contains(t, g.Value, "0.310 cores")
	g = goal(t, res, "idle calls, real compute")
	require.Equal(t, goalMissed, g.Status)
	require.Contains(t, g.Value, "15 API requests (GET /v1/kubernetes_runtimes ×15)")

	res = evaluate(&report.Results{Scale: scaleResult(0.01, 0, 4)})
	g = goal(t, res, "idle calls, real compute")
	require.Equal(t, goalMissed, g.Status, "a cluster call other than a watch misses the goal")
	require.Contains(t, g.Value, "4 cluster calls")

	s = scaleResult(0.01, 0, 0)
	s.Instances, s.Reconciled, s.IdleCountsMeasured = 500, 500, false
	res = evaluate(&report.Results{Scale: s})
	require.Equal(t, goalNotMeasured, goal(t, res, "idle calls, real compute").Status)
	require.Equal(t, "measured at 500 instances, not 10,000", goal(t, res, "idle CPU, real compute").Note)
}

func TestScaleChurnGoal(t *testing.T) {
	t.Parallel()
	s := scaleResult(0.01, 0, 0)
	s.ChurnWindowS = 60
	s.CreateToReconciled = stats.Summary{N: 100, P50MS: 1400, P99MS: 2900}
	s.DirectCreateToAvailable = stats.Summary{N: 100, P50MS: 1000, P99MS: 2000}
	g := goal(t, evaluate(&report.Results{Scale: s}), "create-to-reconciled under churn")
	require.Equal(t, goalMet, g.Status)
	require.Contains(t, g.Value, "p50 1.40×, p99 1.45×")

	s.CreateToReconciled.P99MS = 4840
	g = goal(t, evaluate(&report.Results{Scale: s}), "create-to-reconciled under churn")
	require.Equal(t, goalMissed, g.Status)
	require.Contains(t, g.Value, "p99 2.42×")
}

// simRow is a row that meets every sim goal at n instances.
func simRow(backend string, n int) report.SimRow {
	return report.SimRow{
		Backend: backend, Instances: n, Reconciled: n, CreateAPIS: 60, CreateS: 150, LastCreateToReconciledS: 90,
		SteadyWindowS: 30, SteadyCPUCores: 0.02, SteadyRSSMB: 700, SteadyRSSMaxMB: 720, ChurnRSSMB: 800, ChurnRSSMaxMB: 900,
		BaselineRSSMB: 80, ScrapeMS: 12.5, ScrapeMaxMS: 20, ResyncS: 25, ResyncReconciles: n,
		ChurnWindowS: 30, UpdateToReconciled: stats.Summary{N: 3000, P50MS: 80, P99MS: 640}, CreateToReconciled: stats.Summary{N: 300, P99MS: 700},
	}
}

const (
	sqliteBackend = "SQLite, API + 1 controller app"
	pgBackend     = "PostgreSQL, API + 2 controller replicas"
)

func simResults(rows ...report.SimRow) *report.Results {
	return &report.Results{Sim: &report.SimResult{Sizes: []int{1000, 100000}, Instances: 100000, UpdateRate: 100, Rows: rows}}
}

func TestSimGoalsAreJudgedAtTheLargestSize(t *testing.T) {
	t.Parallel()
	// A small size that misses everything must not count: the goals are set at the largest.
	small := simRow(sqliteBackend, 1000)
	small.SteadyCPUCores, small.ScrapeMS = 3, 900
	res := evaluate(simResults(small, simRow(sqliteBackend, 100000), simRow(pgBackend, 100000)))
	for _, b := range []string{sqliteBackend, pgBackend} {
		want := map[string]string{
			"sim every instance reconciled, 100000 instances, " + b:                 "90.0 s after the last create (150.0 s after the first; the API took 60.0 s)",
			"sim full resync, 100000 instances, " + b:                               "25.0 s (100000 reconciles)",
			"sim update-to-reconciled p99 at 100 updates/s, 100000 instances, " + b: "640 ms (p50 80 ms, n=3000; create-to-reconciled p99 700 ms)",
			"sim idle CPU, 100000 instances, " + b:                                  "0.020 cores over 30 s (0 reconciles)",
			"sim RSS, 100000 instances, " + b:                                       "peak 900 MB (idle mean 700 MB, under churn mean 800 MB; harness baseline 80 MB)",
			"sim /metrics scrape, 100000 instances, " + b:                           "12.5 ms (max 20.0 ms)",
		}
		for name, value := range want {
			g := goal(t, res, name)
			require.Equal(t, goalMet, g.Status, name)
			require.Equal(t, value, g.Value, name)
			require.Empty(t, g.Note, name)
		}
	}
	for _, g := range res.Goals {
		require.NotContains(t, g.Name, "1000 instances", "no goal at the small size")
	}
}

func TestSimGoalsMissed(t *testing.T) {
	t.Parallel()
	r := simRow(pgBackend, 100000)
	r.LastCreateToReconciledS = 240
	r.ResyncS = 45
	r.UpdateToReconciled.P99MS = 162000
	r.SteadyCPUCores = 0.8
	r.ChurnRSSMaxMB = 1500
	r.ScrapeMS, r.ScrapeMaxMS = 2100, 2300
	res := evaluate(simResults(r))
	for name, value := range map[string]string{
		"sim every instance reconciled, 100000 instances, " + pgBackend:                 "240.0 s after the last create",
		"sim full resync, 100000 instances, " + pgBackend:                               "45.0 s",
		"sim update-to-reconciled p99 at 100 updates/s, 100000 instances, " + pgBackend: "162000 ms",
		"sim idle CPU, 100000 instances, " + pgBackend:                                  "0.800 cores",
		"sim RSS, 100000 instances, " + pgBackend:                                       "peak 1500 MB",
		"sim /metrics scrape, 100000 instances, " + pgBackend:                           "2100.0 ms (max 2300.0 ms)",
	} {
		g := goal(t, res, name)
		require.Equal(t, goalMissed, g.Status, name)
		require.Contains(t, g.Value, value, name)
	}

	// Not every instance reconciled: missed, whatever the timing, and said so.
	r = simRow(sqliteBackend, 100000)
	r.Reconciled, r.LastCreateToReconciledS, r.CreateS = 82937, 0, 900
	g := goal(t, evaluate(simResults(r)), "sim every instance reconciled, 100000 instances, "+sqliteBackend)
	require.Equal(t, goalMissed, g.Status)
	require.Contains(t, g.Value, "82937 of 100000 reconciled")
	require.Contains(t, g.Note, "only 82937 of 100000 instances reconciled")

	// A resync that did not reconcile every instance again misses even when quick.
	r = simRow(sqliteBackend, 100000)
	r.ResyncReconciles = 50000
	require.Equal(t, goalMissed, goal(t, evaluate(simResults(r)), "sim full resync, 100000 instances, "+sqliteBackend).Status)
}

func TestSimGoalsBelowTheGoalSizeSaySo(t *testing.T) {
	t.Parallel()
	res := evaluate(&report.Results{Sim: &report.SimResult{Sizes: []int{500, 1000}, Instances: 1000, UpdateRate: 100,
		Rows: []report.SimRow{simRow(sqliteBackend, 500), simRow(sqliteBackend, 1000), {Backend: pgBackend, Instances: 1000, Skipped: "no PostgreSQL"}}}})
	g := goal(t, res, "sim idle CPU, 1000 instances, "+sqliteBackend)
	require.Equal(t, goalMet, g.Status)
	require.Equal(t, "measured at 1000 instances, not 100000", g.Note)
	g = goal(t, res, "sim goals, 1000 instances, "+pgBackend)
	require.Equal(t, goalNotMeasured, g.Status)
	require.Equal(t, "no PostgreSQL", g.Note)
}

func TestSimSizesDefaultAndSort(t *testing.T) {
	t.Parallel()
	c := Config{}
	c.applyDefaults()
	require.Equal(t, []int{1000, 10000, 100000}, c.SimSizes)
	require.Equal(t, 2, c.ApplyRuns)
	require.Equal(t, 30e9, float64(c.SteadyWindow))

	c = Config{SimSizes: []int{100000, 1000, 10000}}
	c.applyDefaults()
	require.Equal(t, []int{1000, 10000, 100000}, c.SimSizes, "sizes run ascending, the largest last")
}

func TestThroughputGoalsOnlyWhenTheSectionRan(t *testing.T) {
	t.Parallel()
	for _, g := range evaluate(&report.Results{}).Goals {
		require.NotContains(t, g.Name, "throughput", "no throughput goal without the section")
	}
	res := evaluate(&report.Results{Throughput: []report.ThroughputRow{
		{Target: report.TargetQleetSQLite, Concurrency: 8, OpsPerSec: 1200, RatioVsKube: 1.6, RatioVsRaw: 0.55},
		{Target: report.TargetQleetPostgres, Concurrency: 8, OpsPerSec: 600, RatioVsKube: 0.9, RatioVsRaw: 0.30},
	}})
	g := goal(t, res, "API create throughput vs raw commit, "+report.TargetQleetSQLite+", concurrency 8")
	require.Equal(t, goalMet, g.Status)
	require.Equal(t, "55% (1200/s)", g.Value)
	g = goal(t, res, "API create throughput vs raw commit, "+report.TargetQleetPostgres+", concurrency 8")
	require.Equal(t, goalMissed, g.Status)
	require.Equal(t, "30% (600/s)", g.Value)
}
