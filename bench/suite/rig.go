package suite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// benchCluster is a kubesim cluster with a client-go connection.
type benchCluster struct {
	sim  *kubesim.Cluster
	kube *kube.Cluster
	// kubeconfig is the kubeconfig document.
	kubeconfig string
}

// startCluster starts a kubesim cluster under the work dir.
func (r *Runner) startCluster(ctx context.Context, name string, nodes int) (*benchCluster, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	sim, err := kubesim.Start(sctx, kubesim.Config{
		Binary: r.cfg.KubesimBinary, DataDir: filepath.Join(r.cfg.WorkDir, "kubesim-"+name), Name: name, Nodes: nodes,
	})
	if err != nil {
		return nil, fmt.Errorf("start kubesim %s: %w", name, err)
	}
	raw, err := os.ReadFile(sim.Kubeconfig)
	if err != nil {
		_ = sim.Stop(context.Background())
		return nil, err
	}
	rc, err := kube.RESTConfigFromKubeconfig(raw, "")
	if err != nil {
		_ = sim.Stop(context.Background())
		return nil, err
	}
	// The same client-side limits as the controllers' connector, so neither side is throttled differently.
	rc.QPS, rc.Burst = 100, 200
	rc.UserAgent = "qleet-bench"
	kc, err := kube.NewCluster(rc)
	if err != nil {
		_ = sim.Stop(context.Background())
		return nil, err
	}
	return &benchCluster{sim: sim, kube: kc, kubeconfig: string(raw)}, nil
}

func (c *benchCluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = c.sim.Stop(ctx)
}

// controlPlane is an in-process QleetOS control plane and an admin client.
type controlPlane struct {
	app    *app.App
	client *client.Client
	cfg    app.Config
}

// startControlPlane starts a control plane in dir. dbURL empty means SQLite.
func (r *Runner) startControlPlane(ctx context.Context, cfg app.Config) (*controlPlane, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = discard
		if r.cfg.Verbose {
			cfg.Logger = r.log
		}
	}
	a, err := app.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	cl, err := client.New(a.Endpoint, client.WithToken(a.AdminToken), client.WithHTTPClient(pooledHTTPClient()))
	if err != nil {
		a.Close(ctx)
		return nil, err
	}
	return &controlPlane{app: a, client: cl, cfg: cfg}, nil
}

func (cp *controlPlane) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp.app.Close(ctx)
}

// registerRuntime creates a kubeconfig runtime for a cluster and waits until it is reconciled.
func registerRuntime(ctx context.Context, cl *client.Client, name string, c *benchCluster) (*api.KubernetesRuntime, error) {
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{
		Meta: api.Meta{Name: name},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: c.kubeconfig},
	})
	if err != nil {
		return nil, fmt.Errorf("create runtime %s: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rt, err = cl.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
	if err != nil {
		return nil, fmt.Errorf("runtime %s not reconciled: %w", name, err)
	}
	return rt, nil
}

// benchImage is the image of every benchmark workload (kubesim runs no containers, so any name works).
const benchImage = "nginx:1.27"

// definitionSpec is the workload every section applies: one container, `replicas` replicas.
func definitionSpec(replicas int) api.WorkloadDefinitionSpec {
	r := int32(replicas)
	return api.WorkloadDefinitionSpec{
		Containers: []api.Container{{Name: "web", Image: benchImage, Ports: nil}},
		Replicas:   &r,
	}
}

// renderDirect renders, with QleetOS's own renderer, the objects an instance of def named name would
// apply (a Namespace and a Deployment), so that the direct methods apply exactly the same objects.
func renderDirect(ctx context.Context, def *api.WorkloadDefinition, name, namespace string) ([]*unstructured.Unstructured, error) {
	inst := &api.WorkloadInstance{Meta: api.Meta{Name: name}, Spec: api.WorkloadInstanceSpec{Namespace: namespace}}
	var rdr render.Renderer
	return rdr.Render(ctx, def, inst, "")
}

// ssa server-side applies objs in order with the bench field manager.
func ssa(ctx context.Context, c *kube.Cluster, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		data, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		gvk := o.GroupVersionKind()
		mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("map %s: %w", gvk, err)
		}
		ri := c.Dynamic.Resource(mapping.Resource)
		force := true
		opts := metav1.PatchOptions{FieldManager: "qleet-bench", Force: &force}
		if o.GetNamespace() != "" && mapping.Scope.Name() == "namespace" {
			_, err = ri.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// deployWatcher watches every Deployment of a cluster (one informer, no polling) and tells waiters
// when one becomes Available at its current generation.
type deployWatcher struct {
	mu      sync.Mutex
	ready   map[string]time.Time
	waiters map[string][]chan time.Time
	stop    chan struct{}
}

// startDeployWatcher watches the Deployments matching selector (every one when empty).
func startDeployWatcher(ctx context.Context, c *kube.Cluster, selector string) (*deployWatcher, error) {
	w := &deployWatcher{ready: map[string]time.Time{}, waiters: map[string][]chan time.Time{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(c.Clientset, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	}))
	inf := f.Apps().V1().Deployments().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				w.mu.Lock()
				delete(w.ready, d.Namespace+"/"+d.Name)
				w.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	f.Start(w.stop)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		close(w.stop)
		return nil, fmt.Errorf("deployment informer did not sync")
	}
	return w, nil
}

func (w *deployWatcher) close() { close(w.stop) }

// available reports whether d is Available at its current generation with every replica updated.
func available(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *deployWatcher) observe(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || !available(d) {
		return
	}
	now := time.Now()
	key := d.Namespace + "/" + d.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.ready[key]; !seen {
		w.ready[key] = now
	}
	for _, ch := range w.waiters[key] {
		ch <- now
	}
	delete(w.waiters, key)
}

// forget drops what is known about key, so that a later wait sees only a new rollout.
func (w *deployWatcher) forget(key string) {
	w.mu.Lock()
	delete(w.ready, key)
	w.mu.Unlock()
}

// wait returns when the Deployment namespace/name is Available, with the time the watch saw it.
func (w *deployWatcher) wait(ctx context.Context, namespace, name string) (time.Time, error) {
	key := namespace + "/" + name
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	if t, ok := w.ready[key]; ok {
		w.mu.Unlock()
		return t, nil
	}
	w.waiters[key] = append(w.waiters[key], ch)
	w.mu.Unlock()
	select {
	case t := <-ch:
		return t, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("deployment %s not available: %w", key, ctx.Err())
	}
}

// procStat is this process's resident memory and CPU time.
type procStat struct {
	rssMB float64
	cpu   time.Duration
}

func readProcStat() procStat {
	var ps procStat
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				ps.rssMB = kb / 1024
			}
		}
		f.Close()
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		ps.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return ps
}
