// Command qleet-bench measures QleetOS side by side with talking to Kubernetes directly, in one run on
// the same kubesim clusters, and writes bench/results/<timestamp>.json, bench/results/latest.md and PNG
// charts. `make bench` runs it with the full set; flags select sections and sizes for a quick run:
//
//	go run ./bench/cmd/qleet-bench --only apply,throughput --n 10 --scale 500
//
// See docs/benchmarks.md for what each figure means.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served with --pprof
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/suite"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
)

func main() {
	// client-go's klog would print request errors of deliberately cancelled contexts (warm-ups).
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	// The control plane runs in this process: it gets the garbage collector target a qleet server has.
	app.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go app.ReleaseMemoryWhenIdle(ctx)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "qleet-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("qleet-bench", flag.ContinueOnError)
	only := fs.String("only", strings.Join(suite.AllSections, ","), "sections to run: "+strings.Join(suite.AllSections, ","))
	n := fs.Int("n", 100, "large apply batch (the small one is 1)")
	roundsSmall := fs.Int("rounds-small", 20, "rounds per method at N=1")
	roundsLarge := fs.Int("rounds-large", 2, "rounds per method at the large N")
	applyRuns := fs.Int("apply-runs", 2, "apply: times the whole apply section runs in a row (its goal holds in every run)")
	applyConc := fs.Int("apply-concurrency", 32, "workloads in flight per method in the apply section")
	replicas := fs.Int("replicas", 3, "replicas per workload in the apply and terraform sections")
	conc := fs.String("concurrency", "1,8,64", "throughput concurrency levels")
	dur := fs.Duration("duration", 5*time.Second, "throughput: time per target and level")
	tfN := fs.String("tf-n", "20,100", "terraform sizes")
	scale := fs.Int("scale", 10000, "scale: workload instances")
	scaleRuntimes := fs.Int("scale-runtimes", 10, "scale: runtimes")
	scaleClusters := fs.Int("scale-clusters", 2, "scale: kubesim clusters the runtimes point into")
	scaleReplicas := fs.Int("scale-replicas", 1, "scale: replicas per instance (0 = Deployments without pods)")
	scaleTimeout := fs.Duration("scale-timeout", 20*time.Minute, "scale: how long creation may take")
	steady := fs.Duration("steady-window", 30*time.Second, "scale: idle sampling window (CPU, RSS, API and cluster calls)")
	churnRate := fs.Float64("churn-rate", 20, "scale: updates per second during churn")
	churnDur := fs.Duration("churn-duration", 60*time.Second, "scale: churn window")
	coldStarts := fs.Int("cold-starts", 5, "cold start: starts per case")
	simN := fs.String("sim-n", "1000,10000,100000", "sim: instance counts with no-op compute, each run on every backend (the goals judge the largest)")
	simRuntimes := fs.Int("sim-runtimes", 10, "sim: runtimes the instances are spread over")
	simReplicas := fs.Int("sim-replicas", 2, "sim: controller-only replicas on PostgreSQL")
	simRate := fs.Float64("sim-rate", 100, "sim: updates per second during churn (creates at a tenth)")
	simChurn := fs.Duration("sim-churn-duration", 30*time.Second, "sim: churn window")
	simSteady := fs.Duration("sim-steady-window", 30*time.Second, "sim: steady-state sampling window")
	simTimeout := fs.Duration("sim-timeout", 15*time.Minute, "sim: how long reconciling the created instances may take")
	simBackends := fs.String("sim-backends", "sqlite,postgres", "sim: backends to run, sqlite and/or postgres")
	layersRounds := fs.Int("layers-rounds", 5, "layers: rounds per method of the app-with-no-infrastructure apply")
	layersPlanRounds := fs.Int("layers-plan-rounds", 50, "layers: plan previews timed per store size")
	layersPlanObjects := fs.Int("layers-plan-objects", 300, "layers: the mid store size of the plan preview")
	layersGraphObjects := fs.Int("layers-graph-objects", 10000, "layers: objects stored for the graph endpoint")
	layersGraphRounds := fs.Int("layers-graph-rounds", 10, "layers: times each graph query is timed")
	deleteN := fs.Int("delete-n", 100, "delete: the large batch deleted through the API and with client-go (the small one is 1)")
	deleteRounds := fs.Int("delete-rounds", 3, "delete: rounds per method at N=1")
	deleteTFN := fs.Int("delete-tf-n", 100, "delete: instances removed by terraform destroy")
	out := fs.String("out", "", "results directory (default <repo>/bench/results)")
	workDir := fs.String("work-dir", "", "where clusters and data dirs go (default: a temporary directory, removed)")
	verbose := fs.Bool("v", false, "log the control planes' own output too")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address while running (e.g. 127.0.0.1:6060)")
	render := fs.String("render", "", "re-render latest.md, the goals and the charts from a results JSON file, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *pprofAddr != "" {
		go func() { _ = http.ListenAndServe(*pprofAddr, nil) }() // the default mux holds net/http/pprof
	}
	root, err := kubesim.RepoRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "bench", "results")
	}
	if *render != "" {
		return rerender(*out, *render)
	}
	concs, err := ints(*conc)
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	tfs, err := ints(*tfN)
	if err != nil {
		return fmt.Errorf("--tf-n: %w", err)
	}
	simSizes, err := ints(*simN)
	if err != nil {
		return fmt.Errorf("--sim-n: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	res := &report.Results{
		StartedAt: time.Now().UTC(),
		Command:   strings.Join(append([]string{"qleet-bench"}, args...), " "),
		Machine:   machine(ctx, root),
	}
	stamp := res.StartedAt.Format("20060102T150405Z")
	outDir := filepath.Join(*out, stamp)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	cfg := suite.Config{
		Only: strings.Split(*only, ","), N: *n, RoundsSmall: *roundsSmall, RoundsLarge: *roundsLarge, ApplyRuns: *applyRuns,
		ApplyConcurrency: *applyConc, Replicas: *replicas, Concurrency: concs, ThroughputDuration: *dur,
		TerraformN: tfs, Scale: *scale, ScaleRuntimes: *scaleRuntimes, ScaleClusters: *scaleClusters,
		ScaleReplicas: scaleReplicas, ScaleTimeout: *scaleTimeout, SteadyWindow: *steady,
		ChurnRate: *churnRate, ChurnDuration: *churnDur, ColdStarts: *coldStarts,
		SimSizes: simSizes, SimRuntimes: *simRuntimes, SimReplicas: *simReplicas, SimRate: *simRate,
		SimChurnDuration: *simChurn, SimSteadyWindow: *simSteady, SimTimeout: *simTimeout, SimBackends: strings.Split(*simBackends, ","),
		LayersRounds: *layersRounds, LayersPlanRounds: *layersPlanRounds, LayersPlanObjects: *layersPlanObjects,
		LayersGraphObjects: *layersGraphObjects, LayersGraphRounds: *layersGraphRounds,
		DeleteN: *deleteN, DeleteRounds: *deleteRounds, DeleteTFN: *deleteTFN,
		RepoRoot: root, WorkDir: *workDir, OutDir: outDir, Logger: logger, Verbose: *verbose,
	}
	for _, s := range cfg.Only {
		if !contains(suite.AllSections, s) {
			return fmt.Errorf("--only: unknown section %q (have %s)", s, strings.Join(suite.AllSections, ","))
		}
	}
	runErr := suite.Run(ctx, cfg, res)
	res.FinishedAt = time.Now().UTC()
	res.Machine.LoadAfter = loadAvg()
	report.SummarizeProfiles(context.WithoutCancel(ctx), outDir, res)
	files, err := report.Write(*out, res)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Printf("results: %s\ntable:   %s\n", files.JSON, files.Markdown)
	for _, c := range files.Charts {
		fmt.Printf("chart:   %s\n", c)
	}
	return runErr
}

// rerender rewrites latest.md, the goals and the charts of an earlier run from its JSON file.
func rerender(out, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	res := &report.Results{}
	if err := json.Unmarshal(data, res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	suite.EvaluateGoals(res)
	files, err := report.Write(out, res)
	if err != nil {
		return err
	}
	fmt.Printf("results: %s\ntable:   %s\n", files.JSON, files.Markdown)
	return nil
}

// ints parses a comma-separated list of positive integers, e.g. "1000,10000,100000"; an underscore may
// group digits ("100_000").
func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil {
			return nil, err
		}
		if v <= 0 {
			return nil, fmt.Errorf("%d: want a positive number", v)
		}
		out = append(out, v)
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// machine describes this machine.
func machine(ctx context.Context, root string) report.Machine {
	m := report.Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOGC: app.GCPercent(), LoadBefore: loadAvg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				m.MemoryGB = float64(int(kb/1024/1024*10)) / 10
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
	}
	return m
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}
