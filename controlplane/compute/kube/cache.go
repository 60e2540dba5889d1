package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// ErrNotCached says the cache cannot answer for a kind (its watch is not synced: the credentials may not
// allow a cluster-wide list and watch, or the cluster is slow); callers then read the cluster directly.
var ErrNotCached = errors.New("kind not cached")

// cacheSyncTimeout bounds how long the first look-up of a kind waits for its watch to fill the cache.
const cacheSyncTimeout = 10 * time.Second

// Cache is a watch-fed cache of the objects QleetOS manages in one cluster (those labelled
// ManagedSelector), shared by everything that uses the Cluster: the instance controller reads health
// and checks drift from it instead of asking the API server, and the agent hangs its handlers on it. A
// kind is watched from its first look-up on; server-side-apply bookkeeping is dropped from cached
// objects, and pods keep only what health needs. Get one with Cluster.Cache.
type Cache struct {
	cl    *Cluster
	typed informers.SharedInformerFactory
	dyn   dynamicinformer.DynamicSharedInformerFactory
	stop  chan struct{}

	closeOnce sync.Once
	mu        sync.Mutex
	informers map[schema.GroupKind]cache.SharedIndexInformer
	// filled is, per kind, closed once its watch has filled the cache (see watchSync).
	filled map[schema.GroupKind]chan struct{}
	// syncDeadline is, per kind, the end of the wait for its watch's first fill.
	syncDeadline map[schema.GroupKind]time.Time

	// waiters holds, per instance id, the channel that the next change of one of its cached objects
	// closes (see Changed).
	waitMu  sync.Mutex
	waiters map[string]*changeWaiter
}

type changeWaiter struct {
	ch chan struct{}
	n  int
}

// typedKinds are cached through typed informers (smaller than unstructured, and what the agent's
// handlers read); other kinds through dynamic informers.
var typedKinds = map[schema.GroupKind]func(informers.SharedInformerFactory) cache.SharedIndexInformer{
	{Group: "apps", Kind: "Deployment"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Apps().V1().Deployments().Informer()
	},
	{Group: "apps", Kind: "StatefulSet"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Apps().V1().StatefulSets().Informer()
	},
	{Group: "apps", Kind: "DaemonSet"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Apps().V1().DaemonSets().Informer()
	},
	{Group: "batch", Kind: "Job"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Batch().V1().Jobs().Informer()
	},
	{Group: "", Kind: "Pod"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Pods().Informer()
	},
	{Group: "", Kind: "Namespace"}: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Namespaces().Informer()
	},
}

// GroupKinds of the kinds the agent and health read.
var (
	// DeploymentKind is apps/Deployment.
	DeploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	// StatefulSetKind is apps/StatefulSet.
	StatefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	// DaemonSetKind is apps/DaemonSet.
	DaemonSetKind = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	// PodKind is core/Pod.
	PodKind = schema.GroupKind{Kind: "Pod"}
)

// Cache returns the cluster's cache, creating it on first use. It runs until Close.
func (cl *Cluster) Cache() *Cache {
	cl.cacheOnce.Do(func() {
		selected := func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector }
		cl.cache = &Cache{
			cl: cl,
			typed: informers.NewSharedInformerFactoryWithOptions(cl.Clientset, 0,
				informers.WithTweakListOptions(selected), informers.WithTransform(Slim)),
			dyn:          dynamicinformer.NewFilteredDynamicSharedInformerFactory(cl.Dynamic, 0, metav1.NamespaceAll, selected),
			stop:         make(chan struct{}),
			informers:    map[schema.GroupKind]cache.SharedIndexInformer{},
			filled:       map[schema.GroupKind]chan struct{}{},
			syncDeadline: map[schema.GroupKind]time.Time{},
			waiters:      map[string]*changeWaiter{},
		}
	})
	return cl.cache
}

// Close stops the cluster's cache; look-ups then answer ErrNotCached.
func (cl *Cluster) Close() {
	c := cl.Cache() // created closed, if it never was used
	c.closeOnce.Do(func() {
		c.mu.Lock()
		close(c.stop)
		c.mu.Unlock()
		c.typed.Shutdown()
		c.dyn.Shutdown()
	})
}

// Done is closed when the cluster is closed (Close): its cache, watches and probes stop.
func (cl *Cluster) Done() <-chan struct{} { return cl.Cache().stop }

