package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// Deps reads the objects that reconciles depend on (the providers in the dependency graph: the runtime
// an instance runs on, the definition it runs), for any number of concurrent reconciles, and says
// whether each may be built upon. Controllers keep one per dependency kind, so that their own code
// holds domain logic only. The zero value (with Resource set) is ready to use.
type Deps[S any, T any] struct {
	// Resource reads the dependency's kind. It needs a controller token when the controller uses the
	// dependency's write-only fields (a runtime's kubeconfig). Required.
	Resource *client.Resource[S, T]
	// After is how soon a reconcile waiting on a dependency that does not exist looks again (default
	// 5s): it may be created next, and a create notifies nobody. A dependency that exists and is not
	// Ready is not looked at on a timer: its status changes (phase, observed generation) notify the
	// objects that reference it and its owners (Meta.Owners), which ends their wait (WaitError.After < 0).
	After time.Duration

	reads sharedReads[*api.Object[S, T]]
}

// Get returns the dependency with that id. Concurrent reconciles share one read, but never one that
// began before their own notification (see StartedAt), so the result reflects every write committed
// before it.
func (d *Deps[S, T]) Get(ctx context.Context, id string) (*api.Object[S, T], error) {
	return d.reads.get(ctx, id, StartedAt(ctx), func(ctx context.Context) (*api.Object[S, T], error) {
		return d.Resource.Get(ctx, id)
	})
}

// RequireReady returns the dependency when it is reconciled (Ready at its generation). Otherwise it
// returns a *WaitError that names it, its state and, through the runtime, how long the consumer has
// waited (e.g. `waiting for kubernetes_runtime "us-east" (Reconciling, 40s)`), or, when the dependency
// went Failed, a Terminal error with its reason: a Failed provider fails its consumers instead of
// leaving them waiting in silence. Its recovery notifies them again. A dependency that does not exist
// is waited on too: it may be created next.
func (d *Deps[S, T]) RequireReady(ctx context.Context, id string) (*api.Object[S, T], error) {
	kind := d.Resource.Kind()
	obj, err := d.Get(ctx, id)
	if api.IsNotFound(err) {
		return nil, Wait(fmt.Sprintf("%s %q", kind, id), "NotFound", reasonOf(kind, "NotFound"), d.after())
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", kind, err)
	}
	st := client.CommonStatus(obj)
	switch {
	case api.Reconciled(obj.Generation, st):
		return obj, nil
	case st.Phase == api.PhaseFailed && st.ObservedGeneration == obj.Generation:
		return obj, Terminal(fmt.Errorf("%s %q failed: %s", kind, obj.Name, st.Message))
	}
	state := string(st.Phase)
	if state == "" {
		state = string(api.PhasePending)
	}
	if st.Message != "" {
		state += ": " + st.Message
	}
	return obj, Wait(fmt.Sprintf("%s %q", kind, obj.Name), state, reasonOf(kind, "NotReady"), OnNotification)
}

func (d *Deps[S, T]) after() time.Duration {
	if d.After > 0 {
		return d.After
	}
	return 5 * time.Second
}

// reasonOf makes a CamelCase reason from a kind and a suffix: ("kubernetes_runtime", "NotReady") is
// "KubernetesRuntimeNotReady".
func reasonOf(kind, suffix string) string {
	var b strings.Builder
	for _, part := range strings.Split(kind, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String() + suffix
}

// PollAfter is how soon work that waits on the compute space (a rollout, a cluster coming up) is looked
// at again: first after base, then after half the time it has been waiting, at most limit. Events that
// end the wait (an agent's notification, a dependency's status change) requeue it at once; the poll is
// the safety net, and slowing it with age keeps thousands of long waits from crowding fresh work.
func PollAfter(base, limit time.Duration, since time.Time) time.Duration {
	d := base
	if !since.IsZero() {
		d = max(d, min(time.Since(since)/2, limit))
	}
	return d
}
