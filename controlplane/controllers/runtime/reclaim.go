package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// ReasonReclaimed is the event reason of a runtime removed because nothing was placed on it for its
// profile's reclaim_after.
const ReasonReclaimed = "Reclaimed"

// usage counts the instances placed on the runtime and, for a runtime provisioned from a profile with
// reclaim_after, deletes it once nothing has been placed there for that long. A runtime with instances
// placed on it is looked at again every recheck, so that its failure is seen soon. It never deletes a runtime
// while anything is placed there (the API refuses, too: placements reference their runtime) nor one a
// user declared. It returns how soon to look again.
func (r *Reconciler) usage(ctx context.Context, rt *client.KubernetesRuntime) (time.Duration, error) {
	n := 0
	for _, err := range r.Client.WorkloadInstances().All(ctx, client.ListOptions{References: rt.ID}) {
		if err != nil {
			return 0, fmt.Errorf("list instances placed on the runtime: %w", err)
		}
		n++
	}
	rt.Status.Placements = n
	if n > 0 {
		rt.Status.IdleSince = nil
	} else if rt.Status.IdleSince == nil {
		now := time.Now().UTC().Truncate(time.Second)
		rt.Status.IdleSince = &now
	}
	after, err := r.reclaimAfter(ctx, rt)
	if err != nil {
		return 0, err
	}
	if after == 0 {
		if n > 0 {
			// Instances placed here fail over when it stops answering: look at it regularly, not only
			// at the drift interval, so that failover starts within a recheck of the failure.
			return r.recheck(), nil
		}
		return 0, nil
	}
	if n > 0 {
		return min(after, r.recheck()), nil // its instances may move off without telling it
	}
	idle := time.Since(*rt.Status.IdleSince)
	if idle < after {
		return min(after-idle, r.recheck()), nil
	}
	err = r.Client.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{})
	if client.IsConflict(err) {
		return r.recheck(), nil // something was placed on it meanwhile
	}
	if err != nil {
		return 0, fmt.Errorf("reclaim: %w", err)
	}
	reconcile.Eventf(ctx, client.EventNormal, ReasonReclaimed, "deleted: nothing has been placed on it since %s, longer than its runtime_profile's reclaim_after (%s)",
		rt.Status.IdleSince.Format(time.RFC3339), after)
	return 0, nil
}

// reclaimAfter is the reclaim_after of the profile that owns the runtime; zero when none does, or when
// the profile never reclaims.
func (r *Reconciler) reclaimAfter(ctx context.Context, rt *client.KubernetesRuntime) (time.Duration, error) {
	for _, o := range rt.Owners {
		if o.Kind != client.KindRuntimeProfile {
			continue
		}
		p, err := r.Client.RuntimeProfiles().Get(ctx, o.ID)
		if client.IsNotFound(err) {
			return 0, nil // the profile is gone: garbage collection takes the runtime
		}
		if err != nil {
			return 0, fmt.Errorf("get runtime_profile %q: %w", o.Name, err)
		}
		if p.Spec.ReclaimAfter == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(p.Spec.ReclaimAfter)
		if err != nil {
			return 0, nil //nolint:nilerr // validated on write; an unreadable value reclaims nothing
		}
		return d, nil
	}
	return 0, nil
}

func (r *Reconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 30 * time.Second
}
