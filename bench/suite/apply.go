package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// applyMethod is one way of getting a workload to ready.
type applyMethod struct {
	name   string
	letter string
	// one applies workload name and returns when it is ready.
	one func(ctx context.Context, name string) error
	// cleanup removes the workloads of a batch.
	cleanup func(ctx context.Context, names []string, wait bool)
	// reconciles, for the methods that go through QleetOS, counts the workload_instance reconciles the
	// control plane has finished.
	reconciles func() int
	skipped    string
}

// applyTimeout bounds one workload's apply-to-ready.
const applyTimeout = 5 * time.Minute

func (r *Runner) runApply(ctx context.Context) error {
	k, err := r.rig(ctx)
	if err != nil {
		return err
	}
	defer r.profileCPU(SectionApply)()
	methods := r.applyMethods(ctx, k)

	for run := 1; run <= r.cfg.ApplyRuns; run++ {
		r.applyRun(ctx, methods, run)
	}
	return nil
}

// applyRun is one run of the apply section: every method at N=1 and at N, its rows tagged with run
// (runs follow one another on the same rig, so that the spread between runs shows).
func (r *Runner) applyRun(ctx context.Context, methods []applyMethod, run int) {
	type acc struct {
		samples    []time.Duration
		tput       []float64
		errs       int
		reconciles int
		workloads  int
	}
	for _, n := range []int{1, r.cfg.N} {
		rounds := r.cfg.RoundsSmall
		if n > 1 {
			rounds = r.cfg.RoundsLarge
		}
		accs := make([]acc, len(methods))
		var leftovers []func()
		for round := range rounds {
			// Rotate the order each round (and reverse it every other round), so that no method always
			// runs first on a cold cluster or last on a busy one.
			order := rotation(len(methods), round)
			for _, mi := range order {
				m := methods[mi]
				if m.skipped != "" {
					continue
				}
				names := make([]string, n)
				for i := range names {
					names[i] = fmt.Sprintf("%s%d-x%d-r%d-w%03d", m.letter, n, run, round, i)
				}
				r.log.Info("apply round", "run", run, "method", m.letter, "n", n, "round", round)
				var before int
				if m.reconciles != nil {
					before = m.reconciles()
				}
				samples, wall, errs := r.applyBatch(ctx, m, names)
				a := &accs[mi]
				if m.reconciles != nil {
					a.reconciles += m.reconciles() - before
					a.workloads += len(names)
				}
				a.samples = append(a.samples, samples...)
				a.errs += errs
				a.tput = append(a.tput, stats.PerSecond(len(samples), wall))
				if n > 1 {
					// Large batches are removed before the next method runs, and waited for, so that their
					// deletion does not load the cluster under the next method.
					m.cleanup(ctx, names, true)
				} else {
					leftovers = append(leftovers, func() { m.cleanup(ctx, names, false) })
				}
			}
		}
		for _, f := range leftovers {
			f()
		}
		var base stats.Summary
		for mi, m := range methods {
			row := report.ApplyRow{Method: m.name, N: n, Run: run, Rounds: rounds, Skipped: m.skipped}
			if m.skipped == "" {
				a := accs[mi]
				row.Latency = stats.Summarize(a.samples)
				row.SamplesMS = stats.MS(a.samples)
				row.Errors = a.errs
				row.Throughput = mean(a.tput)
				if mi == 0 {
					base = row.Latency
				}
				row.RatioP50 = stats.Ratio(row.Latency.P50MS, base.P50MS)
				row.RatioP99 = stats.Ratio(row.Latency.P99MS, base.P99MS)
				if a.workloads > 0 {
					row.ReconcilesPerWorkload = float64(a.reconciles) / float64(a.workloads)
				}
			}
			r.res.Apply = append(r.res.Apply, row)
		}
	}
}

// rotation returns the method order of a round: 0..n-1 rotated by round, reversed on odd rounds.
func rotation(n, round int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + round) % n
	}
	if round%2 == 1 {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return float64(int(s/float64(len(xs))*100)) / 100
}

// applyBatch applies names with m, at most ApplyConcurrency at once, and returns the latency of each that
// got ready, the batch's wall time and the number of failures.
func (r *Runner) applyBatch(ctx context.Context, m applyMethod, names []string) ([]time.Duration, time.Duration, int) {
	var mu sync.Mutex
	var samples []time.Duration
	errs := 0
	sem := make(chan struct{}, r.cfg.ApplyConcurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			octx, cancel := context.WithTimeout(ctx, applyTimeout)
			defer cancel()
			t0 := time.Now()
			err := m.one(octx, name)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				r.log.Warn("apply failed", "method", m.letter, "workload", name, "err", err)
				return
			}
			samples = append(samples, d)
		}()
	}
	wg.Wait()
	return samples, time.Since(start), errs
}

