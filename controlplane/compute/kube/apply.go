package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Ownership labels and the field manager QleetOS applies with.
const (
	// FieldManager is the server-side apply field manager of every object QleetOS applies.
	FieldManager = "qleet"
	// LabelManagedBy marks objects QleetOS manages; its value is ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "qleet"
	// LabelInstanceID carries the id of the owner (a workload instance) of an applied object.
	LabelInstanceID = "qleetos.io/instance-id"
	// LabelOwnerKind carries the kind of the owner (e.g. "workload_instance", "support_service") when
	// the owner says it (Owner.Kind), so that a watch event about the object enqueues exactly its owner.
	LabelOwnerKind = "qleetos.io/owner-kind"
	// AnnotationAppliedHash holds a hash of the desired object as last applied. When the live object
	// still carries the hash of the desired one, any change a re-apply makes is drift.
	AnnotationAppliedHash = "qleetos.io/applied-hash"
	// ManagedSelector selects every object QleetOS manages.
	ManagedSelector = LabelManagedBy + "=" + ManagedByValue
)

// Owner identifies who owns a set of applied objects.
type Owner struct {
	// InstanceID is the owner's id, written to LabelInstanceID. Required.
	InstanceID string
	// Kind is the owner's kind (e.g. "workload_instance"), written to LabelOwnerKind on each applied
	// object (not on its pod template, which would roll its pods): a change to the object seen by the
	// cluster's watch then enqueues the owner (ConnectorConfig.OnOwnedChange). Optional.
	Kind string
	// Namespace is given to namespaced objects that name none.
	Namespace string
	// Previous lists what the owner applied last time (e.g. from its status). Apply looks for drift in
	// these objects only (reading each before applying it): one gone missing, or one changed although
	// its desired state did not. Prune and DeleteAll also search their kinds.
	Previous []AppliedRef
	// Adopt lets Apply take over objects that exist in the cluster without QleetOS's ownership labels.
	// Without it such an object is never modified: Apply fails with an *OwnershipError naming it. An
	// object owned by another QleetOS owner is never taken, adopt or not.
	Adopt bool
	// ClusterScoped lets Apply write cluster-scoped objects (other than the owner's own Namespace) and
	// objects in namespaces other than Namespace. Without it such objects are invalid.
	ClusterScoped bool
}

// OwnershipError says that an object Apply would write exists in the cluster and is not the owner's:
// created by someone else (Owner.Adopt takes those over), or owned by another QleetOS owner (never
// taken). Nothing was written to it. Retrying cannot help until the object or the spec changes.
type OwnershipError struct {
	// Ref names the object.
	Ref AppliedRef
	// OwnedBy is the id of the QleetOS owner that holds the object; empty when QleetOS did not create it.
	OwnedBy string
}

func (e *OwnershipError) Error() string {
	if e.OwnedBy != "" {
		return fmt.Sprintf("%s already exists and belongs to another QleetOS owner (%s); it was left unchanged", e.Ref, e.OwnedBy)
	}
	return fmt.Sprintf("%s already exists and was not created by QleetOS; it was left unchanged (set adopt = true on the instance to take it over)", e.Ref)
}

// IsOwnershipConflict reports whether err is (or wraps) an *OwnershipError.
func IsOwnershipConflict(err error) bool {
	var oe *OwnershipError
	return errors.As(err, &oe)
}

// ownerOf returns the QleetOS owner id recorded on an object's labels, and whether QleetOS manages it.
func ownerOf(labels map[string]string) (string, bool) {
	if labels[LabelManagedBy] != ManagedByValue {
		return "", false
	}
	return labels[LabelInstanceID], true
}

// InstanceSelector selects the objects owned by o.
func (o Owner) InstanceSelector() string {
	return ManagedSelector + "," + LabelInstanceID + "=" + o.InstanceID
}

// AppliedRef names one applied object.
type AppliedRef struct {
	// APIVersion is e.g. "apps/v1".
	APIVersion string
	// Kind is e.g. "Deployment".
	Kind string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	// Name is the object's name.
	Name string
	// Drift, set by Apply, says what the apply put back: the object had been deleted, or edited away
	// from what was last applied. Empty when nothing was corrected.
	Drift string
	// Generation is the object's metadata.generation as Apply or InSync saw it (0 when unknown). Health
	// reads a cached object only once the cache has caught up with it.
	Generation int64
}

