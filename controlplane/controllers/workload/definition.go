// Package workload holds the workload controllers: rendering workload definitions into Kubernetes
// objects, and reconciling workload instances onto their runtime's cluster (apply, prune, health and
// drift correction). The reconcile runtime (controlplane/reconcile) drives them.
package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// DefinitionReconciler reconciles workload_definitions: it checks what can only be checked by rendering
// (a chart that will not render, manifests that do not parse, quantities) and counts the definition's
// instances. Its status writes notify the instances, which then re-render: that is how a definition
// update rolls out to every instance.
type DefinitionReconciler struct {
	// Client reads instances.
	Client *client.Client
	// Renderer renders the definition (default: a zero Renderer).
	Renderer *render.Renderer
}

// Reconcile implements reconcile.Reconciler.
func (r *DefinitionReconciler) Reconcile(ctx context.Context, def *api.WorkloadDefinition) (reconcile.Result, error) {
	// Render against a stand-in instance: the definition's name, its own namespace, no overrides.
	probe := &api.WorkloadInstance{Meta: api.Meta{Name: def.Name}}
	if _, err := r.renderer().Render(ctx, def, probe, ""); err != nil {
		var fe *render.FetchError
		if errors.As(err, &fe) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("render: %w", err))
	}
	if !rollingOut(def) {
		// Counted by the store, not listed: nothing here needs the instances themselves.
		n, err := r.Client.WorkloadInstances().Count(ctx, client.ListOptions{References: def.ID})
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("count workload_instances: %w", err)
		}
		def.Status.Instances = n
		return reconcile.Result{}, nil
	}
	insts, err := instancesOf(ctx, r.Client, def.ID)
	if err != nil {
		return reconcile.Result{}, err
	}
	def.Status.Instances = len(insts)
	// A definition is reconciled once every instance has rolled out its current generation, so that
	// `terraform apply` of an image change returns when the new image runs everywhere. Its status write
	// (observed generation) is what notifies the instances to re-render.
	for _, inst := range insts {
		st := &inst.Status
		rolledOut := st.DefinitionGeneration == def.Generation
		switch {
		case rolledOut && api.Reconciled(inst.Generation, &st.Status):
			continue
		case st.DefinitionGeneration == 0:
			// Never rendered: a new instance renders the current generation from the start, so it has
			// nothing to roll out. Its own status says when it runs.
			continue
		case rolledOut && st.Phase == api.PhaseFailed && st.ObservedGeneration == inst.Generation:
			return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("workload_instance %q failed to roll out generation %d: %s", inst.Name, def.Generation, st.Message))
		default:
			state := fmt.Sprintf("rolling out generation %d", def.Generation)
			if st.Message != "" {
				state += ": " + st.Message
			}
			// A stalled instance stalls the definition at once: its waiters need not wait out the deadline.
			var stall *reconcile.Stall
			if c := api.StalledCondition(inst.Generation, &st.Status); c != nil && rolledOut {
				stall = &reconcile.Stall{Reason: c.Reason, Message: fmt.Sprintf("workload_instance %q: %s", inst.Name, c.Message)}
			}
			return reconcile.Result{Stalled: stall}, reconcile.Wait(fmt.Sprintf("workload_instance %q", inst.Name), state, "RollingOut", rolloutPoll(len(insts)))
		}
	}
	return reconcile.Result{}, nil
}

// rollingOut reports whether the definition has a change to roll out to its instances: a generation
// after the first that it has not yet been Ready at. The first generation has none (each instance renders
// it from the start, and reports its own progress), and a definition Ready at its generation has rolled
// it out to every instance then; instances created since render it from the start too. So a definition
// waits on its instances only while a change of its own rolls out, never while instances come and go:
// waiting on new instances made it list all of them every poll while they were created (make bench,
// sim: 100 pages per poll at 100,000 instances, polls that ran on into the idle window).
func rollingOut(def *api.WorkloadDefinition) bool {
	if def.Generation <= 1 {
		return false
	}
	return def.Status.Phase != api.PhaseReady || def.Status.ObservedGeneration != def.Generation
}

// rolloutPoll is how soon a rolling-out definition lists its instances again: 2s, plus 2s per 500
// instances, at most 30s. Each look lists every instance, so a fixed 2s cost a large fleet a tenth of a
// core while it rolled out (make bench, scale section: 10,000 instances).
func rolloutPoll(instances int) time.Duration {
	return min(2*time.Second*time.Duration(1+instances/500), 30*time.Second)
}

func (r *DefinitionReconciler) renderer() *render.Renderer {
	if r.Renderer == nil {
		return defaultRenderer
	}
	return r.Renderer
}

// defaultRenderer serves reconcilers configured without a Renderer.
var defaultRenderer = &render.Renderer{}

// instancesOf lists the live instances of a definition: the instances that reference it, found through
// the store's reference index (listing every instance made a full resync O(N²); make bench, scale).
func instancesOf(ctx context.Context, c *client.Client, defID string) ([]*api.WorkloadInstance, error) {
	var out []*api.WorkloadInstance
	for inst, err := range c.WorkloadInstances().All(ctx, client.ListOptions{Limit: 1000, References: defID}) {
		if err != nil {
			return nil, fmt.Errorf("list workload_instances: %w", err)
		}
		if inst.Spec.DefinitionID == defID && inst.DeletionRequestedAt == nil {
			out = append(out, inst)
		}
	}
	return out, nil
}
