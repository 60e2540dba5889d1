package kube

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Creating an object that is not there, in one request.
//
// An object the watch cache does not hold as QleetOS's may exist without QleetOS's ownership, and then
// it must be left alone. Apply used to read every such object first (a GET, then the apply): for a new
// workload that is a GET per object, and under the per-cluster client-side rate limit a hundred
// workloads applied at once spent a third of their requests on GETs that answered 404 (make bench,
// apply section at N=100). Now the first request is the apply itself, made conditional on the object
// being absent: it carries a metadata.resourceVersion that no object can have (absentVersion). The API
// server ignores the resource version of an object it creates, so an absent object is created as the
// apply asks; for an existing object the resource version is a precondition, which fails (409
// Conflict) without writing anything, and only then is the object read and its ownership checked, as
// before. (A metadata.uid would not do: the API server refuses an apply that names a uid when no
// object exists.)

// absentVersion is the resource version createIfAbsent's apply carries: the largest etcd revision,
// which a store would reach only after 2^63-1 writes, so that no existing object matches it.
const absentVersion = "9223372036854775807"

// errExists says createIfAbsent found the object present, and wrote nothing.
var errExists = errors.New("object exists")

// createIfAbsent applies o only if no object of its name exists, and answers errExists (having written
// nothing) when one does.
func createIfAbsent(ctx context.Context, ri dynamic.ResourceInterface, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u := o.DeepCopy()
	u.SetResourceVersion(absentVersion)
	applied, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if apierrors.IsConflict(err) {
		return nil, errExists
	}
	return applied, err
}

// presentMaxRefs bounds the refs a cluster remembers as present (see present); past it the memory
// starts again, which costs at most one refused apply per ref.
const presentMaxRefs = 8192

// presentRefs remembers, per cluster, the objects that createIfAbsent found present without the watch
// cache holding them as QleetOS's (an existing namespace an instance uses, a foreign object, or any
// object while the cache cannot answer for its kind), so that their next apply reads them first instead
// of being refused again. It is only a hint: an object that has gone since is read (404) and applied, as
// before.
type presentRefs struct {
	mu   sync.Mutex
	refs map[string]bool
}

func (p *presentRefs) has(ref AppliedRef) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refs[ref.key()]
}

func (p *presentRefs) drop(ref AppliedRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.refs, ref.key())
}

func (p *presentRefs) add(ref AppliedRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refs == nil || len(p.refs) >= presentMaxRefs {
		p.refs = map[string]bool{}
	}
	p.refs[ref.key()] = true
}
