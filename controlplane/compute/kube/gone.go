package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Deleting an owner's objects without holding a worker while they go.
//
// A namespace is gone only after the namespace controller has emptied it, and that controller waits a
// fixed 5s (namespaceDeletionGracePeriod in kube-controller-manager) before it starts: every deletion of
// a workload in its own namespace takes at least that long, however it is asked for. DeleteAll used to
// spend that time polling: one list per searched kind (twenty-odd) every 100ms..1s, per owner, through
// the controllers' client-side rate limit (100 requests/s per cluster), so that ten owners deleted at
// once (terraform's parallelism) waited on each other's lists, and the worker that finalized each one
// was held for the whole time. Now one pass (DeleteOwned) finds and deletes the owner's objects with the
// API server's lists, Remaining checks what is left of them in the cluster's watch-fed cache (a GET for
// kinds it does not watch), and WhenGone calls back when the cache sees the last of them deleted.

// DeleteOwned deletes every object labelled for owner (searching SearchKinds, the objects the garbage
// collector removes after them, and the kinds of owner.Previous), once, and returns the refs of those
// still present: the ones it just asked to delete, those already being deleted, and those the garbage
// collector will remove. Objects with a controlling owner are left to the garbage collector, and a
// Namespace that holds objects that are not owner's is left alone (see namespaceShared). An empty
// answer means nothing is left.
func DeleteOwned(ctx context.Context, cl *Cluster, owner Owner) ([]AppliedRef, error) {
	if owner.InstanceID == "" {
		return nil, fmt.Errorf("delete: owner has no instance id")
	}
	if err := deleteOwnNamespace(ctx, cl, owner); err != nil {
		return nil, err
	}
	kinds := searchKinds(append(append([]schema.GroupVersionKind{}, SearchKinds...), childKinds...), owner.Previous)
	owned, err := listOwned(ctx, cl, owner, kinds)
	if err != nil {
		return nil, err
	}
	var left []AppliedRef
	for _, o := range owned {
		if o.GetDeletionTimestamp() == nil && metav1.GetControllerOf(o) == nil {
			shared, err := namespaceShared(ctx, cl, o, owner)
			if err != nil {
				return nil, err
			}
			if shared {
				continue // another instance's objects live there: leave the namespace to it
			}
			if err := deleteObject(ctx, cl, o); err != nil {
				return nil, err
			}
		}
		left = append(left, RefOf(o))
	}
	return left, nil
}

// deleteOwnNamespace deletes owner.Namespace first when it is labelled for owner and holds nothing that
// is not owner's (see namespaceShared). The namespace controller waits 5s before it empties a namespace;
// that wait should start before DeleteOwned's twenty-odd cluster-wide lists, which queue behind the
// client-side rate limit when many owners are deleted at once (twenty at once: their namespaces were
// deleted over 9s instead of 4s, make bench's delete section), not after them.
func deleteOwnNamespace(ctx context.Context, cl *Cluster, owner Owner) error {
	if owner.Namespace == "" {
		return nil
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	ri, _, err := resourceFor(cl, gvk, "")
	if err != nil {
		return fmt.Errorf("look up namespace %s: %w", owner.Namespace, err)
	}
	var ns *unstructured.Unstructured
	if inf := cl.Cache().synced(gvk.GroupKind()); inf != nil {
		// The cache holds every namespace QleetOS labelled; one it does not hold (yet) is not deleted
		// here, but found by DeleteOwned's lists, which read the API server.
		o, ok, err := inf.GetIndexer().GetByKey(owner.Namespace)
		if err != nil || !ok {
			return err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return fmt.Errorf("look up namespace %s: %w", owner.Namespace, err)
		}
		ns = &unstructured.Unstructured{Object: m}
	} else {
		ns, err = ri.Get(ctx, owner.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up namespace %s: %w", owner.Namespace, err)
		}
	}
	if id, ok := ownerOf(ns.GetLabels()); !ok || id != owner.InstanceID || ns.GetDeletionTimestamp() != nil {
		return nil // not owner's, or already going
	}
	ns.SetGroupVersionKind(gvk)
	if shared, err := namespaceShared(ctx, cl, ns, owner); err != nil || shared {
		return err
	}
	if err := deleteObject(ctx, cl, ns); err != nil && !apierrors.IsConflict(err) {
		return err // a conflict: the namespace is already being emptied (the cache had not seen it yet)
	}
	return nil
}

// Remaining returns the refs that still exist in the cluster. Kinds the cluster's cache watches (and
// has filled) are looked up there, so a check costs no request; other kinds with a GET each.
func Remaining(ctx context.Context, cl *Cluster, refs []AppliedRef) ([]AppliedRef, error) {
	var left []AppliedRef
	c := cl.Cache()
	for _, r := range refs {
		if inf := c.synced(r.GroupKind()); inf != nil {
			if _, ok, err := inf.GetIndexer().GetByKey(cacheKey(r.Namespace, r.Name)); err == nil {
				if ok {
					left = append(left, r)
				}
				continue
			}
		}
		ri, _, err := resourceFor(cl, schema.FromAPIVersionAndKind(r.APIVersion, r.Kind), r.Namespace)
		if meta.IsNoMatchError(err) {
			continue // the kind is no longer served: nothing of it is left
		}
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", r, err)
		}
		_, err = ri.Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", r, err)
		}
		left = append(left, r)
	}
	return left, nil
}

