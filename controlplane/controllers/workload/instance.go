package workload

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/controlplane/requirements"
)

// Defaults of InstanceReconciler.
const (
	// DefaultProgressDeadline is the default ProgressDeadline.
	DefaultProgressDeadline = 5 * time.Minute
	// DefaultUnschedulableGrace is the default UnschedulableGrace.
	DefaultUnschedulableGrace = 30 * time.Second
)

// Condition types and event reasons the instance controller writes.
const (
	// ConditionDriftCorrected records the last correction of hand-made changes in the cluster.
	ConditionDriftCorrected = "DriftCorrected"
	// ReasonPruned is the event reason for objects deleted because the definition dropped them.
	ReasonPruned = "Pruned"
)

// InstanceReconciler reconciles workload_instances onto their runtime's cluster: render, server-side
// apply, prune what the definition dropped, and report health. Every reconcile compares the desired
// objects with the cluster's watch-fed cache (kube.InSync) and applies again when they differ, which
// puts back objects edited, scaled or deleted by hand (the agent triggers a reconcile when that
// happens, and the runtime re-checks Ready objects periodically); each correction is recorded as a
// DriftCorrected event and condition. Health is read from the same cache.
type InstanceReconciler struct {
	// Client reads definitions and runtimes. It needs a controller token (runtimes' kubeconfigs are
	// write-only fields).
	Client *client.Client
	// Connector connects to runtimes' clusters.
	Connector *kube.Connector
	// Renderer renders definitions (default: a shared zero Renderer).
	Renderer *render.Renderer
	// PollInterval is how soon an instance whose objects are not ready yet is looked at again at first
	// (default 5s); the poll then slows to half the rollout's age, at most 30s. The agent requeues it at
	// once when the rollout completes or shows a problem, and every few seconds with its progress, so the
	// poll is a safety net. It is also how often a deletion looks for objects still going away (default
	// 2s there).
	PollInterval time.Duration
	// ReapplyInterval is how long, while an instance is not ready yet, unchanged desired objects are not
	// applied again: reconciles triggered by rollout progress then only read health (default 30s). An
	// object found missing, a change of the desired objects, and every reconcile of a Ready instance
	// (the drift check) apply again.
	ReapplyInterval time.Duration
	// CleanupGrace is how long a deletion waits for an unreachable cluster before the instance's status
	// says that it cannot finish and offers orphaning (default 2m).
	CleanupGrace time.Duration
	// ProgressDeadline is how long an instance's rollout may make no progress (no change in its
	// replicas' counts or in what it waits for) before it is Stalled (default DefaultProgressDeadline,
	// half the provider's default create timeout, so that `terraform apply` ends with the reason rather
	// than at its timeout). A Deployment whose own deadline passes stalls it at once.
	ProgressDeadline time.Duration
	// UnschedulableGrace is how long a rollout may make no progress while a pod of it is unschedulable
	// (the scheduler finds no node for it) before it is Stalled with reason Unschedulable (default
	// DefaultUnschedulableGrace): waiting longer rarely helps, and node autoscaling that can make room
	// adds nodes within it.
	UnschedulableGrace time.Duration
	// ReadyWait is how long a reconcile that has just applied waits on the cluster's cache for what it
	// applied to become ready, so that a quick rollout ends Ready in the reconcile that applied it
	// rather than in a later one the agent asks for (default 1s; negative: no wait). It waits only when
	// the apply itself took less than a quarter of ReadyWait (a slow API server means a slow rollout),
	// and only when fewer than ReadyWaiters reconciles wait at once, so that waits never hold many
	// workers.
	ReadyWait time.Duration
	// ReadyWaiters bounds the reconciles that wait for readiness at once (default 4).
	ReadyWaiters int

	waiting  atomic.Int32 // reconciles waiting for readiness now
	mu       sync.Mutex
	recent   map[string]recentApply  // instance id -> what was last applied while not ready
	progress map[string]progressMark // instance id -> the last progress seen while not ready
	// deleting holds, per "<instance id>/<runtime id>" being cleaned up, what its first cleanup pass left
	// to go; goneStops the cancel of the cache watch that asks for a reconcile when that is gone.
	deleting  map[string][]kube.AppliedRef
	goneStops map[string]func()
}

// lookups are the reads of other objects that the runtime hands the reconcile (reconcile.LookupsFrom).
func (r *InstanceReconciler) lookups(ctx context.Context) *reconcile.Lookups {
	return reconcile.LookupsFrom(ctx, r.Client)
}

