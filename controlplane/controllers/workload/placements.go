package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/placement"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// Event reasons of placement.
const (
	// ReasonProvisioning is the event reason of a runtime provisioned from a profile for a placement.
	ReasonProvisioning = "ProvisioningRuntime"
	// ReasonFailover is the event reason of a placement moved off an unreachable runtime.
	ReasonFailover = "FailedOver"
	// ReasonMovedOff is the event reason of a runtime the instance no longer runs on, cleaned up.
	ReasonMovedOff = "MovedOff"
)

// noRuntimeFallback is how often a placement that no runtime or profile serves looks again without being
// woken by a write (see place).
const noRuntimeFallback = 5 * time.Minute

// targets returns where the instance should run: its pinned runtime, or its placement's decision, after
// provisioning the runtimes the decision asks for; then every other runtime where an instance that uses
// it with placement with_consumers runs. followers lists those consumers by runtime.
func (r *InstanceReconciler) targets(ctx context.Context, inst *api.WorkloadInstance, replicas int32) (targets []placement.Target, followers map[string][]api.ObjectRef, err error) {
	targets, err = r.ownTargets(ctx, inst, replicas)
	if err != nil {
		return nil, nil, err
	}
	followers, err = r.followers(ctx, inst)
	if err != nil {
		return nil, nil, err
	}
	targets = append(targets, followerTargets(targets, followers, inst, replicas)...)
	return targets, followers, nil
}

// followers are the runtimes where the instances that use this one with placement with_consumers run,
// each with their names. A consumer being deleted no longer counts.
func (r *InstanceReconciler) followers(ctx context.Context, inst *api.WorkloadInstance) (map[string][]api.ObjectRef, error) {
	out := map[string][]api.ObjectRef{}
	for c, err := range r.Client.WorkloadInstances().All(ctx, client.ListOptions{References: inst.ID}) {
		if err != nil {
			return nil, fmt.Errorf("list the instances that use it: %w", err)
		}
		if c.DeletionRequestedAt != nil || !slices.ContainsFunc(c.Spec.Uses, func(u api.Use) bool {
			return u.InstanceID == inst.ID && u.Placement == api.UseWithConsumers
		}) {
			continue
		}
		for _, ps := range currentPlacements(c) {
			ref := api.ObjectRef{Kind: api.KindWorkloadInstance, ID: c.ID, Name: c.Name}
			if ps.RuntimeID != "" && ps.Phase != api.PhaseDeleting && !slices.Contains(out[ps.RuntimeID], ref) {
				out[ps.RuntimeID] = append(out[ps.RuntimeID], ref)
			}
		}
	}
	return out, nil
}

// followerTargets are the runtimes the followers need that the instance's own targets do not cover, in
// a stable order, with the region the consumers' placements report.
func followerTargets(own []placement.Target, followers map[string][]api.ObjectRef, inst *api.WorkloadInstance, replicas int32) []placement.Target {
	var out []placement.Target
	for _, id := range slices.Sorted(maps.Keys(followers)) {
		if slices.ContainsFunc(own, func(t placement.Target) bool { return t.Runtime != nil && t.Runtime.ID == id }) {
			continue
		}
		t := placement.Target{Runtime: &placement.Runtime{ID: id}, Replicas: replicas}
		for _, ps := range inst.Status.Placements {
			if ps.RuntimeID == id {
				t.Runtime.Name, t.Region = ps.Runtime, ps.Region
			}
		}
		out = append(out, t)
	}
	return out
}

// notifyFollowed asks the instances this one uses with placement with_consumers to look again at where
// it runs: it was placed somewhere new, or left somewhere.
func (r *InstanceReconciler) notifyFollowed(ctx context.Context, inst *api.WorkloadInstance) error {
	for _, ref := range followedRefs(inst) {
		if err := r.Client.WorkloadInstances().RequestReconcile(ctx, ref.ID); err != nil && !api.IsNotFound(err) {
			return fmt.Errorf("notify used workload_instance %s: %w", ref.ID, err)
		}
	}
	return nil
}

// followedRefs names the instances inst uses with placement with_consumers.
func followedRefs(inst *api.WorkloadInstance) []api.ObjectRef {
	var refs []api.ObjectRef
	for _, u := range inst.Spec.Uses {
		if u.Placement == api.UseWithConsumers {
			refs = append(refs, api.ObjectRef{Kind: api.KindWorkloadInstance, ID: u.InstanceID})
		}
	}
	return refs
}