// String returns "Kind/name" or "Kind/namespace/name".
func (r AppliedRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// GroupKind returns the ref's group and kind.
func (r AppliedRef) GroupKind() schema.GroupKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind).GroupKind()
}

// key identifies the object regardless of version and Drift.
func (r AppliedRef) key() string {
	gk := r.GroupKind()
	return gk.Group + "/" + gk.Kind + "/" + r.Namespace + "/" + r.Name
}

// RefOf returns the ref of an object.
func RefOf(u *unstructured.Unstructured) AppliedRef {
	return AppliedRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// ApplyError is an error applying one object. Invalid says the cluster rejected the object itself (an
// unknown kind, a schema violation), so retrying the same object cannot help.
type ApplyError struct {
	// Ref names the object.
	Ref AppliedRef
	// Invalid is true when retrying cannot succeed until the object changes.
	Invalid bool
	// Err is the cause.
	Err error
}

func (e *ApplyError) Error() string {
	name := e.Ref.Kind + "/" + e.Ref.Name
	return name + ": " + e.Err.Error()
}

func (e *ApplyError) Unwrap() error { return e.Err }

// IsInvalid reports whether err says the cluster rejected an object as invalid, so that retrying the same
// objects cannot succeed: no such kind, 400 Bad Request, 422 Invalid, and similar 4xx answers.
func IsInvalid(err error) bool {
	var ae *ApplyError
	if errors.As(err, &ae) {
		return ae.Invalid
	}
	return invalidCause(err)
}

func invalidCause(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) ||
		apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// applyOrder ranks kinds so that what others depend on is applied first (after Helm's install order).
// Namespaces come first and CustomResourceDefinitions second; unknown kinds (custom resources) last.
var applyOrder = func() map[string]int {
	kinds := []string{
		"Namespace", "CustomResourceDefinition", "NetworkPolicy", "ResourceQuota", "LimitRange",
		"PodDisruptionBudget", "ServiceAccount", "Secret", "ConfigMap", "StorageClass", "PersistentVolume",
		"PersistentVolumeClaim", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
		"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
		"StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
	}
	m := make(map[string]int, len(kinds))
	for i, k := range kinds {
		m[k] = i
	}
	return m
}()

func orderOf(kind string) int {
	if i, ok := applyOrder[kind]; ok {
		return i
	}
	return len(applyOrder)
}

// SortForApply orders objects for applying: namespaces, then CRDs, then the rest in dependency order.
// The sort is stable, so objects of one kind keep their order.
func SortForApply(objs []*unstructured.Unstructured) {
	sort.SliceStable(objs, func(i, j int) bool { return orderOf(objs[i].GetKind()) < orderOf(objs[j].GetKind()) })
}

// crdEstablishTimeout bounds the wait for applied CRDs to be served.
const crdEstablishTimeout = 30 * time.Second

// Apply server-side applies objs to the cluster with field manager "qleet" and Force, labelled for
// owner (on the object and on any pod template), in dependency order: namespaces, then CRDs (after which
// it waits for them to be established and resets the REST mapper), then the rest. It stops at the first
// error, an *ApplyError naming the object ("Widget/foo: no matches for kind ..."); IsInvalid tells
// whether retrying can help. It returns the applied objects in apply order, each with what it put back
// when the live object had drifted (see AppliedRef.Drift). objs are not modified.
//
// At most the cluster's ApplyConcurrency applies run at once; Apply waits for a slot (TryApply does not).
func Apply(ctx context.Context, cl *Cluster, owner Owner, objs []*unstructured.Unstructured) ([]AppliedRef, error) {
	return apply(ctx, cl, owner, objs, true)
}

// ErrClusterBusy says that the cluster already has its ApplyConcurrency applies in flight.
var ErrClusterBusy = errors.New("the cluster has its most applies in flight")

// TryApply is Apply, except that it answers ErrClusterBusy at once, having applied nothing, when the
// cluster has ApplyConcurrency applies in flight: a reconcile can then let its worker go, rather than
// hold it while a slow API server works through the applies before it.
func TryApply(ctx context.Context, cl *Cluster, owner Owner, objs []*unstructured.Unstructured) ([]AppliedRef, error) {
	return apply(ctx, cl, owner, objs, false)
}

func apply(ctx context.Context, cl *Cluster, owner Owner, objs []*unstructured.Unstructured, wait bool) ([]AppliedRef, error) {
	if owner.InstanceID == "" {
		return nil, errors.New("apply: owner has no instance id")
	}
	release, err := cl.applySlot(ctx, wait)
	if err != nil {
		return nil, err
	}
	defer release()
	prepared := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "" || o.GetAPIVersion() == "" || o.GetName() == "" {
			return nil, &ApplyError{Ref: RefOf(o), Invalid: true, Err: errors.New("object needs apiVersion, kind and metadata.name")}
		}
		prepared = append(prepared, prepare(o, owner))
	}
	SortForApply(prepared)
	previous := make(map[string]bool, len(owner.Previous))
	for _, r := range owner.Previous {
		previous[r.key()] = true
	}

	var crds []string
	// fresh holds the kinds of the CRDs this apply wrote: a watch of such a kind may fail its first
	// list while the API server starts serving it, and then retries after a second, so their objects
	// are not looked up through a wait for the cache (they are created, or read, directly).
	fresh := map[schema.GroupKind]bool{}
	refs := make([]AppliedRef, 0, len(prepared))
	for _, o := range prepared {
		if len(crds) > 0 && o.GetKind() != "CustomResourceDefinition" {
			if err := waitCRDsEstablished(ctx, cl, crds); err != nil {
				return refs, err
			}
			crds = nil
			cl.Mapper.Reset()
		}
		ref, err := applyOne(ctx, cl, owner, o, previous, fresh[o.GroupVersionKind().GroupKind()])
		if err != nil {
			return refs, err
		}
		refs = append(refs, ref)
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o.GetName())
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			fresh[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
	if len(crds) > 0 {
		if err := waitCRDsEstablished(ctx, cl, crds); err != nil {
			return refs, err
		}
		cl.Mapper.Reset()
	}
	return refs, nil
}

// DefaultApplyConcurrency is the default of Cluster.ApplyConcurrency: enough applies in flight for a
// busy cluster's API server (one that answers an apply in about a second under load, as kubesim does
// on a shared machine during make bench's churn), few enough not to swamp it.
const DefaultApplyConcurrency = 32

// applySlot takes one of the cluster's ApplyConcurrency slots, waiting for one when wait is set, else
// answering ErrClusterBusy, and returns its release.
func (cl *Cluster) applySlot(ctx context.Context, wait bool) (func(), error) {
	cl.slotsOnce.Do(func() {
		n := cl.ApplyConcurrency
		if n <= 0 {
			n = DefaultApplyConcurrency
		}
		cl.applySlots = make(chan struct{}, n)
	})
	release := func() { <-cl.applySlots }
	select {
	case cl.applySlots <- struct{}{}:
		return release, nil
	default:
		if !wait {
			return nil, ErrClusterBusy
		}
	}
	select {
	case cl.applySlots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("apply: waiting for a slot: %w", ctx.Err())
	}
}

// prepare copies o, adds the ownership labels to it and to its pod template, and records the hash of
// the result in AnnotationAppliedHash.
func prepare(o *unstructured.Unstructured, owner Owner) *unstructured.Unstructured {
	u := o.DeepCopy()
	unstructured.RemoveNestedField(u.Object, "status")
	top := withOwnerLabels(u.GetLabels(), owner)
	if owner.Kind != "" {
		top[LabelOwnerKind] = owner.Kind
	}
	u.SetLabels(top)
	for _, path := range podTemplatePaths(u.GetKind()) {
		labelsPath := append(append([]string{}, path...), "metadata", "labels")
		if _, found, _ := unstructured.NestedMap(u.Object, path...); !found {
			continue
		}
		tl, _, _ := unstructured.NestedStringMap(u.Object, labelsPath...)
		_ = unstructured.SetNestedStringMap(u.Object, withOwnerLabels(tl, owner), labelsPath...)
	}
	ann := u.GetAnnotations()
	delete(ann, AnnotationAppliedHash)
	if len(ann) == 0 {
		ann = nil
	}
	u.SetAnnotations(ann)
	data, _ := json.Marshal(u.Object) // maps marshal with sorted keys, so the hash is stable
	sum := sha256.Sum256(data)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = hex.EncodeToString(sum[:12])
	u.SetAnnotations(ann)
	return u
}

func withOwnerLabels(l map[string]string, owner Owner) map[string]string {
	out := make(map[string]string, len(l)+2)
	for k, v := range l {
		out[k] = v
	}
	out[LabelManagedBy] = ManagedByValue
	out[LabelInstanceID] = owner.InstanceID
	return out
}

// podTemplatePaths returns where a kind keeps its pod template.
func podTemplatePaths(kind string) [][]string {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController":
		return [][]string{{"spec", "template"}}
	case "CronJob":
		return [][]string{{"spec", "jobTemplate", "spec", "template"}}
	}
	return nil
}