// progressMark is the state of a rollout when it last made progress.
type progressMark struct {
	key string
	at  time.Time
}

// recentApply remembers an apply whose objects are not ready yet.
type recentApply struct {
	hash string
	at   time.Time
	refs []kube.AppliedRef
	// since is when these desired objects were first found not ready.
	since time.Time
}

// Reconcile implements reconcile.Reconciler: it decides the instance's placements (its pinned runtime,
// or where its placement puts it, provisioning runtimes from profiles), rolls the definition out on each,
// and removes it from runtimes it no longer uses.
func (r *InstanceReconciler) Reconcile(ctx context.Context, inst *api.WorkloadInstance) (reconcile.Result, error) {
	// The definition is used whatever its phase: it is Reconciling while its instances roll it out.
	def, err := r.lookups(ctx).Definitions.Get(ctx, inst.Spec.DefinitionID)
	if api.IsNotFound(err) {
		return reconcile.Result{}, reconcile.Wait(fmt.Sprintf("workload_definition %q", inst.Spec.DefinitionID), "NotFound", "WorkloadDefinitionNotFound", 5*time.Second)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get workload_definition: %w", err)
	}
	// Dependencies first: the secrets that serve it and the instances it uses are Ready before it rolls out.
	deps, err := r.dependencies(ctx, inst)
	if err != nil {
		return reconcile.Result{}, err
	}
	targets, followers, err := r.targets(ctx, inst, render.DesiredReplicas(def, inst))
	if err != nil {
		return reconcile.Result{}, err
	}
	inst.Status.Namespace = render.Namespace(inst)
	inst.Status.DefinitionGeneration = def.Generation
	before := runtimeSet(inst.Status.Placements)
	wasOn := placedOn(inst.Status.Placements)
	var out outcomes
	var placements []api.PlacementStatus
	for _, t := range targets {
		ps := r.place(ctx, def, inst, deps, t, &out)
		if t.Runtime != nil {
			ps.Consumers = followers[t.Runtime.ID]
		}
		placements = append(placements, ps)
	}
	placements = append(placements, r.leave(ctx, inst, targets, &out)...)
	inst.Status.Placements = placements
	summarize(inst)
	res, err := out.result(inst)
	if runtimeSet(placements) != before {
		// Those that follow it, and those it follows, see where it now runs, once its status says so:
		// asked before the write, they could read the old placements and settle on them.
		res.Notify = append(res.Notify, followedRefs(inst)...)
		for _, refs := range followers {
			res.Notify = append(res.Notify, refs...)
		}
	}
	if placedOn(placements) != wasOn {
		// Its databases and buckets serve it where it runs: once its status says where, they look.
		res.Notify = append(res.Notify, deps.dataServiceRefs()...)
	}
	return res, err
}

