package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// How owned objects are found.
//
// Listing every resource type the cluster serves would cost one request per type (dozens) per
// reconcile, so Prune and DeleteAll search a fixed set of kinds, SearchKinds (the kinds workloads,
// manifests and charts commonly create), plus every kind the owner applied now or before (the kinds of
// keep and of Owner.Previous, which the controller keeps in status). An object of some other kind that
// was applied and then dropped from both before its owner's status recorded it would be missed; that
// takes a crash between the apply and the status write, followed by a change of definition.
//
// Objects that have a controlling owner reference (ReplicaSets of a Deployment, Pods of a ReplicaSet,
// which inherit the pod template's labels) are left to the garbage collector.

// SearchKinds are the kinds Prune and DeleteAll always search for owned objects.
var SearchKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "batch", Version: "v1", Kind: "CronJob"},
	{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

// childKinds are searched too when waiting for everything to be gone: objects the garbage collector
// removes after their owners.
var childKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	{Version: "v1", Kind: "Pod"},
}

// ErrStillPresent is returned (wrapped) by DeleteAll when owned objects remain after its wait.
var ErrStillPresent = errors.New("owned objects still present")

// DeleteTimeout bounds how long DeleteAll waits for owned objects to be gone.
const DeleteTimeout = 60 * time.Second

// Prune deletes the objects labelled for owner that are not in keep, and returns what it deleted. It
// searches SearchKinds and the kinds of keep and owner.Previous (see above). Objects already being
// deleted, and objects with a controlling owner, are left alone.
func Prune(ctx context.Context, cl *Cluster, owner Owner, keep []AppliedRef) ([]AppliedRef, error) {
	if owner.InstanceID == "" {
		return nil, errors.New("prune: owner has no instance id")
	}
	kept := make(map[string]bool, len(keep))
	for _, r := range keep {
		kept[r.key()] = true
	}
	owned, err := listOwned(ctx, cl, owner, searchKinds(SearchKinds, keep, owner.Previous))
	if err != nil {
		return nil, err
	}
	var deleted []AppliedRef
	for _, o := range owned {
		ref := RefOf(o)
		if kept[ref.key()] || o.GetDeletionTimestamp() != nil || metav1.GetControllerOf(o) != nil {
			continue
		}
		if shared, err := namespaceShared(ctx, cl, o, owner); err != nil || shared {
			if err != nil {
				return deleted, err
			}
			continue
		}
		if err := deleteObject(ctx, cl, o); err != nil {
			return deleted, err
		}
		deleted = append(deleted, ref)
	}
	return deleted, nil
}

// Owned lists the objects labelled for owner, including those the garbage collector will remove
// (ReplicaSets and Pods), searching SearchKinds and the kinds of owner.Previous.
func Owned(ctx context.Context, cl *Cluster, owner Owner) ([]AppliedRef, error) {
	objs, err := listOwned(ctx, cl, owner, searchKinds(append(append([]schema.GroupVersionKind{}, SearchKinds...), childKinds...), owner.Previous))
	if err != nil {
		return nil, err
	}
	refs := make([]AppliedRef, len(objs))
	for i, o := range objs {
		refs[i] = RefOf(o)
	}
	return refs, nil
}

// DeleteAll deletes every object labelled for owner and waits until they, and the objects the garbage
// collector removes after them, are gone: at most DeleteTimeout (or until ctx ends). When objects
// remain it returns an error wrapping ErrStillPresent that names some of them. It deletes with
// DeleteOwned, waits on the cluster cache's delete events (WhenGone; looking again at least every
// second), and once what it found is gone makes one more pass for anything that appeared meanwhile.
func DeleteAll(ctx context.Context, cl *Cluster, owner Owner) error {
	if owner.InstanceID == "" {
		return errors.New("delete: owner has no instance id")
	}
	ctx, cancel := context.WithTimeout(ctx, DeleteTimeout)
	defer cancel()
	failed := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("delete owned objects: %w: %w", ErrStillPresent, err)
		}
		return err
	}
	for {
		left, err := DeleteOwned(ctx, cl, owner)
		if err != nil {
			return failed(err)
		}
		if len(left) == 0 {
			return nil
		}
		delay := 100 * time.Millisecond
		for len(left) > 0 {
			woke := make(chan struct{})
			stop, _ := cl.Cache().WhenGone(left, func() { close(woke) })
			select {
			case <-ctx.Done():
				stop()
				return StillPresent(left)
			case <-woke:
			case <-time.After(delay):
			}
			stop()
			delay = min(delay*2, time.Second)
			if left, err = Remaining(ctx, cl, left); err != nil {
				return failed(err)
			}
		}
	}
}

