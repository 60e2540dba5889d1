package suite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
)

// deleteTimeout bounds one workload's delete-to-gone.
const deleteTimeout = 5 * time.Minute

// runDelete measures delete-to-gone: workloads deleted through the QleetOS API and waited for until
// the API answers 404, beside client-go deleting the same kind of namespace (with its Deployment) and
// watching until the namespace is gone, on the same cluster; then `terraform destroy` of N instances
// beside client-go deleting N namespaces at terraform's parallelism.
func (r *Runner) runDelete(ctx context.Context) error {
	k, err := r.rig(ctx)
	if err != nil {
		return err
	}
	res := &report.DeleteResult{}
	r.res.Delete = res
	if k.instancesOK != "" {
		res.Notes = append(res.Notes, "skipped: "+k.instancesOK)
		return nil
	}
	defer r.profileCPU(SectionDelete)()
	gone, err := startNamespaceWatcher(ctx, k)
	if err != nil {
		return err
	}
	defer gone.close()

	for _, n := range []int{1, r.cfg.DeleteN} {
		rounds := r.cfg.DeleteRounds
		if n > 1 {
			rounds = 1
		}
		var svc, cg []time.Duration
		var apiWall, cgWall []float64
		apiErrs, cgErrs := 0, 0
		for round := range rounds {
			for turn := range 2 {
				qleetTurn := (turn+round)%2 == 0
				prefix := fmt.Sprintf("d%d-r%d", n, round)
				if qleetTurn {
					s, wall, errs := r.deleteQleet(ctx, k, gone, prefix+"-q", n, 0)
					svc, apiErrs = append(svc, s...), apiErrs+errs
					apiWall = append(apiWall, seconds(wall))
				} else {
					s, wall, errs := r.deleteClientGo(ctx, k, gone, prefix+"-c", n, 0)
					cg, cgErrs = append(cg, s...), cgErrs+errs
					cgWall = append(cgWall, seconds(wall))
				}
			}
		}
		base := report.DeleteRow{Method: report.DeleteClientGo, N: n, Rounds: rounds, Latency: stats.Summarize(cg),
			SamplesMS: stats.MS(cg), WallS: mean(cgWall), Errors: cgErrs}
		row := report.DeleteRow{Method: report.DeleteAPI, N: n, Rounds: rounds, Latency: stats.Summarize(svc),
			SamplesMS: stats.MS(svc), WallS: mean(apiWall), Errors: apiErrs}
		row.RatioP50 = stats.Ratio(row.Latency.P50MS, base.Latency.P50MS)
		row.RatioP99 = stats.Ratio(row.Latency.P99MS, base.Latency.P99MS)
		row.RatioWall = stats.Ratio(row.WallS, base.WallS)
		base.RatioP50, base.RatioP99, base.RatioWall = 1, 1, 1
		res.Rows = append(res.Rows, base, row)
	}

	r.deleteTerraform(ctx, k, gone, res)
	return nil
}

// deleteTerraform times `terraform destroy` of DeleteTFN instances beside client-go deleting as many
// namespaces, terraformParallelism at a time, each waited for until gone.
func (r *Runner) deleteTerraform(ctx context.Context, k *kubeRig, gone *namespaceWatcher, res *report.DeleteResult) {
	n := r.cfg.DeleteTFN
	tfRow := report.DeleteRow{Method: report.DeleteTerraform, N: n, Rounds: 1}
	cgRow := report.DeleteRow{Method: report.DeleteClientGoParallel, N: n, Rounds: 1}
	switch {
	case !isFile(r.cfg.Terraform):
		tfRow.Skipped = "terraform not found at " + r.cfg.Terraform + " (make terraform)"
	case !isFile(filepath.Join(r.cfg.ProviderDir, "terraform-provider-qleet")):
		tfRow.Skipped = "terraform-provider-qleet not found in " + r.cfg.ProviderDir + " (make build)"
	}
	if tfRow.Skipped == "" {
		if d, err := r.terraformDestroy(ctx, k, n); err != nil {
			tfRow.Skipped = err.Error()
		} else {
			tfRow.WallS = seconds(d)
		}
	}
	s, wall, errs := r.deleteClientGo(ctx, k, gone, fmt.Sprintf("dtf%d-c", n), n, terraformParallelism)
	cgRow.Latency, cgRow.SamplesMS, cgRow.WallS, cgRow.Errors = stats.Summarize(s), stats.MS(s), seconds(wall), errs
	cgRow.RatioP50, cgRow.RatioP99, cgRow.RatioWall = 1, 1, 1
	tfRow.RatioWall = stats.Ratio(tfRow.WallS, cgRow.WallS)
	res.Rows = append(res.Rows, cgRow, tfRow)
}