// mapping returns the REST mapping of gvk, resetting the mapper once when the kind is unknown (it may
// have just been created).
func mapping(cl *Cluster, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		cl.Mapper.Reset()
		m, err = cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// resourceFor returns the dynamic client for an object's kind and namespace, and whether the kind is
// namespaced.
func resourceFor(cl *Cluster, gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, bool, error) {
	m, err := mapping(cl, gvk)
	if err != nil {
		return nil, false, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return cl.Dynamic.Resource(m.Resource).Namespace(namespace), true, nil
	}
	return cl.Dynamic.Resource(m.Resource), false, nil
}

// applyOne applies o. With freshKind (its CRD was just written) it does not wait for the cache to
// watch the kind.
func applyOne(ctx context.Context, cl *Cluster, owner Owner, o *unstructured.Unstructured, previous map[string]bool, freshKind bool) (AppliedRef, error) {
	gvk := o.GroupVersionKind()
	m, err := mapping(cl, gvk)
	if err != nil {
		return AppliedRef{}, &ApplyError{Ref: RefOf(o), Invalid: meta.IsNoMatchError(err), Err: err}
	}
	if err := placeNamespace(o, m, owner); err != nil {
		return AppliedRef{}, err
	}
	var ri dynamic.ResourceInterface = cl.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = cl.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	ref := RefOf(o)

	// The cache holds only objects QleetOS manages. One it holds for another owner is not this
	// owner's to write, except the instance's own namespace, which instances may share.
	var cached map[string]any
	if freshKind {
		cached, _ = cl.Cache().Peek(ref)
	} else {
		cached, _ = cl.Cache().Get(ctx, ref)
	}
	if cached != nil {
		cu := &unstructured.Unstructured{Object: cached}
		if id, _ := ownerOf(cu.GetLabels()); id != owner.InstanceID {
			if ownNamespace(o, owner) {
				ref.Generation = cu.GetGeneration()
				return ref, nil
			}
			return ref, &OwnershipError{Ref: ref, OwnedBy: id}
		}
		// An object the cache shows as this apply would leave it is not applied again.
		if objectInSync(cached, o) {
			ref.Generation = cu.GetGeneration()
			return ref, nil
		}
	}
	// Anything the cache does not show as ours may exist without QleetOS's ownership, and then it is
	// left alone unless the owner adopts it. It is first created if it is absent, in one request that
	// cannot touch an existing object (createIfAbsent); one that exists is read, and its ownership
	// checked. Objects applied before are also compared with what they were, to report drift.
	var live *unstructured.Unstructured
	wasApplied := previous[ref.key()]
	if cached == nil && !cl.present.has(ref) {
		created, err := createIfAbsent(ctx, ri, o)
		switch {
		case err == nil:
			ref.Generation = created.GetGeneration()
			if wasApplied {
				ref.Drift = "recreated (it had been deleted)"
			}
			return ref, nil
		case !errors.Is(err, errExists):
			return ref, &ApplyError{Ref: ref, Invalid: invalidCause(err), Err: err}
		}
		cl.present.add(ref)
	}
	if cached != nil {
		live = &unstructured.Unstructured{Object: cached}
		live.SetAPIVersion(o.GetAPIVersion()) // typed cached objects carry no type meta
		live.SetKind(o.GetKind())
	} else {
		var err error
		live, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			live, err = nil, nil
			cl.present.drop(ref)
		}
		if err != nil {
			return ref, &ApplyError{Ref: ref, Err: fmt.Errorf("read live object: %w", err)}
		}
		if live != nil {
			id, managed := ownerOf(live.GetLabels())
			switch {
			case managed && id == owner.InstanceID:
			case ownNamespace(o, owner) && (managed || !owner.Adopt):
				// An existing namespace is used as it is: not labelled, so never pruned or deleted.
				ref.Generation = live.GetGeneration()
				return ref, nil
			case managed:
				return ref, &OwnershipError{Ref: ref, OwnedBy: id}
			case !owner.Adopt:
				return ref, &OwnershipError{Ref: ref}
			}
		}
	}
	applied, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return ref, &ApplyError{Ref: ref, Invalid: invalidCause(err), Err: err}
	}
	ref.Generation = applied.GetGeneration()
	switch {
	case !wasApplied:
	case live == nil:
		ref.Drift = "recreated (it had been deleted)"
	case live.GetAnnotations()[AnnotationAppliedHash] == o.GetAnnotations()[AnnotationAppliedHash] &&
		live.GetResourceVersion() != applied.GetResourceVersion():
		if diffs := diffPaths(editable(live.Object), editable(applied.Object), "", nil); len(diffs) > 0 {
			ref.Drift = "restored " + summarize(diffs)
		}
	}
	return ref, nil
}

