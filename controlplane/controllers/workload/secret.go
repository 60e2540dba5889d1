package workload

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// SecretReconciler reconciles secrets: it reports their keys (never their values) and which of the
// instances they serve exist, and asks those instances to reconcile, which delivers the values into
// their namespaces (and rolls their pods when the values changed). Deleting a secret asks them again,
// which removes it from their clusters.
type SecretReconciler struct {
	// Client reads secrets' values (a controller token) and notifies instances.
	Client *client.Client
}

// Reconcile implements reconcile.Reconciler.
func (r *SecretReconciler) Reconcile(ctx context.Context, s *api.Secret) (reconcile.Result, error) {
	s.Status.Keys = slices.Sorted(maps.Keys(s.Spec.Values))
	n, missing, err := r.notify(ctx, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	s.Status.Instances = n
	if len(missing) > 0 {
		// Ready all the same: the values are delivered to each instance as it comes.
		reconcile.Eventf(ctx, api.EventNormal, "InstanceNotFound", "no workload_instance %s yet; its values are delivered once it exists", strings.Join(missing, ", "))
	}
	return reconcile.Result{}, nil
}

// Finalize asks the instances to drop the secret.
func (r *SecretReconciler) Finalize(ctx context.Context, s *api.Secret) (reconcile.Result, error) {
	_, _, err := r.notify(ctx, s)
	return reconcile.Result{}, err
}

// notify asks every named instance that exists to reconcile, and returns how many exist and the ids of
// those that do not.
func (r *SecretReconciler) notify(ctx context.Context, s *api.Secret) (int, []string, error) {
	n := 0
	var missing []string
	for _, id := range s.Spec.InstanceIDs {
		err := r.Client.WorkloadInstances().RequestReconcile(ctx, id)
		switch {
		case api.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("%q", id))
		case err != nil:
			return 0, nil, fmt.Errorf("notify workload_instance %q: %w", id, err)
		default:
			n++
		}
	}
	return n, missing, nil
}