// terraformDestroy applies n instances with terraform (not timed) and times `terraform destroy`, which
// returns when every instance is gone. It checks that their namespaces are gone too.
func (r *Runner) terraformDestroy(ctx context.Context, k *kubeRig, n int) (time.Duration, error) {
	dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("tf-delete-%d", n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	rc := filepath.Join(r.cfg.WorkDir, "terraformrc-delete")
	abs, _ := filepath.Abs(r.cfg.ProviderDir)
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  dev_overrides {\n    \"qleetos/qleet\" = %q\n  }\n  direct {}\n}\n", abs), 0o600); err != nil {
		return 0, err
	}
	if err := writeInstancesConfig(dir, "dtf", k, r.cfg.Replicas, n); err != nil {
		return 0, err
	}
	tf := func(args ...string) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, r.cfg.Terraform, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1")
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("terraform %s: %w: %s", args[0], err, tail(string(out), 6))
		}
		return time.Since(t0), nil
	}
	r.log.Info("delete: terraform apply (not timed)", "n", n)
	if _, err := tf("apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		return 0, err
	}
	r.log.Info("delete: terraform destroy", "n", n)
	d, err := tf("destroy", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		return 0, err
	}
	left := 0
	for i := range n {
		_, err := k.cluster.kube.Clientset.CoreV1().Namespaces().Get(ctx, fmt.Sprintf("dtf%d-w%03d", n, i), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			left++
		}
	}
	if left > 0 {
		r.note("delete: terraform destroy returned with %d of %d namespaces still in the cluster", left, n)
	}
	return d, nil
}

// deleteQleet creates n instances named prefix-w000... (not timed), waits until they are reconciled,
// then deletes them through the API, at most limit at once (0: all at once), each followed by GET
// ?wait=gone until 404. It returns each instance's delete-to-gone, the batch's wall time and the
// failures. An instance whose namespace is still in the cluster when the API says it is gone counts as
// a failure.
func (r *Runner) deleteQleet(ctx context.Context, k *kubeRig, gone *namespaceWatcher, prefix string, n, limit int) ([]time.Duration, time.Duration, int) {
	insts := k.cp.client.WorkloadInstances()
	spec := api.WorkloadInstanceSpec{DefinitionID: k.def.ID, RuntimeID: k.runtime.ID}
	ids := make([]string, n)
	names := make([]string, n)
	setupErrs := r.parallel(n, 32, func(i int) error {
		names[i] = fmt.Sprintf("%s-w%03d", prefix, i)
		cctx, cancel := context.WithTimeout(ctx, applyTimeout)
		defer cancel()
		obj, err := insts.Create(cctx, &api.WorkloadInstance{Meta: api.Meta{Name: names[i]}, Spec: spec})
		if err != nil {
			return err
		}
		ids[i] = obj.ID
		_, err = insts.WaitReconciled(cctx, obj.ID)
		return err
	})
	r.log.Info("delete round: QleetOS API", "n", n, "prefix", prefix)
	httpc := pooledHTTPClient()
	endpoint, token := k.cp.app.Endpoint, k.cp.app.AdminToken
	var mu sync.Mutex
	var samples []time.Duration
	start := time.Now()
	errs := r.parallel(n, limit, func(i int) error {
		if ids[i] == "" {
			return nil // its create failed, counted above
		}
		dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
		defer cancel()
		t0 := time.Now()
		u := endpoint + "/v1/workload_instances/" + ids[i]
		if err := doJSON(dctx, httpc, http.MethodDelete, u, token, nil, http.StatusAccepted, nil); err != nil {
			return err
		}
		q := url.Values{"wait": {"gone"}, "timeout": {"60s"}}
		for {
			err := doJSON(dctx, httpc, http.MethodGet, u+"?"+q.Encode(), token, nil, http.StatusNotFound, nil)
			if err == nil {
				break
			}
			if dctx.Err() != nil {
				return fmt.Errorf("instance %s not gone: %w", names[i], err)
			}
		}
		d := time.Since(t0)
		// Read from the API server, not the watch, which may lag the control plane's own by a few ms.
		_, err := k.cluster.kube.Clientset.CoreV1().Namespaces().Get(dctx, names[i], metav1.GetOptions{})
		switch {
		case err == nil:
			return fmt.Errorf("instance %s gone from the API while its namespace is still in the cluster", names[i])
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("instance %s: check its namespace: %w", names[i], err)
		}
		mu.Lock()
		samples = append(samples, d)
		mu.Unlock()
		return nil
	})
	return samples, time.Since(start), setupErrs + errs
}

