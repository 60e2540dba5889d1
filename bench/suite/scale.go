package suite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
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
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// directLabel marks the Deployments of the direct baseline in the churn window.
const directDef = "scale-direct"

func (r *Runner) runScale(ctx context.Context) error {
	res := &report.ScaleResult{
		Instances: r.cfg.Scale, Runtimes: r.cfg.ScaleRuntimes, Clusters: r.cfg.ScaleClusters,
		Replicas: *r.cfg.ScaleReplicas, ChurnRate: r.cfg.ChurnRate,
	}
	r.res.Scale = res
	section := time.Now()

	// The clusters: kwok nodes take 1000 pods each.
	perCluster := (r.cfg.Scale*max(*r.cfg.ScaleReplicas, 1))/r.cfg.ScaleClusters + 1000
	nodes := max(3, perCluster/900+1)
	clusters := make([]*benchCluster, r.cfg.ScaleClusters)
	defer func() {
		for _, c := range clusters {
			if c != nil {
				c.stop()
			}
		}
	}()
	for i := range clusters {
		c, err := r.startCluster(ctx, fmt.Sprintf("scale%d", i), nodes)
		if err != nil {
			return err
		}
		clusters[i] = c
	}

	// Baseline: this process before the control plane exists.
	runtime.GC()
	debug.FreeOSMemory()
	res.BaselineRSSMB = round1(readProcStat().rssMB)

	// RSS once a second through the section.
	var seriesMu sync.Mutex
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
				seriesMu.Lock()
				res.RSSSeries = append(res.RSSSeries, report.Point{T: round1(time.Since(section).Seconds()), V: round1(readProcStat().rssMB)})
				seriesMu.Unlock()
			}
		}
	}()

	cpCfg := app.Config{DataDir: filepath.Join(r.cfg.WorkDir, "cp-scale"), API: true, Controllers: true}
	cp, err := r.startControlPlane(ctx, cpCfg)
	if err != nil {
		return err
	}
	defer func() {
		if cp != nil {
			cp.close()
		}
	}()
	cl := cp.client
	runtimes := make([]*api.KubernetesRuntime, r.cfg.ScaleRuntimes)
	for i := range runtimes {
		if runtimes[i], err = registerRuntime(ctx, cl, fmt.Sprintf("scale-rt%d", i), clusters[i%len(clusters)]); err != nil {
			return err
		}
	}
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "scale-web"}, Spec: definitionSpec(*r.cfg.ScaleReplicas)})
	if err != nil {
		return err
	}
	// Each runtime stands for a team's slice of a cluster: its instances share one namespace.
	specFor := func(i int) api.WorkloadInstanceSpec {
		rt := i % len(runtimes)
		return api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: runtimes[rt].ID, Namespace: fmt.Sprintf("scale-rt%d", rt)}
	}

	// Create every instance through the API, 16 at a time.
	r.log.Info("scale: creating instances", "n", r.cfg.Scale)
	insts := cl.WorkloadInstances()
	createStart := time.Now()
	var createErrs atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= r.cfg.Scale || ctx.Err() != nil {
					return
				}
				_, err := insts.Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "s" + strconv.Itoa(i)}, Spec: specFor(i)})
				if err != nil && createErrs.Add(1) == 1 {
					r.log.Warn("scale: create failed", "err", err)
				}
			}
		}()
	}
	wg.Wait()
	res.CreateAPIS = seconds(time.Since(createStart))
	res.Errors += int(createErrs.Load())

	// Wait until every instance is reconciled, counting every 5 s (every 10 s at 10,000: each count
	// lists every instance, in this process, beside the control plane).
	deadline := createStart.Add(r.cfg.ScaleTimeout)
	var ids []string
	for {
		n, all, err := countReconciled(ctx, insts)
		if err != nil {
			return err
		}
		ids = all
		res.Reconciled = n
		res.ReconciledSeries = append(res.ReconciledSeries, report.Point{T: round1(time.Since(createStart).Seconds()), V: float64(n)})
		r.log.Info("scale: reconciled", "n", n, "of", r.cfg.Scale, "elapsed", time.Since(createStart).Round(time.Second))
		if n >= r.cfg.Scale || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(5*time.Second, time.Duration(r.cfg.Scale)*time.Millisecond)):
		}
	}
	res.CreateS = seconds(time.Since(createStart))
	if res.Reconciled < r.cfg.Scale {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d instances were reconciled within %s; later figures are at that size", res.Reconciled, r.cfg.Scale, r.cfg.ScaleTimeout))
	}

	// Idle: let the last reconciles settle (a quiet spell of 3 s with no API request and no cluster call,
	// waited for at most 60 s), then sample over the window and count what the control plane asked of
	// its API and of the clusters in it.
	r.log.Info("scale: idle", "window", r.cfg.SteadyWindow)
	settle := time.Now()
	quiet := waitQuiet(ctx, cp.app, 3*time.Second, time.Minute)
	res.IdleSettleS = seconds(time.Since(settle))
	if !quiet {
		res.Notes = append(res.Notes, fmt.Sprintf("no quiet spell of 3 s within %.0f s after creation; the idle window started anyway", res.IdleSettleS))
	}
	apiBefore, apiErr := apiRequestCounts(cp.app)
	kubeBefore := cp.app.ClusterRequests()
	stopProf := r.profileCPU("scale-steady")
	st := sampleSteady(r.cfg.SteadyWindow)
	stopProf()
	kubeAfter := cp.app.ClusterRequests()
	apiAfter, apiErr2 := apiRequestCounts(cp.app)
	if err := errors.Join(apiErr, apiErr2); err != nil {
		res.Notes = append(res.Notes, "idle API requests not counted: "+err.Error())
	} else if len(apiBefore) == 0 {
		// Every create went through the API: an empty count means the histogram is not there, not
		// that nothing was asked.
		res.Notes = append(res.Notes, "idle API requests not counted: the API's request histogram counted none of the creates")
	} else {
		res.IdleCountsMeasured = true
		res.IdleAPIRequests, res.IdleAPIRoutes = requestsBetween(apiBefore, apiAfter)
		res.IdleClusterCalls = kubeAfter.Calls - kubeBefore.Calls
		res.IdleClusterWatches = kubeAfter.Watches - kubeBefore.Watches
	}
	res.SteadyWindowS, res.SteadyCPUCores, res.SteadyRSSMB, res.SteadyRSSMaxMB = st.windowS, st.cores, st.rssMean, st.rssMax
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.SteadyHeapMB = round1(float64(ms.HeapInuse) / (1 << 20))
	r.profileHeap("scale-steady")

	// Full resync: restart the control plane on the same data; its first pass re-reconciles everything.
	r.log.Info("scale: full resync (restart)")
	cp.close()
	cp = nil
	stopProf = r.profileCPU("scale-resync")
	resyncStart := time.Now()
	cp, err = r.startControlPlane(ctx, cpCfg)
	if err != nil {
		stopProf()
		return err
	}
	target := len(ids)
	for {
		done := reconcileCount(cp.app, api.KindWorkloadInstance)
		if done >= target {
			res.ResyncS = seconds(time.Since(resyncStart))
			res.ResyncDeliveries = done
			break
		}
		if limit := min(r.cfg.ScaleTimeout, 5*time.Minute); time.Since(resyncStart) > limit {
			res.Notes = append(res.Notes, fmt.Sprintf("full resync did not finish in %s (%d of %d reconciled)", limit, done, target))
			res.ResyncS = seconds(time.Since(resyncStart))
			res.ResyncDeliveries = done
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopProf()
	insts = cp.client.WorkloadInstances()

	// Churn: updates at ChurnRate, new instances at a tenth of it, and the direct baseline at the same
	// rate as the creates.
	if err := r.churn(ctx, res, cp, clusters, specFor, ids, def); err != nil {
		return err
	}
	return nil
}

func (r *Runner) churn(ctx context.Context, res *report.ScaleResult, cp *controlPlane, clusters []*benchCluster,
	specFor func(int) api.WorkloadInstanceSpec, ids []string, def *api.WorkloadDefinition) error {
	if len(ids) == 0 {
		return fmt.Errorf("no instances to churn")
	}
	watchers := make([]*deployWatcher, len(clusters))
	defer func() {
		for _, w := range watchers {
			if w != nil {
				w.close()
			}
		}
	}()
	for i, c := range clusters {
		w, err := startDeployWatcher(ctx, c.kube, render.LabelName+"="+directDef)
		if err != nil {
			return err
		}
		watchers[i] = w
	}
	directDefObj := *def
	directDefObj.Name = directDef

	stopProf := r.profileCPU("scale-churn")
	out := runChurn(ctx, churnLoad{
		Insts: cp.client.WorkloadInstances(), IDs: ids, SpecFor: specFor, Rate: r.cfg.ChurnRate, Duration: r.cfg.ChurnDuration,
		WaitLimit: min(3*time.Minute, r.cfg.ScaleTimeout), Prefix: "scale", Log: r.log,
		Beside: func(ctx context.Context, n int, record func(time.Duration), fail func(string, error)) {
			ci := n % len(clusters)
			name := "direct" + strconv.Itoa(n)
			objs, err := renderDirect(ctx, &directDefObj, name, "scale-direct")
			if err != nil {
				fail("direct render", err)
				return
			}
			wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			t0 := time.Now()
			if err := ssa(wctx, clusters[ci].kube, objs); err != nil {
				fail("direct apply", err)
				return
			}
			if _, err := watchers[ci].wait(wctx, "scale-direct", name); err != nil {
				fail("direct wait", err)
				return
			}
			record(time.Since(t0))
		},
	})
	stopProf()
	res.ChurnWindowS = seconds(out.Window)
	res.CreateToReconciled = stats.Summarize(out.Created)
	res.UpdateToReconciled = stats.Summarize(out.Updated)
	res.DirectCreateToAvailable = stats.Summarize(out.Beside)
	res.ChurnSamplesMS = stats.MS(out.Created)
	res.DirectSamplesMS = stats.MS(out.Beside)
	res.Errors += out.Errors
	return nil
}

// countReconciled lists every instance and counts the reconciled ones; it also returns every id.
func countReconciled(ctx context.Context, insts *client.Resource[api.WorkloadInstanceSpec, api.WorkloadInstanceStatus]) (int, []string, error) {
	n := 0
	var ids []string
	for obj, err := range insts.All(ctx, client.ListOptions{Limit: 1000}) {
		if err != nil {
			return 0, nil, err
		}
		ids = append(ids, obj.ID)
		if api.Reconciled(obj.Generation, &obj.Status.Status) {
			n++
		}
	}
	return n, ids, nil
}

// reconcileCount is how many reconciles of kind have finished in this control plane. It reads the
// controllers' counter, not a metrics scrape: a scrape also counts every object in the store, which polled
// every 100 ms would load the very resync it measures.
func reconcileCount(a *app.App, kind string) int { return int(a.ReconcilesFinished(kind)) }

func round1(x float64) float64 { return float64(int(x*10+0.5)) / 10 }
func round3(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// steadySample is the process's CPU and RSS over a steady-state window.
type steadySample struct{ windowS, cores, rssMean, rssMax float64 }

// sampleSteady samples this process's RSS once a second for window, and its CPU over the whole window.
func sampleSteady(window time.Duration) steadySample {
	before := readProcStat()
	t0 := time.Now()
	var rss []float64
	for time.Since(t0) < window {
		time.Sleep(time.Second)
		rss = append(rss, readProcStat().rssMB)
	}
	after := readProcStat()
	took := time.Since(t0)
	return steadySample{windowS: seconds(took), cores: round3((after.cpu - before.cpu).Seconds() / took.Seconds()),
		rssMean: round1(mean(rss)), rssMax: round1(maxOf(rss))}
}

// apiRequestCounts returns the API requests a served so far, by "METHOD route", from its request
// histogram (as the control plane's idle test counts them).
func apiRequestCounts(a *app.App) (map[string]uint64, error) {
	mfs, err := a.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "qleet_api_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var method, route string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method":
					method = l.GetValue()
				case "route":
					route = l.GetValue()
				}
			}
			out[method+" "+route] += m.GetHistogram().GetSampleCount()
		}
	}
	return out, nil
}

// requestsBetween returns how many requests after holds that before did not, and which, sorted, with
// their counts.
func requestsBetween(before, after map[string]uint64) (int, string) {
	total := 0
	var lines []string
	for k, n := range after {
		if d := n - before[k]; d > 0 {
			total += int(d)
			lines = append(lines, fmt.Sprintf("%s ×%d", k, d))
		}
	}
	sort.Strings(lines)
	return total, strings.Join(lines, ", ")
}

// waitQuiet waits until a spell of quiet in which a served no API request and made no cluster call
// other than watches, for at most limit; it reports whether one came.
func waitQuiet(ctx context.Context, a *app.App, quiet, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		apiBefore, err := apiRequestCounts(a)
		if err != nil {
			return false
		}
		kubeBefore := a.ClusterRequests()
		select {
		case <-ctx.Done():
			return false
		case <-time.After(quiet):
		}
		apiAfter, err := apiRequestCounts(a)
		if err != nil {
			return false
		}
		if n, _ := requestsBetween(apiBefore, apiAfter); n == 0 && a.ClusterRequests().Calls == kubeBefore.Calls {
			return true
		}
	}
	return false
}