func (r *Runner) applyMethods(ctx context.Context, k *kubeRig) []applyMethod {
	kubeCleanup := func(ctx context.Context, names []string, wait bool) {
		k.deleteNamespaces(ctx, names)
		if wait {
			if err := k.waitNamespacesGone(ctx, names, 3*time.Minute); err != nil {
				r.log.Warn("cleanup incomplete", "err", err)
			}
		}
	}
	render := func(ctx context.Context, name string) ([]*unstructured.Unstructured, error) {
		return renderDirect(ctx, k.def, name, "")
	}

	a := applyMethod{name: report.MethodClientGo, letter: "a", cleanup: kubeCleanup}
	a.one = func(ctx context.Context, name string) error {
		objs, err := render(ctx, name)
		if err != nil {
			return err
		}
		if err := ssa(ctx, k.cluster.kube, objs); err != nil {
			return err
		}
		_, err = k.watcher.wait(ctx, name, name)
		return err
	}

	b := applyMethod{name: report.MethodKubectl, letter: "b", cleanup: kubeCleanup}
	kubectl, why := r.findKubectl(ctx)
	b.skipped = why
	b.one = func(ctx context.Context, name string) error {
		objs, err := render(ctx, name)
		if err != nil {
			return err
		}
		var doc bytes.Buffer
		for _, o := range objs {
			y, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			doc.WriteString("---\n")
			doc.Write(y)
		}
		apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", k.cluster.sim.Kubeconfig, "apply", "-f", "-")
		apply.Stdin = &doc
		if out, err := apply.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl apply: %w: %s", err, out)
		}
		status := exec.CommandContext(ctx, kubectl, "--kubeconfig", k.cluster.sim.Kubeconfig, "rollout", "status",
			"deployment/"+name, "-n", name, "--timeout", applyTimeout.String())
		if out, err := status.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl rollout status: %w: %s", err, out)
		}
		return nil
	}

	insts := k.cp.client.WorkloadInstances()
	qleetCleanup := func(ctx context.Context, names []string, wait bool) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, n := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				obj, err := insts.GetByName(ctx, n)
				if err != nil {
					return
				}
				dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
				defer cancel()
				_ = insts.Delete(dctx, obj.ID, client.DeleteOptions{Wait: wait})
			}()
		}
		wg.Wait()
		if wait {
			if err := k.waitNamespacesGone(ctx, names, 3*time.Minute); err != nil {
				r.log.Warn("cleanup incomplete", "err", err)
			}
		}
	}
	spec := api.WorkloadInstanceSpec{DefinitionID: k.def.ID, RuntimeID: k.runtime.ID}

	reconciles := func() int { return reconcileCount(k.cp.app, api.KindWorkloadInstance) }
	c := applyMethod{name: report.MethodAPI, letter: "c", cleanup: qleetCleanup, reconciles: reconciles, skipped: k.instancesOK}
	httpc := pooledHTTPClient()
	endpoint, token := k.cp.app.Endpoint, k.cp.app.AdminToken
	c.one = func(ctx context.Context, name string) error {
		body, _ := json.Marshal(map[string]any{"name": name, "spec": spec})
		var created api.Meta
		if err := doJSON(ctx, httpc, http.MethodPost, endpoint+"/v1/workload_instances", token, body, http.StatusCreated, &created); err != nil {
			return err
		}
		for {
			q := url.Values{"wait": {"reconciled"}, "timeout": {"60s"}}
			var obj api.WorkloadInstance
			if err := doJSON(ctx, httpc, http.MethodGet, endpoint+"/v1/workload_instances/"+created.ID+"?"+q.Encode(), token, nil, http.StatusOK, &obj); err != nil {
				return err
			}
			if api.Reconciled(obj.Generation, &obj.Status.Status) {
				return nil
			}
			if obj.Status.Phase == api.PhaseFailed && obj.Status.ObservedGeneration == obj.Generation {
				return fmt.Errorf("instance %s failed: %s", name, obj.Status.Message)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}

	d := applyMethod{name: report.MethodGoClient, letter: "d", cleanup: qleetCleanup, reconciles: reconciles, skipped: k.instancesOK}
	d.one = func(ctx context.Context, name string) error {
		obj, err := insts.Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name}, Spec: spec})
		if err != nil {
			return err
		}
		_, err = insts.WaitReconciled(ctx, obj.ID)
		return err
	}
	return []applyMethod{a, b, c, d}
}

// doJSON sends one API request and decodes the answer, which must have status want.
func doJSON(ctx context.Context, hc *http.Client, method, u, token string, body []byte, want int, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(data)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
