package cluster

import (
	"context"
	"fmt"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// ProfileReconciler reconciles runtime_profiles: a profile is a recipe, Ready once written, whose status
// counts the runtimes provisioned from it. The runtimes it owns outlive it by the owner grace, unless
// something is placed on them.
type ProfileReconciler struct {
	// Client counts the runtimes provisioned from each profile.
	Client *client.Client
}

// Reconcile counts the profile's runtimes.
func (r *ProfileReconciler) Reconcile(ctx context.Context, p *api.RuntimeProfile) (reconcile.Result, error) {
	n, err := r.Client.KubernetesRuntimes().Count(ctx, client.ListOptions{LabelSelector: api.LabelProfile + "=" + p.Name})
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("count runtimes provisioned from the profile: %w", err)
	}
	p.Status.Runtimes = n
	return reconcile.Result{}, nil
}