// rollout applies the definition on one runtime and reports its health there.
func (r *InstanceReconciler) rollout(ctx context.Context, def *api.WorkloadDefinition, inst *api.WorkloadInstance, deps *dependencies, rt *api.KubernetesRuntime, cl *kube.Cluster, ps *api.PlacementStatus) (reconcile.Result, error) {
	if name := deps.missingOn(rt.ID); name != "" {
		// One that follows its consumers is asked to come here; another must be placed here by its spec.
		if err := r.notifyFollowed(ctx, inst); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, reconcile.Wait(fmt.Sprintf("workload_instance %q", name), deps.whyMissing(name, rt.Name), "UsedInstanceNotPlaced", 5*time.Second)
	}
	if slices.Contains(requirements.ForInstance(&def.Spec), api.SupportMetricsServer) {
		// Its HorizontalPodAutoscaler reads the metrics API: served before the autoscaler is applied.
		me := api.ObjectRef{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: inst.Name}
		if stall, err := needMetrics(ctx, r.Client, cl, me, rt); err != nil {
			return reconcile.Result{Stalled: stall}, err
		}
	}
	renderer := r.Renderer
	if renderer == nil {
		renderer = defaultRenderer
	}
	view := *inst
	if p := inst.Spec.Placement; p != nil && p.Replicas != nil && p.Replicas.Mode == api.ReplicasWeighted {
		share := ps.Replicas // this placement's share of the instance's replicas
		view.Spec.Replicas = &share
	}
	objs, err := renderer.Render(ctx, def, &view, rt.Status.Version)
	if err != nil {
		var fe *render.FetchError
		if errors.As(err, &fe) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("render workload_definition %q: %w", def.Name, err))
	}
	extra, err := r.dataOn(ctx, cl, deps, rt, render.Namespace(inst))
	if err != nil {
		return reconcile.Result{}, err
	}
	objs = deps.inject(objs, render.Namespace(inst), extra)

	key := inst.ID + "/" + rt.ID
	previous := kube.RefsOf(ps.Objects)
	owner := kube.Owner{InstanceID: inst.ID, Kind: api.KindWorkloadInstance, Namespace: render.Namespace(inst), Previous: previous, Adopt: inst.Spec.Adopt, ClusterScoped: def.Spec.ClusterScoped}
	hash := desiredHash(rt.ID, objs)
	applied, fresh := r.recentlyApplied(key, hash)
	var applyTook time.Duration // how long an apply made now took; zero when nothing was applied
	if !fresh {
		// The drift check: when the cluster's cache shows every object as the apply would leave it
		// (and nothing to prune), there is nothing to apply.
		if refs, ok := kube.InSync(ctx, cl, owner, objs); ok && sameRefs(refs, previous) {
			applied = refs
		} else {
			start := time.Now()
			applied, err = r.apply(ctx, cl, inst, ps, owner, objs)
			if errors.Is(err, kube.ErrClusterBusy) {
				// Nothing applied: the worker goes back to the pool, and the instance to the back of
				// the queue, rather than wait on a slow API server.
				ps.Message = fmt.Sprintf("waiting to apply: kubernetes_runtime %q has its most applies in flight", rt.Name)
				return reconcile.Result{RequeueAfter: clusterBusyRetry + rand.N(clusterBusyRetry/2)}, nil
			}
			if err != nil {
				r.forget(key)
				return reconcile.Result{}, err
			}
			applyTook = max(time.Since(start), time.Nanosecond)
		}
	}

	// Everything was applied (or found in sync) just now or moments ago (fresh): existence needs no
	// second look.
	rep := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{AssumeExist: true, Cached: true})
	if !rep.Ready && applyTook > 0 && !missing(rep) {
		rep = r.awaitReady(ctx, cl, inst.ID, applied, applyTook, rep)
	}
	ps.Objects = rep.Objects
	ps.Replicas = rep.Replicas
	ps.ReadyReplicas = rep.ReadyReplicas
	ps.AvailableReplicas = rep.AvailableReplicas
	if !rep.Ready {
		nr := rep.NotReady()
		ps.Message = fmt.Sprintf("%s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
		if missing(rep) {
			r.forget(key)
		} else if !fresh {
			r.remember(key, hash, applied)
		}
		stall, due := r.stall(key, hash, rep)
		return reconcile.Result{RequeueAfter: max(min(r.pollAfter(key), due), 100*time.Millisecond), Stalled: stall}, nil
	}
	r.forget(key)
	return reconcile.Result{}, nil
}

// clusterBusyRetry is how soon an instance whose cluster had its most applies in flight is tried again
// (plus up to half as much again, so that the instances turned away together do not return together).
const clusterBusyRetry = time.Second

// awaitReady waits, after an apply that took applyTook, for the cluster's cache to show the applied
// objects ready, within ReadyWait (see there), and returns the last health read. Every change of the
// instance's cached objects (its workload's status, its pods) reads health again from the cache.
func (r *InstanceReconciler) awaitReady(ctx context.Context, cl *kube.Cluster, instanceID string, applied []kube.AppliedRef, applyTook time.Duration, rep kube.HealthReport) kube.HealthReport {
	wait := r.ReadyWait
	if wait == 0 {
		wait = time.Second
	}
	waiters := int32(r.ReadyWaiters)
	if waiters <= 0 {
		waiters = 4
	}
	if wait < 0 || applyTook > wait/4 {
		return rep
	}
	if r.waiting.Add(1) > waiters {
		r.waiting.Add(-1)
		return rep
	}
	defer r.waiting.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// From the cache only: a wake-up costs no request, and the change that makes it ready wakes it.
		changed, release := cl.Cache().Changed(instanceID)
		now := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{AssumeExist: true, CachedOnly: true})
		if now.Ready {
			release()
			return now
		}
		select {
		case <-changed:
			release()
		case <-timer.C:
			release()
			return kube.HealthWith(ctx, cl, applied, kube.HealthOptions{AssumeExist: true, Cached: true})
		case <-ctx.Done():
			release()
			return rep
		}
	}
}