// Informer returns the synced shared informer of a kind, starting its watch on first use. Look-ups in
// the first 10s wait for the watch to fill; it returns ErrNotCached when the watch is not synced.
func (c *Cache) Informer(ctx context.Context, gk schema.GroupKind, version string) (cache.SharedIndexInformer, error) {
	inf, synced, err := c.informer(gk, version)
	if err != nil {
		return nil, err
	}
	if inf.HasSynced() {
		return inf, nil
	}
	// Only look-ups within the first wait wait: a watch the credentials forbid must not slow every
	// reconcile down.
	c.mu.Lock()
	deadline, ok := c.syncDeadline[gk]
	if !ok {
		deadline = time.Now().Add(cacheSyncTimeout)
		c.syncDeadline[gk] = deadline
	}
	c.mu.Unlock()
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-synced:
		return inf, nil
	case <-wait.C:
	case <-ctx.Done():
	}
	return nil, fmt.Errorf("%s: %w", gk, ErrNotCached)
}

// syncPoll is how often a new watch is asked whether it has filled the cache. client-go's
// WaitForCacheSync asks every 100ms, which each first look-up of a kind on a new cluster paid in full:
// about 100ms per kind on the path from a cluster to a Ready app (a namespace, a Secret, a Service, an
// Ingress, a Certificate, ...), where the lists themselves take a few milliseconds.
const syncPoll = 2 * time.Millisecond

// watchSync closes synced once inf has synced, asking every syncPoll, or gives up when the cache
// closes. One per kind, for the first fill only; look-ups wait on the channel.
func (c *Cache) watchSync(inf cache.SharedIndexInformer, synced chan struct{}) {
	t := time.NewTicker(syncPoll)
	defer t.Stop()
	for !inf.HasSynced() {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
	}
	close(synced)
}

// Peek is Get without the wait for a kind's first fill: while the kind's watch is not synced (it is
// started if need be) it answers nil, as for an object the cache does not hold.
func (c *Cache) Peek(ref AppliedRef) (map[string]any, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	inf, _, err := c.informer(ref.GroupKind(), gv.Version)
	if err != nil || !inf.HasSynced() {
		return nil, err
	}
	return c.Get(context.Background(), ref)
}

func (c *Cache) informer(gk schema.GroupKind, version string) (cache.SharedIndexInformer, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stop:
		return nil, nil, fmt.Errorf("%s: cache closed: %w", gk, ErrNotCached)
	default:
	}
	if inf, ok := c.informers[gk]; ok {
		return inf, c.filled[gk], nil
	}
	var inf cache.SharedIndexInformer
	if mk, ok := typedKinds[gk]; ok {
		inf = mk(c.typed)
		c.typed.Start(c.stop)
	} else {
		m, err := mapping(c.cl, gk.WithVersion(version))
		if err != nil {
			return nil, nil, err
		}
		inf = c.dyn.ForResource(m.Resource).Informer()
		if err := inf.SetTransform(Slim); err != nil {
			return nil, nil, err
		}
		c.dyn.Start(c.stop)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.wake,
		UpdateFunc: func(old, obj any) {
			c.wake(obj)
			if edited(old, obj) {
				c.ownedChanged(obj)
			}
		},
		DeleteFunc: func(obj any) {
			c.wake(obj)
			c.ownedChanged(obj)
		},
	}); err != nil {
		return nil, nil, err
	}
	c.informers[gk] = inf
	synced := make(chan struct{})
	c.filled[gk] = synced
	go c.watchSync(inf, synced)
	return inf, synced, nil
}

// Changed returns a channel that is closed at the next change the cache sees (an add, update or
// delete) of an object labelled for instanceID, and a func that releases it. Call it before reading the
// cache, so that no change between the read and the wait is missed. A reconcile that has just applied
// waits on it for its workload to become ready, rather than ending and being notified again.
func (c *Cache) Changed(instanceID string) (<-chan struct{}, func()) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	w, ok := c.waiters[instanceID]
	if !ok {
		w = &changeWaiter{ch: make(chan struct{})}
		c.waiters[instanceID] = w
	}
	w.n++
	return w.ch, func() {
		c.waitMu.Lock()
		defer c.waitMu.Unlock()
		if c.waiters[instanceID] == w {
			if w.n--; w.n == 0 {
				delete(c.waiters, instanceID)
			}
		}
	}
}

// wake closes the Changed channel of the instance that obj is labelled for, if anyone waits on it.
func (c *Cache) wake(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	id := m.GetLabels()[LabelInstanceID]
	if id == "" {
		return
	}
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	if w, ok := c.waiters[id]; ok {
		close(w.ch)
		delete(c.waiters, id)
	}
}

