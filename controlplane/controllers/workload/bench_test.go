package workload_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

var (
	benchSeq atomic.Int64
	// reconciles counts Reconcile calls and createNanos the time spent creating instances through the
	// API, to report them per op.
	reconciles, createNanos atomic.Int64
)

// BenchmarkCreateToReady measures, on one kubesim cluster, the time from nothing to a Ready 3-replica
// workload (namespace, Deployment, Service), side by side:
//
//   - reconciler: InstanceReconciler.Reconcile, re-run on every change of the Deployment (as the agent
//     triggers it), until it reports done; the reconcile that applies waits up to ReadyWait (1s) on the
//     cluster's cache for readiness;
//   - reconciler-no-ready-wait: the same with ReadyWait off (as before it existed): the applying
//     reconcile ends not ready, and a later one finds the Deployment Available;
//   - client-go-ssa: server-side apply of the same rendered objects with client-go, then a watch until
//     the Deployment is Available with all replicas updated.
//
// Each runs alone and with 20 at once. p50-ms and p99-ms are reported per variant.
func BenchmarkCreateToReady(b *testing.B) {
	e := setupBench(b)
	def := e.benchDefinition(b)
	for _, conc := range []int{1, 20} {
		for _, v := range []struct {
			name string
			wait time.Duration
		}{{"reconciler", 0}, {"reconciler-no-ready-wait", -1}} {
			rec := &workload.InstanceReconciler{Client: e.inst.Client, Connector: e.inst.Connector, Renderer: e.inst.Renderer,
				PollInterval: e.inst.PollInterval, ReadyWait: v.wait}
			b.Run(fmt.Sprintf("%s/concurrent=%d", v.name, conc), func(b *testing.B) {
				reconciles.Store(0)
				createNanos.Store(0)
				measure(b, conc, func(ctx context.Context) error { return e.viaReconciler(ctx, rec, def) })
				b.ReportMetric(float64(reconciles.Load())/float64(b.N), "reconciles/op")
				b.ReportMetric(float64(createNanos.Load())/float64(b.N)/1e6, "api-create-ms/op")
			})
		}
		b.Run(fmt.Sprintf("client-go-ssa/concurrent=%d", conc), func(b *testing.B) {
			measure(b, conc, func(ctx context.Context) error { return e.viaSSA(ctx, def) })
		})
	}
}

// measure runs op b.N times, conc at a time, and reports the latency percentiles.
func measure(b *testing.B, conc int, op func(ctx context.Context) error) {
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	errs := make(chan error, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			if err := op(ctx); err != nil {
				errs <- err
				return
			}
			d := time.Since(start)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

type benchEnv struct{ *env }

func setupBench(b *testing.B) benchEnv {
	return benchEnv{setup(b)}
}

func (e benchEnv) benchDefinition(b *testing.B) *api.WorkloadDefinition {
	d, err := e.admin.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: "bench"}, Spec: webSpec()})
	require.NoError(b, err)
	return d
}

// viaReconciler creates an instance, then reconciles it on every change of its Deployment until done.
func (e benchEnv) viaReconciler(ctx context.Context, rec *workload.InstanceReconciler, def *api.WorkloadDefinition) error {
	name := fmt.Sprintf("rec-%d", benchSeq.Add(1))
	start := time.Now()
	created, err := e.admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name}, Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: e.rt.ID}})
	if err != nil {
		return err
	}
	inst, err := e.ctrl.WorkloadInstances().Get(ctx, created.ID)
	if err != nil {
		return err
	}
	createNanos.Add(int64(time.Since(start)))
	var w watch.Interface
	for {
		reconciles.Add(1)
		res, err := rec.Reconcile(ctx, inst)
		if err != nil {
			return err
		}
		if res.RequeueAfter == 0 {
			if w != nil {
				w.Stop()
			}
			return nil
		}
		if w == nil {
			if w, err = e.cl.Clientset.AppsV1().Deployments(name).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name}); err != nil {
				return err
			}
		}
		select {
		case <-w.ResultChan():
		case <-time.After(res.RequeueAfter):
		}
	}
}

// viaSSA applies the same rendered objects with plain client-go server-side apply and watches the
// Deployment until it is Available.
func (e benchEnv) viaSSA(ctx context.Context, def *api.WorkloadDefinition) error {
	name := fmt.Sprintf("ssa-%d", benchSeq.Add(1))
	inst := &api.WorkloadInstance{Meta: api.Meta{Name: name}}
	objs, err := (&render.Renderer{}).Render(ctx, def, inst, "")
	if err != nil {
		return err
	}
	kube.SortForApply(objs)
	for _, o := range objs {
		m, err := e.cl.Mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return err
		}
		ri := e.cl.Dynamic.Resource(m.Resource)
		var applyErr error
		if o.GetNamespace() != "" {
			_, applyErr = ri.Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "bench", Force: true})
		} else {
			_, applyErr = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "bench", Force: true})
		}
		if applyErr != nil {
			return applyErr
		}
	}
	w, err := e.cl.Clientset.AppsV1().Deployments(name).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		d, ok := ev.Object.(*appsv1.Deployment)
		if !ok {
			continue
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want {
			return nil
		}
	}
	return fmt.Errorf("watch of deployment %s ended", name)
}
