// Package suite runs the QleetOS benchmark sections side by side with direct Kubernetes: apply-to-ready,
// API write throughput, Terraform, scale and cold start. Each section fills in a report.Results.
package suite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/bench/report"
)

// Section names, for Config.Only.
const (
	SectionApply      = "apply"
	SectionThroughput = "throughput"
	SectionTerraform  = "terraform"
	SectionScale      = "scale"
	SectionColdStart  = "coldstart"
	// SectionSim is the control plane alone at 1,000 to 100,000 instances with no-op compute (SQLite, PostgreSQL).
	SectionSim = "sim"
	// SectionLayers is an app with no infrastructure, the plan preview and the graph at scale.
	SectionLayers = "layers"
	// SectionDelete is delete-to-gone through the API and terraform destroy, against client-go.
	SectionDelete = "delete"
)

// DefaultSimSizes are the sim section's instance counts by default: the cost-growth chart's points, the
// largest being the goals' 100,000.
var DefaultSimSizes = []int{1000, 10000, 100000}

// AllSections lists every section in the order they run.
var AllSections = []string{SectionApply, SectionThroughput, SectionTerraform, SectionScale, SectionColdStart, SectionLayers, SectionSim, SectionDelete}

// Config sizes a run. Zero values take the defaults noted on each field.
type Config struct {
	// Only selects sections (default: all).
	Only []string
	// N is the large apply batch (default 100); the small one is always 1.
	N int
	// RoundsSmall and RoundsLarge are the rounds per method at N=1 and at N (defaults 8 and 2). The method
	// order rotates every round.
	RoundsSmall, RoundsLarge int
	// ApplyRuns is how many times the apply section runs in a row (default 2): its goal holds in every run.
	ApplyRuns int
	// ApplyConcurrency bounds workloads in flight per method (default 32).
	ApplyConcurrency int
	// Replicas per workload in the apply and Terraform sections (default 3).
	Replicas int
	// Concurrency levels of the throughput section (default 1, 8, 64).
	Concurrency []int
	// ThroughputDuration is how long each target runs at each level (default 5s).
	ThroughputDuration time.Duration
	// TerraformN are the Terraform sizes (default 20, 100).
	TerraformN []int
	// Scale is the number of instances of the scale section (default 10000).
	Scale int
	// ScaleRuntimes and ScaleClusters: runtimes, and kubesim clusters they point into (defaults 10 and 2).
	ScaleRuntimes, ScaleClusters int
	// ScaleReplicas per instance (default 1; 0 is allowed and means Deployments with no pods).
	ScaleReplicas *int
	// ScaleTimeout bounds the creation of the scale section's instances (default 12m).
	ScaleTimeout time.Duration
	// SteadyWindow is how long the scale section's idle state is sampled (default 30s).
	SteadyWindow time.Duration
	// ChurnRate is updates per second in the churn window (default 20); ChurnDuration its length (default 60s).
	ChurnRate     float64
	ChurnDuration time.Duration
	// ColdStarts is how many times `qleet server` is started per case (default 5).
	ColdStarts int
	// SimSizes are the instance counts of the sim section, each run on every backend (default 1000,
	// 10000, 100000; sorted ascending, the goals judge the largest); SimRuntimes the runtimes they are
	// spread over (default 10).
	SimSizes    []int
	SimRuntimes int
	// SimReplicas is the number of controller-only replicas on PostgreSQL in the sim section (default 2).
	SimReplicas int
	// SimRate is the sim section's churn in updates per second (default 100); creates run at a tenth of it.
	SimRate float64
	// SimChurnDuration (default 30s) and SimSteadyWindow (default 30s) are the sim section's windows.
	SimChurnDuration, SimSteadyWindow time.Duration
	// SimTimeout bounds how long the sim section waits for its instances to be reconciled (default 15m).
	SimTimeout time.Duration
	// SimBackends selects the sim section's backends, "sqlite" and/or "postgres" (default both).
	SimBackends []string
	// LayersRounds is how many times each method of the layers apply runs (default 3).
	LayersRounds int
	// LayersPlanRounds is how many plan previews are timed per store size (default 50).
	LayersPlanRounds int
	// LayersPlanObjects is the "few hundred objects" store size of the plan preview (default 300).
	LayersPlanObjects int
	// LayersGraphObjects is the store size of the graph endpoint (default 10000).
	LayersGraphObjects int
	// LayersGraphRounds is how many times each graph query is timed (default 10).
	LayersGraphRounds int
	// DeleteN is the large batch of the delete section (default 100; the small one is 1).
	DeleteN int
	// DeleteRounds is the rounds per method of the delete section at N=1 (default 3; the section takes about 5 min at its defaults).
	DeleteRounds int
	// DeleteTFN is how many instances `terraform destroy` removes in the delete section (default 100).
	DeleteTFN int

	// RepoRoot is the repository root (binaries are found under RepoRoot/bin).
	RepoRoot string
	// KubesimBinary, QleetBinary, Terraform and Kubectl locate the tools (defaults under RepoRoot/bin;
	// kubectl from PATH).
	KubesimBinary, QleetBinary, Terraform, Kubectl string
	// ProviderDir holds terraform-provider-qleet (default RepoRoot/bin).
	ProviderDir string
	// WorkDir holds clusters and data dirs (default: a new temporary directory, removed afterwards).
	WorkDir string
	// OutDir receives profiles (default: WorkDir).
	OutDir string
	// Logger receives progress (default: slog.Default()).
	Logger *slog.Logger
	// Verbose sends the control planes' own logs to Logger too (default: discarded).
	Verbose bool
}