// ownedChanged tells the cluster's OnOwnedChange about the owner of obj, an object QleetOS applied that
// was edited or deleted. Pods are left out: they belong to their workload's controller, and the agent
// follows their health.
func (c *Cache) ownedChanged(obj any) {
	if c.cl.onOwnedChange == nil {
		return
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if _, isPod := obj.(*corev1.Pod); isPod {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	l := m.GetLabels()
	id, managed := ownerOf(l)
	if !managed || id == "" {
		return
	}
	c.cl.onOwnedChange(l[LabelOwnerKind], id)
}

// edited reports whether an update changed what was applied rather than only what the cluster reports:
// the spec (a new metadata.generation), labels or annotations; for kinds without a generation, anything
// but the status. Status-only updates (a rollout's progress) are not edits. A watch that resumes, or
// relists, after an outage hands over the changes made meanwhile as updates, so they count too.
func edited(oldObj, newObj any) bool {
	o, err1 := meta.Accessor(oldObj)
	n, err2 := meta.Accessor(newObj)
	if err1 != nil || err2 != nil {
		return false
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return false // a resync of the informer, not a change
	}
	if o.GetGeneration() != n.GetGeneration() || o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !sameAnnotations(o.GetAnnotations(), n.GetAnnotations()) {
		return true
	}
	if n.GetGeneration() != 0 {
		return false // the spec is unchanged: a status update
	}
	ou, ok1 := oldObj.(interface{ UnstructuredContent() map[string]any })
	nu, ok2 := newObj.(interface{ UnstructuredContent() map[string]any })
	if !ok1 || !ok2 {
		return false
	}
	return !equality.Semantic.DeepEqual(withoutStatus(ou.UnstructuredContent()), withoutStatus(nu.UnstructuredContent()))
}

// controllerAnnotations are the annotations that Kubernetes's own controllers write on the workloads
// QleetOS applies, as part of a rollout: a change of them is progress, not an edit.
var controllerAnnotations = map[string]bool{
	"deployment.kubernetes.io/revision":        true, // Deployments: the revision rolled out
	"deprecated.daemonset.template.generation": true, // DaemonSets: the template's generation
}

// sameAnnotations reports whether a and b hold the same annotations, but for controllerAnnotations.
func sameAnnotations(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; (!ok || w != v) && !controllerAnnotations[k] {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !controllerAnnotations[k] {
			return false
		}
	}
	return true
}

// withoutStatus returns content without its status and the metadata every write changes.
func withoutStatus(content map[string]any) map[string]any {
	out := make(map[string]any, len(content))
	for k, v := range content {
		if k != "status" && k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// Get returns the cached object ref names, as unstructured content (a copy the caller may keep), or nil
// when the cluster has no such managed object. It returns ErrNotCached when the kind's watch is not synced.
func (c *Cache) Get(ctx context.Context, ref AppliedRef) (map[string]any, error) {
	obj, err := c.object(ctx, ref)
	if err != nil || obj == nil {
		return nil, err
	}
	if u, ok := obj.(interface{ UnstructuredContent() map[string]any }); ok {
		return runtime.DeepCopyJSON(u.UnstructuredContent()), nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// object returns the cached object itself (shared: do not modify), or nil.
func (c *Cache) object(ctx context.Context, ref AppliedRef) (runtime.Object, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	inf, err := c.Informer(ctx, ref.GroupKind(), gv.Version)
	if err != nil {
		return nil, err
	}
	key := ref.Name
	if ref.Namespace != "" {
		key = ref.Namespace + "/" + ref.Name
	}
	obj, exists, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return nil, err
	}
	ro, ok := obj.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("%s: cached object is a %T", ref, obj)
	}
	return ro, nil
}

// Pods returns the cached managed pods of a namespace that match sel (shared: do not modify).
func (c *Cache) Pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	inf, err := c.Informer(ctx, PodKind, "v1")
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	err = cache.ListAllByNamespace(inf.GetIndexer(), namespace, sel, func(o any) {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	})
	return out, err
}

// Slim is the informer transform of QleetOS's caches (this one, and the agent's watch of Warning
// events). It drops what nothing reads from cached objects: server-side-apply bookkeeping and kubectl's
// last-applied annotation everywhere, and a pod's spec (health reads its status). At 10,000 instances
// managed fields alone were an eighth of the control plane's heap (make bench, scale section).
func Slim(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName}
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if ann := m.GetAnnotations(); ann[corev1.LastAppliedConfigAnnotation] != "" {
			delete(ann, corev1.LastAppliedConfigAnnotation)
			m.SetAnnotations(ann)
		}
	}
	return obj, nil
}
