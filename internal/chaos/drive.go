package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// maxLive bounds the live instances of one writer.
const maxLive = 10

// opTimeout bounds one write with all its retries; a write that cannot be acknowledged this long fails
// the run.
const opTimeout = 3 * time.Minute

// model is what the acknowledged writes say the world must be. Each writer owns its objects, so the
// last acknowledged write of an object is its final state.
type model struct {
	mu        sync.Mutex
	defs      map[string]*defModel  // by id
	instances map[string]*instModel // by id
}

type defModel struct {
	id, name string
	image    string
	deleted  bool
	scratch  bool // has no instances; may be deleted
}

type instModel struct {
	id, name string
	defID    string
	replicas int32
	deleted  bool
}

// writer drives its share of the writes through the client, retrying as a user would: on a transport
// error or a 5xx it tries again; a create whose name is taken was its own earlier attempt (it is the
// only writer of its names), and an update re-reads the object first.
type writer struct {
	n       int
	runtime string // the kubeconfig runtime every instance runs on
	cl      *client.Client
	rng     *rand.Rand
	m       *model
	retries *atomic.Int64
	acked   *atomic.Int64
	ops     map[string]int
	defs    []*defModel // everyone's non-scratch definitions, to instantiate
	mine    []*defModel // this writer's definitions, to update or (scratch ones) delete
	live    []*instModel
	seq     int
	last    time.Time
	pace    <-chan time.Time // one tick per write, shared by all writers
}

func (w *writer) run(ctx context.Context, writes int) error {
	for range writes {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.pace:
		}
		var err error
		switch r := w.rng.Float64(); {
		// Creates and deletes balance out around maxLive instances per writer, to keep the cluster small.
		case len(w.live) < 3 || (r < 0.3 && len(w.live) < maxLive):
			err = w.createInstance(ctx)
		case r < 0.3 || r >= 0.6 && r < 0.8:
			err = w.deleteInstance(ctx)
		case r < 0.6:
			err = w.updateInstance(ctx)
		case r < 0.88:
			err = w.updateDefinition(ctx)
		case r < 0.94 || !w.hasScratch():
			err = w.createDefinition(ctx, true)
		default:
			err = w.deleteScratch(ctx)
		}
		if err != nil {
			return err
		}
		w.acked.Add(1)
		w.last = time.Now()
	}
	return nil
}