// stall reports a rollout that made no progress within ProgressDeadline (UnschedulableGrace while a pod
// is unschedulable), or whose Deployment passed its own progress deadline. Progress is any change in the
// replicas' counts or in what the rollout waits for. When it is not stalled yet it also returns how soon
// it would be, so that the poll looks again then (and at most that late).
func (r *InstanceReconciler) stall(id, hash string, rep kube.HealthReport) (*reconcile.Stall, time.Duration) {
	nr := rep.NotReady()
	msg := fmt.Sprintf("%s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
	if strings.Contains(nr.Message, kube.ProgressDeadlineExceeded) {
		return &reconcile.Stall{Reason: "ProgressDeadlineExceeded", Message: msg}, time.Duration(math.MaxInt64)
	}
	key := fmt.Sprintf("%s/%d/%d/%d/%s", hash, rep.Replicas, rep.ReadyReplicas, rep.AvailableReplicas, msg)
	deadline := cmp.Or(r.ProgressDeadline, DefaultProgressDeadline)
	reason := "NoProgress"
	if unschedulable(rep) {
		reason = "Unschedulable"
		deadline = min(deadline, cmp.Or(r.UnschedulableGrace, DefaultUnschedulableGrace))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.progress == nil {
		r.progress = map[string]progressMark{}
	}
	p, ok := r.progress[id]
	if !ok || p.key != key {
		r.progress[id] = progressMark{key: key, at: time.Now()}
		return nil, deadline
	}
	if left := deadline - time.Since(p.at); left > 0 {
		return nil, left
	}
	return &reconcile.Stall{Reason: reason, Message: fmt.Sprintf("no progress for %s: %s", time.Since(p.at).Truncate(time.Second), msg)}, time.Duration(math.MaxInt64)
}

// unschedulable reports whether a not-ready object of the rollout waits on a pod that the scheduler
// cannot place (kube.PodCause's "pod NAME: Unschedulable: ...").
func unschedulable(rep kube.HealthReport) bool {
	for _, o := range rep.Objects {
		if !o.Ready && strings.Contains(o.Message, ": Unschedulable: ") {
			return true
		}
	}
	return false
}

// apply applies the rendered objects, records drift, and prunes what is no longer rendered.
func (r *InstanceReconciler) apply(ctx context.Context, cl *kube.Cluster, inst *api.WorkloadInstance, ps *api.PlacementStatus, owner kube.Owner, objs []*unstructured.Unstructured) ([]kube.AppliedRef, error) {
	applied, err := kube.TryApply(ctx, cl, owner, objs)
	if errors.Is(err, kube.ErrClusterBusy) {
		return nil, err
	}
	if err != nil {
		// Record what is in the cluster now (what this apply reached, plus what was there before), so
		// that status tells the truth and a later prune or delete finds everything.
		ps.Objects = unknownHealth(mergeRefs(applied, owner.Previous))
		if kube.IsInvalid(err) || kube.IsOwnershipConflict(err) {
			return nil, reconcile.Terminal(fmt.Errorf("apply: %w", err))
		}
		return nil, fmt.Errorf("apply: %w", err)
	}
	recordDrift(ctx, inst, applied)
	if len(owner.Previous) > 0 && !sameRefs(applied, owner.Previous) {
		pruned, err := kube.Prune(ctx, cl, owner, applied)
		for _, p := range pruned {
			reconcile.Eventf(ctx, api.EventNormal, ReasonPruned, "deleted %s (no longer rendered)", p)
		}
		if err != nil {
			ps.Objects = unknownHealth(mergeRefs(applied, owner.Previous))
			return nil, fmt.Errorf("prune: %w", err)
		}
	}
	return applied, nil
}

func (r *InstanceReconciler) recentlyApplied(id, hash string) ([]kube.AppliedRef, bool) {
	interval := r.ReapplyInterval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.recent[id]
	if !ok || e.hash != hash || time.Since(e.at) > interval {
		return nil, false
	}
	return e.refs, true
}

func (r *InstanceReconciler) remember(id, hash string, refs []kube.AppliedRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recent == nil {
		r.recent = map[string]recentApply{}
	}
	since := time.Now()
	if e, ok := r.recent[id]; ok && e.hash == hash {
		since = e.since
	}
	r.recent[id] = recentApply{hash: hash, at: time.Now(), refs: refs, since: since}
}

// pollAfter is how soon an instance whose objects are not ready is looked at again: PollInterval at
// first, then half the time it has been rolling out, at most 30s. The agent asks for a reconcile as
// soon as the objects' health changes, so the poll is a safety net; a fixed 2s poll of thousands of
// rolling-out instances queued fresh work behind it (make bench, scale section, churn).
func (r *InstanceReconciler) pollAfter(id string) time.Duration {
	r.mu.Lock()
	e, ok := r.recent[id]
	r.mu.Unlock()
	var since time.Time
	if ok {
		since = e.since
	}
	base := r.PollInterval
	if base <= 0 {
		base = defaultRolloutPoll
	}
	return reconcile.PollAfter(base, 30*time.Second, since)
}

func (r *InstanceReconciler) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recent, id)
	delete(r.progress, id)
}