// runtimeSet names the runtimes of placements, for telling whether they changed.
func runtimeSet(ps []api.PlacementStatus) string {
	var ids []string
	for _, p := range ps {
		if p.Phase != api.PhaseDeleting {
			ids = append(ids, p.RuntimeID+"="+string(p.Phase))
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// placedOn names the runtimes of placements, whatever their phase, for telling whether the instance
// came to or left a runtime.
func placedOn(ps []api.PlacementStatus) string {
	var ids []string
	for _, p := range ps {
		if p.Phase != api.PhaseDeleting {
			ids = append(ids, p.RuntimeID)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// ownTargets is where the instance's own spec places it.
func (r *InstanceReconciler) ownTargets(ctx context.Context, inst *api.WorkloadInstance, replicas int32) ([]placement.Target, error) {
	if inst.Spec.Placement == nil {
		if inst.Spec.RuntimeID == "" {
			return nil, nil // only where its consumers run
		}
		return []placement.Target{{Runtime: &placement.Runtime{ID: inst.Spec.RuntimeID}, Replicas: replicas}}, nil
	}
	in := placement.Input{Placement: inst.Spec.Placement, Replicas: replicas, Current: inst.Status.Placements, Now: time.Now()}
	for rt, err := range r.Client.KubernetesRuntimes().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list kubernetes_runtimes: %w", err)
		}
		in.Runtimes = append(in.Runtimes, placement.FromObject(rt))
	}
	for p, err := range r.Client.RuntimeProfiles().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list runtime_profiles: %w", err)
		}
		if p.DeletionRequestedAt == nil {
			in.Profiles = append(in.Profiles, placement.Profile{ID: p.ID, Name: p.Name, Spec: p.Spec})
		}
	}
	targets := placement.Decide(in)
	for i := range targets {
		t := &targets[i]
		if t.Replaces != "" {
			reconcile.Eventf(ctx, api.EventWarning, ReasonFailover, "kubernetes_runtime %q in %q has been unreachable longer than %s; moving its %d replicas",
				t.Replaces, t.Region, inst.Spec.Placement.Failover.Toleration(), t.Replicas)
		}
		if t.Provision == nil {
			continue
		}
		rt, err := r.provision(ctx, inst, t.Provision)
		if err != nil {
			return nil, err
		}
		t.Runtime = &placement.Runtime{ID: rt.ID, Name: rt.Name, Region: t.Region, Profile: t.Provision.Profile.Name}
	}
	return targets, nil
}

// provision creates a runtime from a profile for the instance's placement. The runtime is owned by the
// profile (it outlives the instance, and is reclaimed when idle if the profile says so), and labelled
// with the profile, the region and the instance it was first provisioned for.
func (r *InstanceReconciler) provision(ctx context.Context, inst *api.WorkloadInstance, p *placement.Provision) (*api.KubernetesRuntime, error) {
	spec := p.Profile.Spec
	labels := maps.Clone(spec.RuntimeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[api.LabelProfile] = p.Profile.Name
	labels[api.LabelRegion] = p.Region
	labels[api.LabelProvisionedFor] = inst.Name
	rt := &api.KubernetesRuntime{
		Meta: api.Meta{Name: p.Name, Labels: labels, Owners: []api.ObjectRef{{Kind: api.KindRuntimeProfile, ID: p.Profile.ID, Name: p.Profile.Name}}},
		Spec: api.KubernetesRuntimeSpec{Provider: spec.Provider, Region: p.Region, Nodes: spec.Nodes, MinNodes: spec.MinNodes, MaxNodes: spec.MaxNodes,
			KubernetesVersion: spec.KubernetesVersion, CloudAccountID: spec.CloudAccountID, NodeType: spec.NodeType},
	}
	created, err := r.Client.KubernetesRuntimes().Create(ctx, rt)
	if api.IsConflict(err) {
		// Another instance provisioned it a moment ago: the next decision finds it.
		return nil, fmt.Errorf("kubernetes_runtime %q was just created by another placement; deciding again: %w", p.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("provision kubernetes_runtime %q from runtime_profile %q: %w", p.Name, p.Profile.Name, err)
	}
	reconcile.Eventf(ctx, api.EventNormal, ReasonProvisioning, "provisioning kubernetes_runtime %q in %q from runtime_profile %q: no matching runtime there",
		created.Name, p.Region, p.Profile.Name)
	ev := api.Event{Type: api.EventNormal, Reason: "Provisioned", Source: "controller/" + api.KindWorkloadInstance,
		Message: fmt.Sprintf("provisioned from runtime_profile %q for workload_instance %q: its placement needs a runtime in %q and none matched", p.Profile.Name, inst.Name, p.Region)}
	if err := r.Client.KubernetesRuntimes().RecordEvent(ctx, created.ID, ev); err != nil && !api.IsNotFound(err) {
		reconcile.Logger(ctx).Warn("record provisioning event", "runtime", created.Name, "err", err)
	}
	return created, nil
}

// outcomes gathers the placements' results into the instance's.
type outcomes struct {
	terminal, err, wait error
	requeue             time.Duration
	stall               *reconcile.Stall
	notReady            string
}

func (o *outcomes) add(where string, res reconcile.Result, err error) {
	var we *reconcile.WaitError
	switch {
	case err == nil:
		if res.RequeueAfter > 0 && (o.requeue == 0 || res.RequeueAfter < o.requeue) {
			o.requeue = res.RequeueAfter
		}
		if res.Stalled != nil && o.stall == nil {
			s := *res.Stalled
			s.Message = where + s.Message
			o.stall = &s
		}
	case reconcile.IsTerminal(err):
		if o.terminal == nil {
			o.terminal = reconcile.Terminal(fmt.Errorf("%s%w", where, err))
		}
	case errors.As(err, &we):
		var first *reconcile.WaitError
		switch {
		case o.wait == nil:
			o.wait = err
		case len(we.Kinds) > 0 && errors.As(o.wait, &first):
			// The first wait is the one reported; the writes that end a later one end it too.
			merged := *first
			merged.Kinds = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(first.Kinds), we.Kinds...))))
			o.wait = &merged
		}
	default:
		if o.err == nil {
			o.err = fmt.Errorf("%s%w", where, err)
		}
	}
}