// retry runs op until it succeeds, fails for good, or opTimeout passes.
func (w *writer) retry(ctx context.Context, what string, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		err := op(actx)
		acancel()
		if err == nil {
			return nil
		}
		if permanent(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		w.retries.Add(1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not acknowledged within %s: %w", what, opTimeout, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// permanent reports errors a retry cannot fix: bad input, auth.
func permanent(err error) bool {
	return api.IsInvalid(err) || api.IsUnauthorized(err) || api.IsForbidden(err)
}

func ptr[T any](v T) *T { return &v }

func (w *writer) name(prefix string) string {
	w.seq++
	return fmt.Sprintf("%s-%d-%d", prefix, w.n, w.seq)
}

// createOrGet creates obj and returns its id; when its name is taken, an earlier attempt of this write went
// through (its answer was lost), and the object of that name is the one written.
func createOrGet[S, T any](ctx context.Context, r *client.Resource[S, T], obj *api.Object[S, T]) (string, error) {
	got, err := r.Create(ctx, obj)
	if api.IsConflict(err) {
		got, err = r.GetByName(ctx, obj.Name)
	}
	if err != nil {
		return "", err
	}
	return got.ID, nil
}

func (w *writer) createDefinition(ctx context.Context, scratch bool) error {
	d := &defModel{name: w.name("def"), image: fmt.Sprintf("nginx:1.%d", w.rng.IntN(20)), scratch: scratch}
	err := w.retry(ctx, "create definition "+d.name, func(ctx context.Context) error {
		var err error
		d.id, err = createOrGet(ctx, w.cl.WorkloadDefinitions(), &api.WorkloadDefinition{Meta: api.Meta{Name: d.name},
			Spec: api.WorkloadDefinitionSpec{Replicas: ptr(int32(1)), Containers: []api.Container{{Name: "web", Image: d.image}}}})
		return err
	})
	if err != nil {
		return err
	}
	w.m.mu.Lock()
	w.m.defs[d.id] = d
	w.m.mu.Unlock()
	w.mine = append(w.mine, d)
	w.ops["create definition"]++
	return nil
}

func (w *writer) hasScratch() bool {
	for _, d := range w.mine {
		if d.scratch && !d.deleted {
			return true
		}
	}
	return false
}

func (w *writer) deleteScratch(ctx context.Context) error {
	for _, d := range w.mine {
		if !d.scratch || d.deleted {
			continue
		}
		err := w.retry(ctx, "delete definition "+d.name, func(ctx context.Context) error {
			err := w.cl.WorkloadDefinitions().Delete(ctx, d.id, client.DeleteOptions{})
			if api.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		w.m.mu.Lock()
		d.deleted = true
		w.m.mu.Unlock()
		w.ops["delete definition"]++
		return nil
	}
	return errors.New("no scratch definition to delete")
}

func (w *writer) updateDefinition(ctx context.Context) error {
	var own []*defModel
	for _, d := range w.mine {
		if !d.deleted && !d.scratch {
			own = append(own, d)
		}
	}
	if len(own) == 0 {
		return w.updateInstance(ctx)
	}
	d := own[w.rng.IntN(len(own))]
	image := fmt.Sprintf("nginx:1.%d", 20+w.rng.IntN(20))
	if image == d.image {
		image += "-b"
	}
	err := w.retry(ctx, "update definition "+d.name, func(ctx context.Context) error {
		cur, err := w.cl.WorkloadDefinitions().Get(ctx, d.id)
		if err != nil {
			return err
		}
		if cur.Spec.Containers[0].Image == image {
			return nil // an earlier attempt went through
		}
		cur.Spec.Containers[0].Image = image
		_, err = w.cl.WorkloadDefinitions().Update(ctx, cur)
		return err
	})
	if err != nil {
		return err
	}
	w.m.mu.Lock()
	d.image = image
	w.m.mu.Unlock()
	w.ops["update definition"]++
	return nil
}

func (w *writer) createInstance(ctx context.Context) error {
	def := w.defs[w.rng.IntN(len(w.defs))]
	in := &instModel{name: w.name("web"), defID: def.id, replicas: int32(1 + w.rng.IntN(2))}
	err := w.retry(ctx, "create instance "+in.name, func(ctx context.Context) error {
		var err error
		in.id, err = createOrGet(ctx, w.cl.WorkloadInstances(), &api.WorkloadInstance{Meta: api.Meta{Name: in.name},
			Spec: api.WorkloadInstanceSpec{DefinitionID: in.defID, RuntimeID: w.runtime, Replicas: ptr(in.replicas)}})
		return err
	})
	if err != nil {
		return err
	}
	w.m.mu.Lock()
	w.m.instances[in.id] = in
	w.m.mu.Unlock()
	w.live = append(w.live, in)
	w.ops["create instance"]++
	return nil
}

func (w *writer) updateInstance(ctx context.Context) error {
	in := w.live[w.rng.IntN(len(w.live))]
	replicas := 1 + (in.replicas % 3) // 1 → 2 → 3 → 1
	err := w.retry(ctx, "update instance "+in.name, func(ctx context.Context) error {
		cur, err := w.cl.WorkloadInstances().Get(ctx, in.id)
		if err != nil {
			return err
		}
		if cur.Spec.Replicas != nil && *cur.Spec.Replicas == replicas {
			return nil
		}
		cur.Spec.Replicas = ptr(replicas)
		_, err = w.cl.WorkloadInstances().Update(ctx, cur)
		return err
	})
	if err != nil {
		return err
	}
	w.m.mu.Lock()
	in.replicas = replicas
	w.m.mu.Unlock()
	w.ops["update instance"]++
	return nil
}

func (w *writer) deleteInstance(ctx context.Context) error {
	i := w.rng.IntN(len(w.live))
	in := w.live[i]
	err := w.retry(ctx, "delete instance "+in.name, func(ctx context.Context) error {
		err := w.cl.WorkloadInstances().Delete(ctx, in.id, client.DeleteOptions{})
		if api.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	w.m.mu.Lock()
	in.deleted = true
	w.m.mu.Unlock()
	w.live = append(w.live[:i], w.live[i+1:]...)
	w.ops["delete instance"]++
	return nil
}
