package kube

import (
	"context"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// One list of a kind for all the owners searched at once.
//
// Pruning and deleting find an owner's objects with the API server's lists, one per searched kind
// (twenty-odd), and not from the watch cache: an object created a moment ago may not be in the cache
// yet, and one missed there would be left behind. When many owners are deleted at once (a hundred
// instances deleted together, make bench's delete section), their lists were most of their requests,
// and all of them queue behind the cluster's client-side rate limit. Now the owners that search a
// kind at the same time share one list of it: a list of the kind selected by the owners' ids
// (LabelInstanceID in (…)), whose answer each owner filters for its own objects.
//
// A request joins only a list that has not started yet, so every answer was read after the request
// was made: sharing a list never answers from before it. At most one list of a kind is in flight per
// cluster; the requests that come while it runs join the next one, which starts when it ends. A lone
// request is listed at once, as before.

// ownedBatchMax bounds the owners one shared list selects (about 40 bytes of query each).
const ownedBatchMax = 64

// ownedLists coalesces the owned-object lists made on one cluster, per resource.
type ownedLists struct {
	mu    sync.Mutex
	kinds map[schema.GroupVersionResource]*kindLists
}

// kindLists is one resource's shared lists: whether one is running, and those waiting to start.
type kindLists struct {
	running bool
	waiting []*ownedBatch
}

// ownedBatch is one shared list: the owners it selects, and, once done is closed, its answer.
type ownedBatch struct {
	ids  map[string]bool
	done chan struct{}
	byID map[string][]*unstructured.Unstructured
	err  error
}

// listFunc lists a resource's objects owned by any of ids.
type listFunc func(ctx context.Context, ids []string) ([]*unstructured.Unstructured, error)

// list returns the objects of resource res owned by id, from a list that started after this call
// (shared with the other owners that asked for res meanwhile). ctx bounds the wait; the shared list
// itself is not cancelled by one of its callers going away.
func (ol *ownedLists) list(ctx context.Context, res schema.GroupVersionResource, id string, fn listFunc) ([]*unstructured.Unstructured, error) {
	ol.mu.Lock()
	if ol.kinds == nil {
		ol.kinds = map[schema.GroupVersionResource]*kindLists{}
	}
	kl := ol.kinds[res]
	if kl == nil {
		kl = &kindLists{}
		ol.kinds[res] = kl
	}
	var b *ownedBatch
	if n := len(kl.waiting); n > 0 && len(kl.waiting[n-1].ids) < ownedBatchMax {
		b = kl.waiting[n-1]
	} else {
		b = &ownedBatch{ids: map[string]bool{}, done: make(chan struct{})}
		kl.waiting = append(kl.waiting, b)
	}
	b.ids[id] = true
	start := !kl.running
	kl.running = true
	ol.mu.Unlock()

	if start {
		go ol.run(context.WithoutCancel(ctx), res, kl, fn)
	}
	select {
	case <-b.done:
		return b.byID[id], b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run lists the resource's waiting batches one after another, until none waits.
func (ol *ownedLists) run(ctx context.Context, res schema.GroupVersionResource, kl *kindLists, fn listFunc) {
	for {
		ol.mu.Lock()
		if len(kl.waiting) == 0 {
			kl.running = false
			if ol.kinds[res] == kl {
				delete(ol.kinds, res)
			}
			ol.mu.Unlock()
			return
		}
		b := kl.waiting[0]
		kl.waiting = kl.waiting[1:]
		ol.mu.Unlock()

		ids := make([]string, 0, len(b.ids))
		for id := range b.ids {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		objs, err := fn(ctx, ids)
		b.err = err
		b.byID = map[string][]*unstructured.Unstructured{}
		for _, o := range objs {
			if id, _ := ownerOf(o.GetLabels()); b.ids[id] {
				b.byID[id] = append(b.byID[id], o)
			}
		}
		close(b.done)
	}
}

// ownersSelector selects the objects owned by any of ids.
func ownersSelector(ids []string) string {
	if len(ids) == 1 {
		return ManagedSelector + "," + LabelInstanceID + "=" + ids[0]
	}
	return ManagedSelector + "," + LabelInstanceID + " in (" + strings.Join(ids, ",") + ")"
}

// listOwnedKind returns the objects of one kind, in every namespace, owned by owner, through the
// cluster's shared lists. A kind the cluster does not serve has none.
func listOwnedKind(ctx context.Context, cl *Cluster, m *meta.RESTMapping, owner Owner) ([]*unstructured.Unstructured, error) {
	gvk := m.GroupVersionKind
	return cl.owned.list(ctx, m.Resource, owner.InstanceID, func(ctx context.Context, ids []string) ([]*unstructured.Unstructured, error) {
		list, err := cl.Dynamic.Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: ownersSelector(ids)})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out := make([]*unstructured.Unstructured, len(list.Items))
		for i := range list.Items {
			o := &list.Items[i]
			if o.GetKind() == "" {
				o.SetGroupVersionKind(gvk)
			}
			out[i] = o
		}
		return out, nil
	})
}
