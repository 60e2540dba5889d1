package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// The sim section: the control plane alone at SimN instances (default 100,000) with the no-op compute
// adapter (app.Config.SimulateCompute, FOR SIMULATION ONLY), once on SQLite (the API and one controller
// app) and once on PostgreSQL with the API and SimReplicas controller-only replicas, all in this process
// so that pprof sees them. Per backend: create every instance, steady state, full resync (restart), then churn.

// simPlane is one backend's control plane: an API and controller-only apps.
type simPlane struct {
	api   *controlPlane
	ctrls []*app.App
}

// controllers returns the apps that run the controllers.
func (p *simPlane) controllers() []*app.App {
	return p.ctrls
}

// reconciles is how many instance reconciles the controllers have finished, over every replica.
func (p *simPlane) reconciles() int {
	n := 0
	for _, a := range p.controllers() {
		n += reconcileCount(a, api.KindWorkloadInstance)
	}
	return n
}

func (p *simPlane) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range p.ctrls {
		c.Close(ctx)
	}
	if p.api != nil {
		p.api.close()
	}
}

// startSimPlane starts a backend's control plane in dir: the API (on SQLite when pgURL is empty, else on
// PostgreSQL) and replicas controller-only apps sharing its NATS, all in this process. On SQLite one
// controller app makes the same parts as `qleet server`; they are separate apps so that counting
// reconciles (the controllers' registry) does not run the API's scrape-time object counts.
func (r *Runner) startSimPlane(ctx context.Context, dir, pgURL string, replicas int) (*simPlane, error) {
	cp, err := r.startControlPlane(ctx, app.Config{DataDir: dir, API: true, DatabaseURL: pgURL})
	if err != nil {
		return nil, err
	}
	p := &simPlane{api: cp}
	token, err := os.ReadFile(filepath.Join(dir, "controller.token"))
	if err != nil {
		p.close()
		return nil, fmt.Errorf("controller token: %w", err)
	}
	for i := range replicas {
		logger := discard
		if r.cfg.Verbose {
			logger = r.log.With("replica", i)
		}
		c, err := app.Start(ctx, app.Config{
			Controllers: true, DataDir: fmt.Sprintf("%s-ctrl%d", dir, i), Listen: "127.0.0.1:0",
			NATSURL: cp.app.Broker.ClientURL(), APIEndpoint: cp.app.Endpoint, ControllerToken: strings.TrimSpace(string(token)),
			SimulateCompute: true, Logger: logger,
		})
		if err != nil {
			p.close()
			return nil, fmt.Errorf("start controller replica %d: %w", i, err)
		}
		p.ctrls = append(p.ctrls, c)
	}
	return p, nil
}

func (r *Runner) runSim(ctx context.Context) error {
	res := &report.SimResult{Instances: r.cfg.SimN, Runtimes: r.cfg.SimRuntimes, UpdateRate: r.cfg.SimRate}
	r.res.Sim = res
	// One cluster for every runtime: the runtime controller needs one to call them Ready; no instance
	// ever reaches it.
	cluster, err := r.startCluster(ctx, "sim", 1)
	if err != nil {
		return err
	}
	defer cluster.stop()

	if slices.Contains(r.cfg.SimBackends, "sqlite") {
		res.Rows = append(res.Rows, r.simBackend(ctx, "SQLite, API + 1 controller app", "sqlite", "", cluster))
	}
	if !slices.Contains(r.cfg.SimBackends, "postgres") {
		return nil
	}
	pgURL, pgStop, err := pgtest.StartServer(ctx)
	name := fmt.Sprintf("PostgreSQL, API + %d controller replicas", r.cfg.SimReplicas)
	if err != nil {
		res.Rows = append(res.Rows, report.SimRow{Backend: name, Skipped: err.Error()})
		return nil
	}
	defer pgStop()
	res.Rows = append(res.Rows, r.simBackend(ctx, name, "pg", pgURL, cluster))
	return nil
}

// simBackend runs the whole sequence on one backend; a failure is recorded in the row's notes.
func (r *Runner) simBackend(ctx context.Context, name, tag, pgURL string, cluster *benchCluster) report.SimRow {
	row := report.SimRow{Backend: name}
	if err := r.simRun(ctx, &row, tag, pgURL, cluster); err != nil {
		r.log.Error("sim: backend failed", "backend", name, "err", err)
		row.Notes = append(row.Notes, "failed: "+err.Error())
	}
	return row
}