func (c *Config) applyDefaults() {
	if len(c.Only) == 0 {
		c.Only = AllSections
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.N, 100)
	def(&c.RoundsSmall, 8)
	def(&c.RoundsLarge, 2)
	def(&c.ApplyConcurrency, 32)
	def(&c.Replicas, 3)
	def(&c.Scale, 10000)
	def(&c.ScaleRuntimes, 10)
	def(&c.ScaleClusters, 2)
	def(&c.ColdStarts, 5)
	def(&c.ApplyRuns, 2)
	if len(c.SimSizes) == 0 {
		c.SimSizes = DefaultSimSizes
	}
	c.SimSizes = slices.Sorted(slices.Values(c.SimSizes))
	def(&c.SimRuntimes, 10)
	def(&c.SimReplicas, 2)
	if c.SimRate == 0 {
		c.SimRate = 100
	}
	if c.SimChurnDuration == 0 {
		c.SimChurnDuration = 30 * time.Second
	}
	if c.SimSteadyWindow == 0 {
		c.SimSteadyWindow = 30 * time.Second
	}
	if len(c.SimBackends) == 0 {
		c.SimBackends = []string{"sqlite", "postgres"}
	}
	if c.SimTimeout == 0 {
		c.SimTimeout = 15 * time.Minute
	}
	def(&c.LayersRounds, 3)
	def(&c.LayersPlanRounds, 50)
	def(&c.LayersPlanObjects, 300)
	def(&c.LayersGraphObjects, 10000)
	def(&c.LayersGraphRounds, 10)
	def(&c.DeleteN, 100)
	def(&c.DeleteRounds, 3)
	def(&c.DeleteTFN, 100)
	if c.ScaleReplicas == nil {
		one := 1
		c.ScaleReplicas = &one
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 8, 64}
	}
	if len(c.TerraformN) == 0 {
		c.TerraformN = []int{20, 100}
	}
	if c.ThroughputDuration == 0 {
		c.ThroughputDuration = 5 * time.Second
	}
	if c.ScaleTimeout == 0 {
		c.ScaleTimeout = 12 * time.Minute
	}
	if c.SteadyWindow == 0 {
		c.SteadyWindow = 30 * time.Second
	}
	if c.ChurnRate == 0 {
		c.ChurnRate = 20
	}
	if c.ChurnDuration == 0 {
		c.ChurnDuration = 60 * time.Second
	}
	bin := filepath.Join(c.RepoRoot, "bin")
	if c.KubesimBinary == "" {
		c.KubesimBinary = filepath.Join(bin, "kubesim")
	}
	if c.QleetBinary == "" {
		c.QleetBinary = filepath.Join(bin, "qleet")
	}
	if c.Terraform == "" {
		c.Terraform = filepath.Join(bin, "terraform")
	}
	if c.ProviderDir == "" {
		c.ProviderDir = bin
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Runner runs the selected sections.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	res    *report.Results
	shared *kubeRig // the apply and Terraform sections' cluster and control plane
	// rigs counts the shared rigs started: one closed before the scale and sim sections is started again,
	// fresh, for the sections after them.
	rigs int
}

// Run runs the selected sections in order and records their results in res. A section that fails is
// recorded as a note and the run goes on. It returns an error only when the run cannot start at all.
func Run(ctx context.Context, cfg Config, res *report.Results) error {
	cfg.applyDefaults()
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "qleet-bench-")
		if err != nil {
			return fmt.Errorf("work dir: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	if cfg.OutDir == "" {
		cfg.OutDir = cfg.WorkDir
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, res: res}
	want := map[string]bool{}
	for _, s := range cfg.Only {
		want[s] = true
	}
	sections := []struct {
		name string
		run  func(context.Context) error
	}{
		{SectionApply, r.runApply},
		{SectionThroughput, r.runThroughput},
		{SectionTerraform, r.runTerraform},
		{SectionScale, r.runScale},
		{SectionColdStart, r.runColdStart},
		{SectionSim, r.runSim},
		{SectionLayers, r.runLayers},
		{SectionDelete, r.runDelete},
	}
	defer func() {
		if r.shared != nil {
			r.shared.close()
		}
	}()
	for _, s := range sections {
		if !want[s.name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if (s.name == SectionScale || s.name == SectionSim) && r.shared != nil {
			// The scale section measures this process's memory and CPU: stop what earlier sections left.
			r.shared.close()
			r.shared = nil
		}
		res.Sections = append(res.Sections, s.name)
		r.log.Info("section started", "section", s.name)
		start := time.Now()
		if err := s.run(ctx); err != nil {
			r.log.Error("section failed", "section", s.name, "err", err)
			r.note("section %s failed: %v", s.name, err)
		}
		r.log.Info("section finished", "section", s.name, "took", time.Since(start).Round(time.Second))
	}
	EvaluateGoals(res)
	return nil
}

func (r *Runner) note(format string, args ...any) {
	r.res.Notes = append(r.res.Notes, fmt.Sprintf(format, args...))
}

// profileCPU starts a CPU profile of this process (which runs the control plane in-process) for a
// section; the returned function stops it and records it.
func (r *Runner) profileCPU(section string) func() {
	name := "cpu-" + section + ".pprof"
	f, err := os.Create(filepath.Join(r.cfg.OutDir, name))
	if err != nil {
		r.log.Warn("cpu profile not taken", "err", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		r.log.Warn("cpu profile not taken", "err", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		r.res.Profiles = append(r.res.Profiles, report.Profile{Section: section, Kind: "cpu", File: name})
	}
}

// profileHeap writes a heap profile.
func (r *Runner) profileHeap(section string) {
	name := "heap-" + section + ".pprof"
	f, err := os.Create(filepath.Join(r.cfg.OutDir, name))
	if err != nil {
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err == nil {
		r.res.Profiles = append(r.res.Profiles, report.Profile{Section: section, Kind: "heap", File: name})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// discard is a logger for parts whose logs would drown the progress output.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
