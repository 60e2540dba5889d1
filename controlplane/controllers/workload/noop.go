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

// NoopInstanceReconciler is a workload_instance reconciler for SIMULATION ONLY (the benchmark's 100,000
// instance simulation, app.Config.SimulateCompute): it never touches a cluster. It does what the real
// InstanceReconciler does for the control plane — reads the definition and the pinned runtime through
// the same dependency readers (so the API reads are real), renders the definition (the same CPU), and
// reports the instance Ready at the definition's generation with the rendered objects as its applied
// object list — and nothing else: nothing is applied, no health is read, and deletion releases the
// instance at once. It runs under the same reconcile runtime as the real one (locks, queue, status
// writes, events), so what it measures is the control plane's own cost. Never use it to run workloads.
type NoopInstanceReconciler struct {
	// Client reads definitions and runtimes (a controller token, like the real reconciler's).
	Client *client.Client
	// Renderer renders definitions (default: a shared zero Renderer).
	Renderer *render.Renderer
}

// ErrNoopPlacement is returned (as a Terminal error) for an instance with a placement: the simulation
// reconciler handles instances pinned to a runtime only.
var ErrNoopPlacement = errors.New("the simulation (no-op compute) reconciler handles instances pinned to a runtime (spec.runtime_id) only, not placements")

// lookups are the reads of other objects that the runtime hands the reconcile (reconcile.LookupsFrom).
func (r *NoopInstanceReconciler) lookups(ctx context.Context) *reconcile.Lookups {
	return reconcile.LookupsFrom(ctx, r.Client)
}

// Reconcile implements reconcile.Reconciler without compute: see the type's documentation.
func (r *NoopInstanceReconciler) Reconcile(ctx context.Context, inst *api.WorkloadInstance) (reconcile.Result, error) {
	if inst.Spec.Placement != nil || inst.Spec.RuntimeID == "" {
		return reconcile.Result{}, reconcile.Terminal(ErrNoopPlacement)
	}
	def, err := r.lookups(ctx).Definitions.Get(ctx, inst.Spec.DefinitionID)
	if api.IsNotFound(err) {
		return reconcile.Result{}, reconcile.Wait(fmt.Sprintf("workload_definition %q", inst.Spec.DefinitionID), "NotFound", "WorkloadDefinitionNotFound", 5*time.Second)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get workload_definition: %w", err)
	}
	rt, err := r.lookups(ctx).Runtimes.RequireReady(ctx, inst.Spec.RuntimeID)
	if err != nil {
		return reconcile.Result{}, err
	}
	renderer := r.Renderer
	if renderer == nil {
		renderer = defaultRenderer
	}
	objs, err := renderer.Render(ctx, def, inst, rt.Status.Version)
	if err != nil {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("render workload_definition %q: %w", def.Name, err))
	}
	replicas := render.DesiredReplicas(def, inst)
	ps := api.PlacementStatus{
		RuntimeID: rt.ID, Runtime: rt.Name, Region: rt.Status.Region, Phase: api.PhaseReady,
		Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
	}
	for _, o := range objs {
		ps.Objects = append(ps.Objects, api.AppliedObject{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Ready: true,
		})
	}
	inst.Status.Namespace = render.Namespace(inst)
	inst.Status.DefinitionGeneration = def.Generation
	inst.Status.Placements = []api.PlacementStatus{ps}
	summarize(inst)
	return reconcile.Result{}, nil
}

// Finalize implements reconcile.Finalizer: nothing was applied, so the instance is released at once.
func (r *NoopInstanceReconciler) Finalize(context.Context, *api.WorkloadInstance) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}
