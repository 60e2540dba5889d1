package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// InSync reports whether every one of objs is, in the cluster's cache, as Apply would leave it: present,
// not being deleted, and with every field the prepared desired object sets (labels, annotations including
// the applied hash, spec) at the desired value. Then applying would change nothing QleetOS owns, and
// the returned refs (in apply order, each with the live generation) stand for an apply. This is how a
// drift check of a Ready instance costs no request to the cluster.
//
// Any doubt answers false and the caller applies: a kind the cache cannot serve, a value the API server
// writes back in another form (a quantity "0.5" stored as "500m"), a list another field manager added
// to. A false answer is never wrong, only slower.
func InSync(ctx context.Context, cl *Cluster, owner Owner, objs []*unstructured.Unstructured) ([]AppliedRef, bool) {
	if owner.InstanceID == "" || len(objs) == 0 {
		return nil, false
	}
	c := cl.Cache()
	prepared := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "" || o.GetAPIVersion() == "" || o.GetName() == "" {
			return nil, false
		}
		prepared = append(prepared, prepare(o, owner))
	}
	SortForApply(prepared)
	refs := make([]AppliedRef, 0, len(prepared))
	for _, o := range prepared {
		m, err := cl.Mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return nil, false
		}
		if err := placeNamespace(o, m, owner); err != nil {
			return nil, false
		}
		ref := RefOf(o)
		live, err := c.Get(ctx, ref)
		if err != nil || live == nil || !objectInSync(live, o) {
			return nil, false
		}
		ref.Generation = (&unstructured.Unstructured{Object: live}).GetGeneration()
		refs = append(refs, ref)
	}
	return refs, true
}

// objectInSync reports whether live (from the cache) is as applying the prepared object o would leave
// it: not being deleted, and holding every value o sets.
func objectInSync(live map[string]any, o *unstructured.Unstructured) bool {
	if (&unstructured.Unstructured{Object: live}).GetDeletionTimestamp() != nil {
		return false
	}
	desired := o.Object
	if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
		desired = sharedNamespaceView(o)
	}
	return covers(live, desired, true)
}

// sharedNamespaceView is what an instance's Namespace must match: several instances may share one (the
// same spec.namespace), and the last to apply it stamps its own id and hash on it, so those two are not
// compared.
func sharedNamespaceView(o *unstructured.Unstructured) map[string]any {
	u := o.DeepCopy()
	l := u.GetLabels()
	delete(l, LabelInstanceID)
	delete(l, LabelOwnerKind)
	u.SetLabels(l)
	a := u.GetAnnotations()
	delete(a, AnnotationAppliedHash)
	u.SetAnnotations(a)
	return u.Object
}

// covers reports whether live holds every value desired sets. Maps may hold more keys; lists must have
// the same length and cover element by element; numbers compare by value. A desired null or empty value
// is covered by an absent one (the API server drops empty fields). At the top level apiVersion and kind
// are not compared (typed cached objects lack them) nor is status.
func covers(live, desired any, top bool) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live == nil && emptyValue(d)
		}
		for k, dv := range d {
			if top && (k == "apiVersion" || k == "kind" || k == "status") {
				continue
			}
			lv, found := l[k]
			if !found || lv == nil {
				if emptyValue(dv) {
					continue
				}
				return false
			}
			if !covers(lv, dv, false) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return live == nil && len(d) == 0
		}
		if len(l) != len(d) {
			return false
		}
		for i := range d {
			if !covers(l[i], d[i], false) {
				return false
			}
		}
		return true
	case nil:
		return true
	}
	if dn, ok := number(desired); ok {
		ln, ok := number(live)
		return ok && ln == dn
	}
	return live == desired
}

// emptyValue reports whether v is null, or an empty map, list or string (what the API server omits when
// it stores an object). false and 0 are values: a live object without them differs.
func emptyValue(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range t {
			if !emptyValue(x) {
				return false
			}
		}
		return true
	case []any:
		return len(t) == 0
	case string:
		return t == ""
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}