// ownNamespace reports whether o is the owner's own namespace (the one its namespaced objects go to).
func ownNamespace(o *unstructured.Unstructured, owner Owner) bool {
	return o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" && o.GetName() == owner.Namespace
}

// placeNamespace gives a namespaced object that names none the owner's namespace, and drops the
// namespace of a cluster-scoped one.
func placeNamespace(o *unstructured.Unstructured, m *meta.RESTMapping, owner Owner) error {
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		o.SetNamespace("")
		if !owner.ClusterScoped && !ownNamespace(o, owner) {
			return &ApplyError{Ref: RefOf(o), Invalid: true, Err: errors.New("is cluster-scoped: set cluster_scoped = true on the workload definition (admin only) to allow it")}
		}
		return nil
	}
	if o.GetNamespace() == "" {
		o.SetNamespace(owner.Namespace)
	}
	if o.GetNamespace() == "" {
		return &ApplyError{Ref: RefOf(o), Invalid: true, Err: errors.New("namespaced object has no namespace")}
	}
	if !owner.ClusterScoped && owner.Namespace != "" && o.GetNamespace() != owner.Namespace {
		return &ApplyError{Ref: RefOf(o), Invalid: true, Err: fmt.Errorf("is in namespace %q, not the instance's %q: set cluster_scoped = true on the workload definition (admin only) to allow it", o.GetNamespace(), owner.Namespace)}
	}
	return nil
}