// result is the instance's outcome: a Failed placement fails it, then errors retry, then it waits on a
// runtime, then it polls rollouts; Ready when every placement is.
func (o *outcomes) result(inst *api.WorkloadInstance) (reconcile.Result, error) {
	switch {
	case o.terminal != nil:
		return reconcile.Result{}, o.terminal
	case o.err != nil:
		return reconcile.Result{}, o.err
	case o.wait != nil:
		return reconcile.Result{}, o.wait
	case o.requeue > 0:
		inst.Status.Message = o.notReady
		return reconcile.Result{RequeueAfter: o.requeue, Stalled: o.stall}, nil
	}
	return reconcile.Result{}, nil
}

// place rolls the definition out on one target and returns the placement's status.
func (r *InstanceReconciler) place(ctx context.Context, def *api.WorkloadDefinition, inst *api.WorkloadInstance, deps *dependencies, t placement.Target, out *outcomes) api.PlacementStatus {
	ps := api.PlacementStatus{Region: t.Region, Replicas: t.Replicas, Phase: api.PhasePending}
	if t.Provision != nil {
		ps.Profile = t.Provision.Profile.Name
	}
	if t.Runtime == nil {
		ps.Message = t.Problem
		// No runtime or profile serves the region, so the instance references none whose change would
		// notify it: it waits on every write to either kind (a runtime or profile created or changed,
		// or a provisioned runtime's readiness, which notifies its profile). The timer is the fallback
		// for what no write announces: a runtime whose region is learned from its nodes.
		out.add("", reconcile.Result{}, &reconcile.WaitError{
			On: fmt.Sprintf("a runtime in region %q", t.Region), State: "none matches: " + t.Problem, Reason: "NoRuntimeForPlacement",
			After: noRuntimeFallback, Kinds: []string{api.KindKubernetesRuntime, api.KindRuntimeProfile},
		})
		return ps
	}
	ps.RuntimeID, ps.Runtime = t.Runtime.ID, t.Runtime.Name
	if ps.Profile == "" {
		ps.Profile = t.Runtime.Profile
	}
	for _, cur := range inst.Status.Placements {
		if cur.RuntimeID == ps.RuntimeID {
			ps.Objects = cur.Objects
			ps.Profile = cmp.Or(ps.Profile, cur.Profile)
		}
	}
	if inst.Spec.Placement == nil && len(inst.Status.Placements) == 0 {
		ps.Objects = inst.Status.Objects // written before placements existed
	}
	rt, cl, err := r.connect(ctx, ps.RuntimeID, false)
	if rt != nil {
		ps.Runtime = rt.Name
		ps.Region = cmp.Or(rt.Spec.Region, rt.Status.Region, ps.Region)
	}
	where := ""
	if inst.Spec.Placement != nil {
		where = fmt.Sprintf("on kubernetes_runtime %q: ", ps.Runtime)
	}
	if err != nil {
		ps.Message = err.Error()
		if reconcile.IsTerminal(err) {
			ps.Phase = api.PhaseFailed
		}
		out.add(where, reconcile.Result{}, err)
		return ps
	}
	ps.Phase = api.PhaseReconciling
	res, err := r.rollout(ctx, def, inst, deps, rt, cl, &ps)
	switch {
	case err != nil:
		ps.Message = err.Error()
		if reconcile.IsTerminal(err) {
			ps.Phase = api.PhaseFailed
		}
	case res.RequeueAfter == 0:
		ps.Phase, ps.Message = api.PhaseReady, ""
	default:
		if out.notReady == "" {
			out.notReady = where + ps.Message
		}
	}
	out.add(where, res, err)
	return ps
}