// StillPresent returns an error wrapping ErrStillPresent that names (some of) the refs still present.
func StillPresent(refs []AppliedRef) error {
	names := make([]string, 0, 4)
	for i, r := range refs {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-3))
			break
		}
		names = append(names, r.String())
	}
	return fmt.Errorf("%w: %s", ErrStillPresent, strings.Join(names, ", "))
}

// WhenGone calls fn once, in a goroutine of its own, when the cluster's cache has seen every one of
// refs deleted. Only refs of kinds the cache already watches (and has filled), and that it holds now,
// are tracked; tracked says how many. With none tracked, fn is never called: the caller must look again
// by itself. stop cancels the call (it is safe to call more than once, and after fn ran).
func (c *Cache) WhenGone(refs []AppliedRef, fn func()) (stop func(), tracked int) {
	gw := c.goneWatch()
	w := &goneWaiter{left: map[string]bool{}, fn: fn}
	type probe struct {
		key string
		inf cache.SharedIndexInformer
		ns  string
		nm  string
	}
	var probes []probe
	for _, r := range refs {
		gk := r.GroupKind()
		inf := c.synced(gk)
		if inf == nil || gw.hook(gk, inf) != nil {
			continue
		}
		probes = append(probes, probe{key: goneKey(gk, r.Namespace, r.Name), inf: inf, ns: r.Namespace, nm: r.Name})
	}
	if len(probes) == 0 {
		return func() {}, 0
	}
	gw.mu.Lock()
	for _, p := range probes {
		w.left[p.key] = true
		if gw.waiters[p.key] == nil {
			gw.waiters[p.key] = map[*goneWaiter]bool{}
		}
		gw.waiters[p.key][w] = true
	}
	gw.mu.Unlock()
	// Registered first and looked up after, so that a deletion between the two is not missed: the
	// informer updates its store before it calls the handlers.
	for _, p := range probes {
		if _, ok, _ := p.inf.GetIndexer().GetByKey(cacheKey(p.ns, p.nm)); !ok {
			gw.gone(p.key, w)
		}
	}
	return func() { gw.cancel(w) }, len(probes)
}

// synced returns the kind's informer when the cache already watches it and has filled, else nil. It
// never starts a watch.
func (c *Cache) synced(gk schema.GroupKind) cache.SharedIndexInformer {
	c.mu.Lock()
	inf, ok := c.informers[gk]
	c.mu.Unlock()
	if !ok || !inf.HasSynced() {
		return nil
	}
	return inf
}

func cacheKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func goneKey(gk schema.GroupKind, namespace, name string) string {
	return gk.String() + "/" + namespace + "/" + name
}

// goneWatch is a cache's registry of WhenGone waiters: one delete handler per watched kind, and the
// waiters of each object.
type goneWatch struct {
	mu      sync.Mutex
	hooked  map[schema.GroupKind]bool
	waiters map[string]map[*goneWaiter]bool
}

// goneWaiter is one WhenGone call.
type goneWaiter struct {
	left  map[string]bool
	fn    func()
	fired bool
}

// goneWatches holds each cache's goneWatch (kept beside the Cache rather than in it), until the cache
// is closed.
var goneWatches sync.Map // *Cache -> *goneWatch

func (c *Cache) goneWatch() *goneWatch {
	if v, ok := goneWatches.Load(c); ok {
		return v.(*goneWatch)
	}
	v, loaded := goneWatches.LoadOrStore(c, &goneWatch{hooked: map[schema.GroupKind]bool{}, waiters: map[string]map[*goneWaiter]bool{}})
	if !loaded {
		go func() {
			<-c.stop
			goneWatches.Delete(c)
		}()
	}
	return v.(*goneWatch)
}

// hook adds the delete handler to a kind's informer, once.
func (gw *goneWatch) hook(gk schema.GroupKind, inf cache.SharedIndexInformer) error {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if gw.hooked[gk] {
		return nil
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		key := goneKey(gk, m.GetNamespace(), m.GetName())
		gw.mu.Lock()
		ws := make([]*goneWaiter, 0, len(gw.waiters[key]))
		for w := range gw.waiters[key] {
			ws = append(ws, w)
		}
		gw.mu.Unlock()
		for _, w := range ws {
			gw.gone(key, w)
		}
	}})
	if err != nil {
		return err
	}
	gw.hooked[gk] = true
	return nil
}

// gone records that key is gone for w, and calls w's fn when nothing it tracks is left.
func (gw *goneWatch) gone(key string, w *goneWaiter) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if !w.left[key] {
		return
	}
	delete(w.left, key)
	if ws := gw.waiters[key]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(gw.waiters, key)
		}
	}
	if len(w.left) == 0 && !w.fired {
		w.fired = true
		go w.fn()
	}
}

// cancel drops w.
func (gw *goneWatch) cancel(w *goneWaiter) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	w.fired = true
	for key := range w.left {
		if ws := gw.waiters[key]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(gw.waiters, key)
			}
		}
	}
	w.left = map[string]bool{}
}