// deleteClientGo applies n namespaces with their Deployment named prefix-w000... (the objects QleetOS
// renders; not timed) and waits until they are Available, then deletes the namespaces with client-go,
// at most limit at once (0: all at once), each waited for through a namespace watch until gone.
func (r *Runner) deleteClientGo(ctx context.Context, k *kubeRig, gone *namespaceWatcher, prefix string, n, limit int) ([]time.Duration, time.Duration, int) {
	names := make([]string, n)
	setupErrs := r.parallel(n, 32, func(i int) error {
		names[i] = fmt.Sprintf("%s-w%03d", prefix, i)
		cctx, cancel := context.WithTimeout(ctx, applyTimeout)
		defer cancel()
		objs, err := renderDirect(cctx, k.def, names[i], "")
		if err != nil {
			return err
		}
		if err := ssa(cctx, k.cluster.kube, objs); err != nil {
			return err
		}
		_, err = k.watcher.wait(cctx, names[i], names[i])
		return err
	})
	r.log.Info("delete round: client-go", "n", n, "prefix", prefix, "parallelism", limit)
	var mu sync.Mutex
	var samples []time.Duration
	start := time.Now()
	errs := r.parallel(n, limit, func(i int) error {
		dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
		defer cancel()
		t0 := time.Now()
		err := k.cluster.kube.Clientset.CoreV1().Namespaces().Delete(dctx, names[i], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := gone.wait(dctx, names[i]); err != nil {
			return err
		}
		d := time.Since(t0)
		k.watcher.forget(names[i] + "/" + names[i])
		mu.Lock()
		samples = append(samples, d)
		mu.Unlock()
		return nil
	})
	return samples, time.Since(start), setupErrs + errs
}

// parallel runs f(0..n-1), at most limit at once (0: all at once), and returns how many failed.
func (r *Runner) parallel(n, limit int, f func(i int) error) int {
	if limit <= 0 {
		limit = n
	}
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				r.log.Warn("delete section: operation failed", "err", err)
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

// namespaceWatcher watches every namespace of the cluster (one informer, no polling) and tells waiters
// when one is gone.
type namespaceWatcher struct {
	inf     cache.SharedIndexInformer
	mu      sync.Mutex
	waiters map[string][]chan struct{}
	stop    chan struct{}
}

func startNamespaceWatcher(ctx context.Context, k *kubeRig) (*namespaceWatcher, error) {
	w := &namespaceWatcher{waiters: map[string][]chan struct{}{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactory(k.cluster.kube.Clientset, 0)
	w.inf = f.Core().V1().Namespaces().Informer()
	_, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, ch := range w.waiters[ns.Name] {
			close(ch)
		}
		delete(w.waiters, ns.Name)
	}})
	if err != nil {
		return nil, err
	}
	f.Start(w.stop)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), w.inf.HasSynced) {
		close(w.stop)
		return nil, errors.New("namespace informer did not sync")
	}
	return w, nil
}

func (w *namespaceWatcher) close() { close(w.stop) }

// exists reports whether the watch still holds the namespace.
func (w *namespaceWatcher) exists(name string) bool {
	_, ok, _ := w.inf.GetIndexer().GetByKey(name)
	return ok
}

// wait returns once the namespace is gone.
func (w *namespaceWatcher) wait(ctx context.Context, name string) error {
	ch := make(chan struct{})
	w.mu.Lock()
	// Checked under the lock that the delete handler takes, after the informer's store was updated
	// (the store is updated before handlers run), so no deletion is missed.
	if !w.exists(name) {
		w.mu.Unlock()
		return nil
	}
	w.waiters[name] = append(w.waiters[name], ch)
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("namespace %s not gone: %w", name, ctx.Err())
	}
}

// deleteGoalRatio is the target for delete-to-gone against client-go.
const deleteGoalRatio = 1.10

// deleteGoals marks delete-to-gone against client-go: the API at p50 per workload at each N, and
// terraform destroy's wall time against client-go at the same parallelism.
func deleteGoals(d *report.DeleteResult) []report.Goal {
	if d == nil {
		return nil
	}
	var goals []report.Goal
	for _, row := range d.Rows {
		switch row.Method {
		case report.DeleteAPI:
			g := report.Goal{Name: fmt.Sprintf("delete-to-gone through the API, N=%d", row.N), Target: "p50 ≤ 1.10× client-go"}
			if row.Skipped != "" || row.Latency.N == 0 {
				g.Status, g.Note = goalNotMeasured, row.Skipped
			} else {
				g.Value = fmt.Sprintf("p50 %.2f (%.0f ms), p99 %.2f, batch wall %.2f", row.RatioP50, row.Latency.P50MS, row.RatioP99, row.RatioWall)
				g.Status = status(row.RatioP50 <= deleteGoalRatio)
			}
			goals = append(goals, g)
		case report.DeleteTerraform:
			g := report.Goal{Name: fmt.Sprintf("terraform destroy of %d instances", row.N), Target: "≤ 1.10× client-go at parallelism 10"}
			if row.Skipped != "" || row.WallS == 0 {
				g.Status, g.Note = goalNotMeasured, row.Skipped
			} else {
				g.Value = fmt.Sprintf("%.2f× (%.1f s)", row.RatioWall, row.WallS)
				g.Status = status(row.RatioWall <= deleteGoalRatio)
			}
			goals = append(goals, g)
		}
	}
	if len(goals) == 0 {
		goals = append(goals, report.Goal{Name: "delete-to-gone", Target: "≤ 1.10× client-go", Status: goalNotMeasured, Note: strings.Join(d.Notes, "; ")})
	}
	return goals
}