// desiredHash identifies a set of desired objects on a runtime.
func desiredHash(runtimeID string, objs []*unstructured.Unstructured) string {
	h := sha256.New()
	h.Write([]byte(runtimeID))
	for _, o := range objs {
		data, _ := json.Marshal(o.Object)
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// missing reports whether some applied object was not found.
func missing(rep kube.HealthReport) bool {
	for _, o := range rep.Objects {
		if !o.Ready && o.Message == "not found" {
			return true
		}
	}
	return false
}

// Finalize implements reconcile.Finalizer: it deletes everything the instance applied, on every runtime
// it is placed on, and waits until it is gone. A runtime that no longer exists has nothing left to clean
// up; a deletion with orphan abandons the objects. When a runtime cannot be reached for CleanupGrace
// after the deletion was asked for, the status says so and names the way out (orphan) and what would
// be left behind. Runtimes provisioned for the instance stay: they belong to their profile, which
// reclaims them when idle.
func (r *InstanceReconciler) Finalize(ctx context.Context, inst *api.WorkloadInstance) (reconcile.Result, error) {
	if inst.DeletionOrphan {
		for _, ps := range currentPlacements(inst) {
			r.doneDeleting(inst.ID + "/" + ps.RuntimeID)
		}
		if len(inst.Status.Objects) > 0 {
			reconcile.Eventf(ctx, api.EventWarning, ReasonOrphaned, "left in the cluster: %s", objectNames(inst.Status.Objects))
		}
		return reconcile.Result{}, nil
	}
	// What follows it may leave its runtimes now.
	if err := r.notifyFollowed(ctx, inst); err != nil {
		return reconcile.Result{}, err
	}
	var firstErr error
	pending := false
	var left []api.PlacementStatus
	for _, ps := range currentPlacements(inst) {
		done, err := r.cleanup(ctx, inst, ps)
		switch {
		case err != nil:
			r.cleanupBlocked(inst, err)
			firstErr = cmp.Or(firstErr, err)
			left = append(left, ps)
		case !done:
			pending = true
			left = append(left, ps)
		}
	}
	inst.Status.Placements = left
	summarize(inst)
	if firstErr != nil {
		return reconcile.Result{}, firstErr
	}
	if pending {
		return reconcile.Result{RequeueAfter: r.pollInterval()}, nil
	}
	return reconcile.Result{}, nil
}

// cleanup deletes what the instance applied on one runtime. It reports done when nothing is left (or
// the runtime is gone), and not done while objects are still going away; it never waits for them. The
// first pass finds the instance's objects with the API server's lists and deletes them (kube.DeleteOwned);
// later passes look only at what that pass left, in the cluster's cache (kube.Remaining), and the cache's
// delete events ask for the next pass as soon as the last of it is gone (kube.Cache.WhenGone), so that
// the deletion ends moments after the namespace does, without polling the cluster or holding a worker.
// A replica that did not make the first pass (or restarted since) makes it again.
func (r *InstanceReconciler) cleanup(ctx context.Context, inst *api.WorkloadInstance, ps api.PlacementStatus) (bool, error) {
	key := inst.ID + "/" + ps.RuntimeID
	if ps.Phase == api.PhasePending && len(ps.Objects) == 0 {
		return true, nil // it never reached the runtime (still being provisioned, say): nothing to delete
	}
	rt, cl, err := r.connect(ctx, ps.RuntimeID, true)
	if api.IsNotFound(err) {
		r.doneDeleting(key)
		return true, nil
	}
	var we *reconcile.WaitError
	if errors.As(err, &we) && we.Reason == ReasonRuntimeUnreachable {
		// Said at once, not after CleanupGrace: what blocks the deletion, and the way out.
		we.State += "; " + orphanHint(inst.Name, rt.Name)
		return false, we
	}
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	refs, again := r.deleting[key]
	r.mu.Unlock()
	var left []kube.AppliedRef
	if again {
		left, err = kube.Remaining(ctx, cl, refs)
	} else {
		owner := kube.Owner{InstanceID: inst.ID, Kind: api.KindWorkloadInstance, Namespace: render.Namespace(inst), Previous: kube.RefsOf(ps.Objects)}
		left, err = kube.DeleteOwned(ctx, cl, owner)
	}
	if err != nil {
		return false, fmt.Errorf("delete applied objects on kubernetes_runtime %q: %w", ps.Runtime, err)
	}
	if len(left) == 0 {
		r.doneDeleting(key)
		r.forget(key)
		return true, nil
	}
	inst.Status.Message = kube.StillPresent(left).Error()
	r.awaitGone(cl, key, inst.ID, left)
	return false, nil
}

// awaitGone remembers what is left of an instance's objects on a runtime, and asks for a reconcile of
// the instance when the cluster's cache sees it all gone. Objects of kinds the cache does not watch are
// looked at again by the requeue that Finalize asks for.
func (r *InstanceReconciler) awaitGone(cl *kube.Cluster, key, instanceID string, left []kube.AppliedRef) {
	stop, _ := cl.Cache().WhenGone(left, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := r.Client.WorkloadInstances().RequestReconcile(ctx, instanceID)
		switch {
		case api.IsNotFound(err):
			r.doneDeleting(key) // finalized already (by another replica, say): forget it
		case err != nil:
			reconcile.Logger(ctx).Warn("reconcile request after cleanup failed; the requeue will look again", "id", instanceID, "err", err)
		}
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deleting == nil {
		r.deleting = map[string][]kube.AppliedRef{}
		r.goneStops = map[string]func(){}
	}
	if prev := r.goneStops[key]; prev != nil {
		prev()
	}
	r.deleting[key] = left
	r.goneStops[key] = stop
}

// doneDeleting forgets the cleanup of key, and stops its watch.
func (r *InstanceReconciler) doneDeleting(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stop := r.goneStops[key]; stop != nil {
		stop()
	}
	delete(r.goneStops, key)
	delete(r.deleting, key)
}

// Condition types and event reasons of deletion.
const (
	// ReasonOrphaned is the event reason of a deletion that abandoned the instance's objects.
	ReasonOrphaned = "Orphaned"
)

// cleanupBlocked records, once the deletion has waited CleanupGrace, that it cannot finish and how to
// abandon the objects instead.
func (r *InstanceReconciler) cleanupBlocked(inst *api.WorkloadInstance, cause error) {
	grace := r.CleanupGrace
	if grace <= 0 {
		grace = 2 * time.Minute
	}
	if inst.DeletionRequestedAt == nil || time.Since(*inst.DeletionRequestedAt) < grace {
		return
	}
	msg := fmt.Sprintf("the instance's objects cannot be deleted from its cluster for %s (%v); delete it with ?orphan=true "+
		"(qleet delete --orphan, or terraform destroy, which does so and warns) to abandon them", time.Since(*inst.DeletionRequestedAt).Truncate(time.Second), cause)
	if len(inst.Status.Objects) > 0 {
		msg += ": " + objectNames(inst.Status.Objects)
	}
	inst.Status.SetCondition(api.Condition{Type: api.ConditionCleanupBlocked, Status: api.ConditionTrue, Reason: "RuntimeUnreachable", Message: msg})
}

// objectNames lists applied objects as "Kind/namespace/name, ...".
func objectNames(objs []api.AppliedObject) string {
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = kube.AppliedRef{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}.String()
	}
	return strings.Join(names, ", ")
}

// defaultRolloutPoll is PollInterval's default for a rollout. At 2s the poll came before the agent's
// report of a 3s rollout's completion, and cost a reconcile that found it not ready yet.
const defaultRolloutPoll = 5 * time.Second

// pollInterval is how often a deletion looks for objects still going away.
func (r *InstanceReconciler) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 2 * time.Second
}

// connect fetches a runtime and connects to its cluster. A runtime that is not Ready gives a WaitError,
// and a Failed one a Terminal error with its reason (reconcile.Deps.RequireReady). Cleanup may use a
// runtime being deleted (its cluster is still there until its own finalizer runs, which waits for its
// dependents), and gets the client's not-found error when the runtime is gone.
func (r *InstanceReconciler) connect(ctx context.Context, runtimeID string, cleanup bool) (*api.KubernetesRuntime, *kube.Cluster, error) {
	var rt *api.KubernetesRuntime
	var err error
	if cleanup {
		rt, err = r.lookups(ctx).Runtimes.Get(ctx, runtimeID)
		if err == nil {
			if c := unreachable(rt); c != nil {
				return rt, nil, &reconcile.WaitError{On: fmt.Sprintf("kubernetes_runtime %q", rt.Name), State: c.Message, Reason: ReasonRuntimeUnreachable, After: 10 * time.Second}
			}
		}
		if err == nil && rt.Status.Phase != api.PhaseReady && rt.Status.Phase != api.PhaseDeleting {
			err = reconcile.Wait(fmt.Sprintf("kubernetes_runtime %q", rt.Name), string(rt.Status.Phase), "KubernetesRuntimeNotReady", 5*time.Second)
		}
	} else {
		rt, err = r.lookups(ctx).Runtimes.RequireReady(ctx, runtimeID)
	}
	if err != nil {
		return rt, nil, err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return rt, nil, err
	}
	return rt, cl, nil
}

// ReasonRuntimeUnreachable is the Ready condition's reason of an instance whose deletion waits on a
// runtime whose cluster does not answer (its Connected condition is False).
const ReasonRuntimeUnreachable = api.ReasonRuntimeUnreachable

// orphanHint names the way out of a deletion that waits on a cluster that does not answer.
func orphanHint(instance, runtime string) string {
	return fmt.Sprintf("its objects there cannot be deleted until it answers; to abandon them instead: "+
		"qleet delete instance %s --orphan (or, deleting the runtime: qleet delete runtime %s --cascade --orphan)", instance, runtime)
}

// unreachable returns the runtime's Connected condition when it says the cluster does not answer.
func unreachable(rt *api.KubernetesRuntime) *api.Condition {
	for i := range rt.Status.Conditions {
		if c := &rt.Status.Conditions[i]; c.Type == "Connected" && c.Status == api.ConditionFalse {
			return c
		}
	}
	return nil
}

// recordDrift emits a DriftCorrected event per corrected object and records the last correction as a
// condition.
func recordDrift(ctx context.Context, inst *api.WorkloadInstance, applied []kube.AppliedRef) {
	var msgs []string
	for _, a := range applied {
		if a.Drift == "" {
			continue
		}
		msg := fmt.Sprintf("%s %q: %s", a.Kind, a.Name, a.Drift)
		reconcile.Eventf(ctx, api.EventNormal, ConditionDriftCorrected, "%s", msg)
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		return
	}
	inst.Status.SetCondition(api.Condition{
		Type: ConditionDriftCorrected, Status: api.ConditionTrue, Reason: ConditionDriftCorrected,
		Message: strings.Join(msgs, "; "), LastTransitionTime: time.Now().UTC(),
	})
}

func refKey(r kube.AppliedRef) string {
	return r.GroupKind().String() + "/" + r.Namespace + "/" + r.Name
}

func sameRefs(a, b []kube.AppliedRef) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[string]bool, len(a))
	for _, r := range a {
		set[refKey(r)] = true
	}
	for _, r := range b {
		if !set[refKey(r)] {
			return false
		}
	}
	return true
}

// mergeRefs returns a followed by the refs of b not in a.
func mergeRefs(a, b []kube.AppliedRef) []kube.AppliedRef {
	out := append([]kube.AppliedRef{}, a...)
	seen := make(map[string]bool, len(a))
	for _, r := range a {
		seen[refKey(r)] = true
	}
	for _, r := range b {
		if !seen[refKey(r)] {
			out = append(out, r)
		}
	}
	return out
}

func unknownHealth(refs []kube.AppliedRef) []api.AppliedObject {
	out := make([]api.AppliedObject, len(refs))
	for i, r := range refs {
		out[i] = api.AppliedObject{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Message: "not checked: the last apply failed"}
	}
	return out
}