// leave removes the instance from runtimes it is placed on but no longer should be (moved regions, a
// failover, a pinned runtime changed). A runtime that cannot be reached keeps its placement, phase
// Deleting, until it answers again or is deleted; it does not keep the instance from being Ready.
func (r *InstanceReconciler) leave(ctx context.Context, inst *api.WorkloadInstance, targets []placement.Target, out *outcomes) []api.PlacementStatus {
	keep := map[string]bool{}
	for _, t := range targets {
		if t.Runtime != nil {
			keep[t.Runtime.ID] = true
		}
	}
	var left []api.PlacementStatus
	for _, ps := range currentPlacements(inst) {
		if keep[ps.RuntimeID] || ps.RuntimeID == "" {
			continue
		}
		done, err := r.cleanup(ctx, inst, ps)
		if done {
			reconcile.Eventf(ctx, api.EventNormal, ReasonMovedOff, "removed from kubernetes_runtime %q: the placement no longer uses it", ps.Runtime)
			continue
		}
		ps.Phase = api.PhaseDeleting
		ps.Message = "moving off: objects still going away"
		if err != nil {
			ps.Message = fmt.Sprintf("moving off: its objects will be deleted when it answers again (%v)", err)
			var we *reconcile.WaitError
			if !kube.Transient(err) && !errors.As(err, &we) {
				out.add("", reconcile.Result{}, err)
			}
		} else {
			out.add("", reconcile.Result{RequeueAfter: r.pollInterval()}, nil)
		}
		left = append(left, ps)
	}
	return left
}

// currentPlacements returns the instance's placements, or for an instance written before placements
// existed, its pinned runtime with the objects it applied.
func currentPlacements(inst *api.WorkloadInstance) []api.PlacementStatus {
	if len(inst.Status.Placements) > 0 || inst.Spec.RuntimeID == "" {
		return inst.Status.Placements
	}
	return []api.PlacementStatus{{RuntimeID: inst.Spec.RuntimeID, Objects: inst.Status.Objects}}
}

// summarize sums the placements into the instance's top-level status.
func summarize(inst *api.WorkloadInstance) {
	st := &inst.Status
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.Objects = 0, 0, 0, nil
	for _, ps := range st.Placements {
		if ps.Phase == api.PhaseDeleting {
			continue
		}
		st.Replicas += ps.Replicas
		st.ReadyReplicas += ps.ReadyReplicas
		st.AvailableReplicas += ps.AvailableReplicas
		for _, o := range ps.Objects {
			if inst.Spec.Placement != nil {
				o.Runtime = ps.Runtime // the same object on several runtimes
			}
			st.Objects = append(st.Objects, o)
		}
	}
}