// namespaceShared reports whether o is a Namespace that holds objects that are not owner's: objects
// QleetOS applied for another owner (two instances given the same spec.namespace), or objects someone
// put there by hand. Deleting the namespace would delete them too, so Prune and DeleteAll leave such a
// namespace alone. Objects with a controlling owner (pods of a ReplicaSet) are judged by their owner,
// and the objects Kubernetes itself puts in every namespace are not counted. The kinds are listed
// concurrently (up to listConcurrency at once), and the first foreign object found ends the search.
func namespaceShared(ctx context.Context, cl *Cluster, o *unstructured.Unstructured, owner Owner) (bool, error) {
	if o.GetKind() != "Namespace" || o.GroupVersionKind().Group != "" {
		return false, nil
	}
	var resources []schema.GroupVersionResource
	var kinds []string
	for _, gvk := range append(append([]schema.GroupVersionKind{}, SearchKinds...), childKinds...) {
		m, err := mapping(cl, gvk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("map %s: %w", gvk.Kind, err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			resources, kinds = append(resources, m.Resource), append(kinds, gvk.Kind)
		}
	}
	errFound := errors.New("found a foreign object")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listConcurrency)
	for i, res := range resources {
		g.Go(func() error {
			list, err := cl.Dynamic.Resource(res).Namespace(o.GetName()).List(gctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("list %s in namespace %s: %w", kinds[i], o.GetName(), err)
			}
			for j := range list.Items {
				item := &list.Items[j]
				if id, _ := ownerOf(item.GetLabels()); id == owner.InstanceID || metav1.GetControllerOf(item) != nil ||
					item.GetDeletionTimestamp() != nil || builtIn(kinds[i], item.GetName()) {
					continue
				}
				return errFound
			}
			return nil
		})
	}
	switch err := g.Wait(); {
	case errors.Is(err, errFound):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil
}

// builtIn reports whether an object is one Kubernetes creates in every namespace.
func builtIn(kind, name string) bool {
	return kind == "ServiceAccount" && name == "default" || kind == "ConfigMap" && name == "kube-root-ca.crt"
}

// searchKinds merges base with the kinds of the given refs, one entry per group and kind.
func searchKinds(base []schema.GroupVersionKind, refLists ...[]AppliedRef) []schema.GroupVersionKind {
	seen := map[schema.GroupKind]bool{}
	var out []schema.GroupVersionKind
	add := func(gvk schema.GroupVersionKind) {
		if gvk.Kind == "" || seen[gvk.GroupKind()] {
			return
		}
		seen[gvk.GroupKind()] = true
		out = append(out, gvk)
	}
	for _, gvk := range base {
		add(gvk)
	}
	for _, refs := range refLists {
		for _, r := range refs {
			add(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind))
		}
	}
	return out
}

// listConcurrency bounds the list requests listOwned has in flight at once.
const listConcurrency = 8

// listOwned lists the objects of the given kinds, in every namespace, that carry owner's labels, in the
// order of kinds. Kinds the cluster does not serve are skipped. The kinds are listed concurrently (up
// to listConcurrency at once): one list per kind, one after another, was most of a reconcile's time
// (about 1 ms each on kubesim, twenty-odd kinds per runtime, read from the reconcile's trace). Owners
// that search a kind at the same time share one list of it (see ownedlists.go).
func listOwned(ctx context.Context, cl *Cluster, owner Owner, kinds []schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	return listOwnedAtOnce(ctx, cl, owner, kinds, listConcurrency)
}

// listOwnedAtOnce is listOwned with at most limit lists in flight.
func listOwnedAtOnce(ctx context.Context, cl *Cluster, owner Owner, kinds []schema.GroupVersionKind, limit int) ([]*unstructured.Unstructured, error) {
	mappings := make([]*meta.RESTMapping, len(kinds))
	for i, gvk := range kinds {
		m, err := mapping(cl, gvk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("map %s: %w", gvk.Kind, err)
		}
		mappings[i] = m
	}
	found := make([][]*unstructured.Unstructured, len(kinds))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i, m := range mappings {
		if m == nil {
			continue
		}
		g.Go(func() error {
			objs, err := listOwnedKind(gctx, cl, m, owner)
			if err != nil {
				return fmt.Errorf("list %s: %w", kinds[i].Kind, err)
			}
			found[i] = objs
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, objs := range found {
		out = append(out, objs...)
	}
	return out, nil
}

func deleteObject(ctx context.Context, cl *Cluster, o *unstructured.Unstructured) error {
	ri, _, err := resourceFor(cl, o.GroupVersionKind(), o.GetNamespace())
	if err != nil {
		return fmt.Errorf("delete %s: %w", RefOf(o), err)
	}
	bg := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", RefOf(o), err)
	}
	return nil
}