// editable strips what changes without anyone editing the object: status, and bookkeeping metadata.
func editable(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			switch k {
			case "resourceVersion", "managedFields", "generation":
			case "annotations":
				ann, _ := v.(map[string]any)
				a := make(map[string]any, len(ann))
				for ak, av := range ann {
					if ak != "deployment.kubernetes.io/revision" {
						a[ak] = av
					}
				}
				m[k] = a
			default:
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}

// diff is one field that differs between the live and the applied object.
type diff struct {
	path     string
	from, to any
}

// diffPaths lists the leaf paths at which a and b differ, in a stable order.
func diffPaths(a, b any, path string, out []diff) []diff {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out = diffPaths(am[k], bm[k], p, out)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			out = diffPaths(al[i], bl[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		out = append(out, diff{path: path, from: a, to: b})
	}
	return out
}

func summarize(diffs []diff) string {
	const maxShown = 3
	parts := make([]string, 0, maxShown+1)
	for i, d := range diffs {
		if i == maxShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(diffs)-maxShown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s -> %s)", d.path, short(d.from), short(d.to)))
	}
	return strings.Join(parts, ", ")
}

func short(v any) string {
	if v == nil {
		return "unset"
	}
	var s string
	switch t := v.(type) {
	case string:
		s = fmt.Sprintf("%q", t)
	case map[string]any, []any:
		data, _ := json.Marshal(t)
		s = string(data)
	default:
		s = fmt.Sprint(t)
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitCRDsEstablished waits until every named CRD reports Established (at most crdEstablishTimeout).
func waitCRDsEstablished(ctx context.Context, cl *Cluster, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	for _, name := range names {
		for {
			u, err := cl.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err == nil && conditionTrue(u, "Established") {
				break
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("CustomResourceDefinition/%s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CustomResourceDefinition/%s: not established: %w", name, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// conditionTrue reports whether status.conditions holds type t with status "True".
func conditionTrue(u *unstructured.Unstructured, t string) bool {
	c := findCondition(u, t)
	return c != nil && c["status"] == "True"
}

func findCondition(u *unstructured.Unstructured, t string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m
		}
	}
	return nil
}

// RefsOf names the applied objects a status lists, for a later prune or delete.
func RefsOf(objs []api.AppliedObject) []AppliedRef {
	out := make([]AppliedRef, len(objs))
	for i, o := range objs {
		out[i] = AppliedRef{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
	}
	return out
}