func (r *Runner) simRun(ctx context.Context, row *report.SimRow, tag, pgURL string, cluster *benchCluster) error {
	n := r.cfg.SimN
	runtime.GC()
	debug.FreeOSMemory()
	row.BaselineRSSMB = round1(readProcStat().rssMB)
	row.BaselineHeapMB = round1(heapInUseMB())

	dir := filepath.Join(r.cfg.WorkDir, "cp-sim-"+tag)
	replicas := 1
	if pgURL != "" {
		replicas = r.cfg.SimReplicas
	}
	plane, err := r.startSimPlane(ctx, dir, pgURL, replicas)
	if err != nil {
		return err
	}
	defer func() {
		if plane != nil {
			plane.close()
		}
	}()
	cl := plane.api.client
	runtimes := make([]*api.KubernetesRuntime, r.cfg.SimRuntimes)
	for i := range runtimes {
		if runtimes[i], err = registerRuntime(ctx, cl, fmt.Sprintf("sim-rt%d", i), cluster); err != nil {
			return err
		}
	}
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "sim-web"}, Spec: definitionSpec(1)})
	if err != nil {
		return err
	}
	specFor := func(i int) api.WorkloadInstanceSpec {
		rt := i % len(runtimes)
		return api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: runtimes[rt].ID, Namespace: fmt.Sprintf("sim-rt%d", rt)}
	}

	// Create every instance, 32 at a time.
	r.log.Info("sim: creating instances", "backend", row.Backend, "n", n)
	insts := cl.WorkloadInstances()
	stopProf := r.profileCPU("sim-" + tag + "-create")
	createStart := time.Now()
	var createErrs atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	ids := make([]string, n) // by index, written once each
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				obj, err := insts.Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "sim" + strconv.Itoa(i)}, Spec: specFor(i)})
				if err != nil {
					if createErrs.Add(1) == 1 {
						r.log.Warn("sim: create failed", "err", err)
					}
					continue
				}
				ids[i] = obj.ID
			}
		}()
	}
	wg.Wait()
	row.CreateAPIS = seconds(time.Since(createStart))
	row.Errors += int(createErrs.Load())
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })

	// Until every instance is reconciled, counted by the store's aggregate (the query behind the API's
	// qleet_objects_unreconciled metric), every N/10000 s (at least 2 s): it reads every instance's row
	// (about 0.5 s at 100,000 on SQLite), and listing them through the API would take seconds of its CPU.
	deadline := createStart.Add(r.cfg.SimTimeout)
	for {
		done, err := storeReconciled(ctx, plane.api.app)
		if err != nil {
			stopProf()
			return err
		}
		row.Reconciled, row.CreateReconciles = done, plane.reconciles()
		r.log.Info("sim: reconciled", "n", done, "of", n, "reconciles", row.CreateReconciles, "elapsed", time.Since(createStart).Round(time.Second))
		if done >= n || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			stopProf()
			return ctx.Err()
		case <-time.After(max(2*time.Second, time.Duration(n/10000)*time.Second)):
		}
	}
	row.CreateS = seconds(time.Since(createStart))
	stopProf()
	if row.Reconciled < n {
		row.Notes = append(row.Notes, fmt.Sprintf("only %d of %d instances were reconciled within %s", row.Reconciled, n, r.cfg.SimTimeout))
	}

	// Steady state: sample over a window (it spans a drift pass when longer than 60 s).
	r.log.Info("sim: steady state", "window", r.cfg.SimSteadyWindow)
	time.Sleep(5 * time.Second)
	stopProf = r.profileCPU("sim-" + tag + "-steady")
	beforeN := plane.reconciles()
	st := sampleSteady(r.cfg.SimSteadyWindow)
	stopProf()
	row.SteadyWindowS, row.SteadyCPUCores, row.SteadyRSSMB, row.SteadyRSSMaxMB = st.windowS, st.cores, st.rssMean, st.rssMax
	row.SteadyHeapMB = round1(heapInUseMB())
	row.SteadyReconciles = plane.reconciles() - beforeN
	// One Prometheus scrape of the API (its collectors count every object by kind and phase).
	t1 := time.Now()
	if _, err := plane.api.app.Registry.Gather(); err != nil {
		row.Notes = append(row.Notes, "scrape: "+err.Error())
	}
	row.ScrapeMS = float64(time.Since(t1).Milliseconds())
	r.profileHeap("sim-" + tag + "-steady")

	// Full resync: restart on the same data until every instance has been reconciled again.
	r.log.Info("sim: full resync (restart)", "backend", row.Backend)
	plane.close()
	plane = nil
	stopProf = r.profileCPU("sim-" + tag + "-resync")
	resyncStart := time.Now()
	plane, err = r.startSimPlane(ctx, dir, pgURL, replicas)
	if err != nil {
		stopProf()
		return err
	}
	for {
		done := plane.reconciles()
		if done >= len(ids) {
			row.ResyncS, row.ResyncReconciles = seconds(time.Since(resyncStart)), done
			break
		}
		if limit := r.cfg.SimTimeout; time.Since(resyncStart) > limit {
			row.Notes = append(row.Notes, fmt.Sprintf("full resync did not finish in %s (%d of %d reconciled)", limit, done, len(ids)))
			row.ResyncS, row.ResyncReconciles = seconds(time.Since(resyncStart)), done
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopProf()

	// Churn: SimRate updates/s on random instances and a tenth of that in creates, each waited on.
	stopProf = r.profileCPU("sim-" + tag + "-churn")
	r.simChurn(ctx, row, plane.api.client.WorkloadInstances(), ids, specFor)
	stopProf()
	return nil
}

// simChurn updates random instances at SimRate per second and creates new ones at a tenth of it for
// SimChurnDuration, and records how long each took to be reconciled.
func (r *Runner) simChurn(ctx context.Context, row *report.SimRow, insts *client.Resource[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus],
	ids []string, specFor func(int) api.WorkloadInstanceSpec) {
	if len(ids) == 0 {
		row.Notes = append(row.Notes, "no instances to churn")
		return
	}
	out := runChurn(ctx, churnLoad{Insts: insts, IDs: ids, SpecFor: specFor, Rate: r.cfg.SimRate,
		Duration: r.cfg.SimChurnDuration, WaitLimit: 3 * time.Minute, Prefix: "sim", Log: r.log})
	row.ChurnWindowS = seconds(out.Window)
	row.UpdateToReconciled = stats.Summarize(out.Updated)
	row.CreateToReconciled = stats.Summarize(out.Created)
	row.Errors += out.Errors
}

// heapInUseMB is this process's Go heap in use.
func heapInUseMB() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// simGoals are the sim section's targets: the 10,000-instance goals scaled to the simulated size (RSS at
// most 512 MB and a full resync within 10 s per 10,000 instances), and update-to-reconciled p99 within
// 1 s at the simulated update rate, per backend.
func simGoals(s *report.SimResult) []report.Goal {
	var goals []report.Goal
	per10k := float64(s.Instances) / 10000
	for _, r := range s.Rows {
		if r.Skipped != "" {
			goals = append(goals, report.Goal{Name: "sim, " + r.Backend, Target: "measured", Status: goalNotMeasured, Note: r.Skipped})
			continue
		}
		note := ""
		if r.Reconciled < s.Instances {
			note = fmt.Sprintf("only %d of %d instances reconciled", r.Reconciled, s.Instances)
		}
		if r.SteadyWindowS > 0 {
			goals = append(goals, report.Goal{
				Name: fmt.Sprintf("sim steady-state RSS at %d instances, %s", s.Instances, r.Backend), Target: fmt.Sprintf("≤ %.0f MB (512 MB per 10,000)", 512*per10k),
				Value:  fmt.Sprintf("%.0f MB (baseline of the harness %.0f MB)", r.SteadyRSSMB, r.BaselineRSSMB),
				Status: status(r.SteadyRSSMB <= 512*per10k), Note: note,
			})
		}
		if r.ResyncS > 0 {
			goals = append(goals, report.Goal{
				Name: fmt.Sprintf("sim full resync at %d instances, %s", s.Instances, r.Backend), Target: fmt.Sprintf("≤ %.0f s (10 s per 10,000)", 10*per10k),
				Value: fmt.Sprintf("%.1f s", r.ResyncS), Status: status(r.ResyncS <= 10*per10k && r.ResyncReconciles >= r.Reconciled), Note: note,
			})
		}
		if r.ChurnWindowS > 0 {
			g := report.Goal{Name: fmt.Sprintf("sim update-to-reconciled p99 at %.0f updates/s, %s", s.UpdateRate, r.Backend), Target: "≤ 1 s", Note: note}
			if r.UpdateToReconciled.N == 0 {
				g.Value, g.Status = "no update was reconciled within 3 min", goalMissed
			} else {
				g.Value = fmt.Sprintf("%.0f ms (create-to-reconciled p99 %.0f ms)", r.UpdateToReconciled.P99MS, r.CreateToReconciled.P99MS)
				g.Status = status(r.UpdateToReconciled.P99MS <= 1000)
			}
			goals = append(goals, g)
		}
	}
	return goals
}

// storeReconciled counts the reconciled workload instances with one aggregate query on the API's store.
func storeReconciled(ctx context.Context, a *app.App) (int, error) {
	counts, err := a.Store.CountObjects(ctx, &store.CountParams{Kind: api.KindWorkloadInstance})
	if err != nil {
		return 0, fmt.Errorf("count instances: %w", err)
	}
	n := int64(0)
	for _, c := range counts {
		n += c.Count - c.Unreconciled
	}
	return int(n), nil
}
