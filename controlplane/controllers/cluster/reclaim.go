package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// ReasonReclaimed is the event reason of a runtime removed because nothing was placed on it for its
// profile's reclaim_after.
const ReasonReclaimed = "Reclaimed"

// ConditionHoldsData is the condition of a runtime that may be reclaimed but holds the data of
// databases or buckets (status.data): True while it does, which keeps it. Its message says how to
// release the data.
const ConditionHoldsData = "HoldsData"

// ReasonReclaimHeld is the event reason, and the HoldsData condition's, of a runtime kept because it
// holds data.
const ReasonReclaimHeld = "ReclaimHeld"

// Namespace prefixes of data services (render.DatabaseNamespace, render.BucketNamespace): the namespace
// says the kind and the name.
var dataNamespaces = []struct{ prefix, kind string }{
	{render.DatabaseNamespace(""), api.KindDatabase},
	{render.BucketNamespace(""), api.KindBucket},
}

// ConditionReclaim is the condition of a runtime provisioned from a profile that nothing needs: True
// while it waits out its grace, with a message that says why it goes and when. Its
// LastTransitionTime is when the grace began.
const ConditionReclaim = "Reclaim"

// Reasons of the Reclaim condition: the profile's reclaim_after, or the owner grace of a runtime
// whose profile is gone.
const (
	ReasonIdle           = "Idle"
	ReasonProfileDeleted = "ProfileDeleted"
)

// usage counts the instances placed on the runtime and, for a runtime provisioned from a profile that
// may remove it, the data it holds (status.data) and the support services that still need it, and
// deletes it once nothing has needed it for its grace: the profile's reclaim_after, or, once the
// profile is gone, the owner grace (counted from the later of the profile's going and the runtime's
// last use). An owned support service that nothing needs any more (see supportNeeded) does not keep
// it: it is deleted with the runtime.
//
// The removal is driven by notifications: the store notifies the runtime when an object that
// referenced it is finalized (an instance placed there, a support service installed there), a
// support service tells it when it stops being needed, and a profile tells its runtimes when it is
// deleted. The reconcile then schedules itself for exactly the end of the grace. A runtime with
// instances placed on it, or data, is still looked at every recheck, so that its failure, or the
// data's release, is seen soon. It never deletes a runtime while anything is placed there (the API
// refuses, too: placements reference their runtime), nor one that holds data, nor one a user
// declared. It returns how soon to look again.
func (r *Reconciler) usage(ctx context.Context, rt *api.KubernetesRuntime) (time.Duration, error) {
	// Counted by the store from its reference index: at 10,000 instances a runtime, a listing was 10
	// pages of whole instances at every recheck and restart (make bench, sim).
	n, err := r.Client.WorkloadInstances().Count(ctx, client.ListOptions{References: rt.ID})
	if err != nil {
		return 0, fmt.Errorf("count instances placed on the runtime: %w", err)
	}
	rt.Status.Placements = n
	after, reason, why, err := r.reclaimAfter(ctx, rt)
	if err != nil {
		return 0, err
	}
	var held []api.RuntimeData
	if after > 0 {
		// Only a runtime that may be reclaimed looks: the data keeps it, and the runtime's status says
		// so. A reclaim that could not look does not happen.
		if held, err = r.heldData(ctx, rt); err != nil {
			return 0, fmt.Errorf("look for databases' and buckets' data on the runtime: %w", err)
		}
	}
	holding(ctx, rt, held)
	inUse := n > 0 || len(held) > 0
	var spare []*api.SupportService
	if after > 0 && !inUse {
		var needed bool
		if spare, needed, err = r.supportServices(ctx, rt); err != nil {
			return 0, err
		}
		inUse = needed
	}
	if inUse {
		rt.Status.IdleSince = nil
	} else if rt.Status.IdleSince == nil {
		now := time.Now().UTC()
		rt.Status.IdleSince = &now
	}
	if after == 0 || inUse {
		rt.Status.RemoveCondition(ConditionReclaim)
	}
	if after == 0 {
		// Instances placed here fail over when it stops answering: the connector's reachability
		// reports (ReportReachability) and the cluster's watches tell the runtime at once, and its new
		// phase notifies the instances. Nothing needs looking at on a timer.
		return 0, nil
	}
	if inUse {
		return min(after, r.recheck()), nil // its instances may move off, its data be released, without telling it
	}
	since := *rt.Status.IdleSince
	if reason == ReasonProfileDeleted {
		// The owner grace counts from when the profile went, too: the condition keeps when that was seen.
		seen := time.Now().UTC()
		for _, c := range rt.Status.Conditions {
			if c.Type == ConditionReclaim && c.Reason == ReasonProfileDeleted && !c.LastTransitionTime.IsZero() {
				seen = c.LastTransitionTime
			}
		}
		if seen.After(since) {
			since = seen
		}
	}
	if left := after - time.Since(since); left > 0 {
		rt.Status.SetCondition(api.Condition{Type: ConditionReclaim, Status: api.ConditionTrue, Reason: reason, LastTransitionTime: since,
			Message: fmt.Sprintf("nothing has needed it since %s: it is deleted at %s (%s)", since.Format(time.RFC3339),
				since.Add(after).Format(time.RFC3339), why)})
		return left, nil
	}
	for _, ss := range spare {
		// The cluster goes with the runtime: what the support service installed there goes with it.
		err := r.Client.SupportServices().Delete(ctx, ss.ID, client.DeleteOptions{Orphan: true})
		if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
			return 0, fmt.Errorf("reclaim: delete support_service %q: %w", ss.Name, err)
		}
	}
	err = r.Client.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{})
	if api.IsConflict(err) {
		// Something references it still: the support services being deleted (each one's going
		// notifies the runtime), or something placed on it meanwhile.
		return r.recheck(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("reclaim: %w", err)
	}
	reconcile.Eventf(ctx, api.EventNormal, ReasonReclaimed, "deleted: nothing has needed it since %s, longer than %s",
		since.Format(time.RFC3339), why)
	return 0, nil
}

// supportServices lists the support services installed on the runtime. It returns those a controller
// created that nothing needs any more (they go with the runtime), and whether any other needs the
// runtime: one an operator declared, or one still in use.
func (r *Reconciler) supportServices(ctx context.Context, rt *api.KubernetesRuntime) ([]*api.SupportService, bool, error) {
	var spare []*api.SupportService
	for ss, err := range r.Client.SupportServices().All(ctx, client.ListOptions{References: rt.ID}) {
		if err != nil {
			return nil, false, fmt.Errorf("list support services on the runtime: %w", err)
		}
		needed, err := supportNeeded(ctx, r.Client, ss)
		if err != nil {
			return nil, false, err
		}
		if needed {
			return nil, true, nil
		}
		spare = append(spare, ss)
	}
	return spare, false, nil
}

// supportNeeded reports whether a support service is needed, as the support service controller
// decides it: one being deleted is not; one an operator declared (no owners) always is; one a
// controller created is while anything references it or an owner remains (not gone, not deleted).
func supportNeeded(ctx context.Context, cl *client.Client, ss *api.SupportService) (bool, error) {
	if ss.DeletionRequestedAt != nil {
		return false, nil
	}
	if len(ss.Owners) == 0 {
		return true, nil
	}
	used, err := reconcile.HasConsumers(ctx, cl, ss.ID)
	if err != nil || used {
		return used, err
	}
	for _, o := range ss.Owners {
		owner, err := cl.Raw(o.Kind).Get(ctx, o.ID)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("get owner %s %q of support_service %q: %w", o.Kind, o.Name, ss.Name, err)
		}
		if owner.DeletionRequestedAt == nil {
			return true, nil
		}
	}
	return false, nil
}

// heldData lists the databases' and buckets' data in the runtime's cluster: the namespaces of those
// that run there (QleetOS's ownership labels) and of those deleted with retain (api.LabelRetained,
// without ownership labels), each with its volume claims. Two list calls.
func (r *Reconciler) heldData(ctx context.Context, rt *api.KubernetesRuntime) ([]api.RuntimeData, error) {
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return nil, err
	}
	nss, err := cl.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []api.RuntimeData
	for _, ns := range nss.Items {
		d, ok := dataIn(&ns)
		if ok {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	pvcs, err := cl.Clientset.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list volume claims: %w", err)
	}
	for i := range out {
		for _, p := range pvcs.Items {
			if p.Namespace != out[i].Namespace {
				continue
			}
			size := p.Spec.Resources.Requests[corev1.ResourceStorage]
			out[i].Volumes = append(out[i].Volumes, fmt.Sprintf("%s (%s)", p.Name, size.String()))
		}
	}
	slices.SortFunc(out, func(a, b api.RuntimeData) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out, nil
}

// dataIn reports whether a namespace holds a database's or a bucket's data, and whose.
func dataIn(ns *corev1.Namespace) (api.RuntimeData, bool) {
	for _, dn := range dataNamespaces {
		name, ok := strings.CutPrefix(ns.Name, dn.prefix)
		if !ok || name == "" {
			continue
		}
		d := api.RuntimeData{Kind: dn.kind, Name: name, Namespace: ns.Name}
		switch {
		case ns.Labels[kube.LabelInstanceID] != "" && ns.Labels[kube.LabelManagedBy] == kube.ManagedByValue:
			return d, true // it runs here
		case ns.Labels[api.LabelRetained] != "":
			d.Name, d.Retained = ns.Labels[api.LabelRetained], true
			return d, true
		}
	}
	return api.RuntimeData{}, false
}

// holding records the data the runtime holds in its status and its HoldsData condition (removed when it
// holds none), and records an event when that data first keeps it.
func holding(ctx context.Context, rt *api.KubernetesRuntime, held []api.RuntimeData) {
	rt.Status.Data = held
	if len(held) == 0 {
		rt.Status.RemoveCondition(ConditionHoldsData)
		return
	}
	msg := holdsMessage(held)
	was := false
	for _, c := range rt.Status.Conditions {
		if c.Type == ConditionHoldsData && c.Status == api.ConditionTrue {
			was = c.Message == msg
		}
	}
	rt.Status.SetCondition(api.Condition{Type: ConditionHoldsData, Status: api.ConditionTrue, Reason: ReasonReclaimHeld, Message: msg})
	if !was {
		reconcile.Eventf(ctx, api.EventNormal, ReasonReclaimHeld, "%s", msg)
	}
}

// holdsMessage says what data the runtime holds and how to release each.
func holdsMessage(held []api.RuntimeData) string {
	parts := make([]string, 0, len(held))
	for _, d := range held {
		vols := "no volume"
		if len(d.Volumes) > 0 {
			vols = "volume " + strings.Join(d.Volumes, ", ")
		}
		if d.Retained {
			parts = append(parts, fmt.Sprintf("%s %q deleted with retain keeps its %s and credentials in namespace %s: "+
				"to release it, delete the retained data (delete namespace %s on this runtime: the data is lost) "+
				"or move it (create %s %q again to take it back here, copy the data where it should live, then delete it without retain)",
				d.Kind, d.Name, vols, d.Namespace, d.Namespace, d.Kind, d.Name))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %q runs here with its %s in namespace %s: to release it, delete the %s "+
			"(without retain: the data is lost) or move its data where it should live first", d.Kind, d.Name, vols, d.Namespace, d.Kind))
	}
	return fmt.Sprintf("holds data, so it is in use and is not reclaimed: %s", strings.Join(parts, "; "))
}

// reclaimAfter is how long a runtime provisioned from a profile is kept once nothing needs it, with
// the reason of its Reclaim condition and a phrase that says where the time comes from: the profile's
// reclaim_after, or, when the profile is gone or being deleted, the owner grace. Zero when no profile
// owns the runtime (a user declared it), or when its profile never reclaims.
func (r *Reconciler) reclaimAfter(ctx context.Context, rt *api.KubernetesRuntime) (time.Duration, string, string, error) {
	for _, o := range rt.Owners {
		if o.Kind != api.KindRuntimeProfile {
			continue
		}
		gone := fmt.Sprintf("the owner grace (%s) after its runtime_profile %q was deleted", r.ownerGrace(), o.Name)
		p, err := r.Client.RuntimeProfiles().Get(ctx, o.ID)
		if api.IsNotFound(err) {
			return r.ownerGrace(), ReasonProfileDeleted, gone, nil
		}
		if err != nil {
			return 0, "", "", fmt.Errorf("get runtime_profile %q: %w", o.Name, err)
		}
		if p.DeletionRequestedAt != nil {
			return r.ownerGrace(), ReasonProfileDeleted, gone, nil
		}
		if p.Spec.ReclaimAfter == "" {
			return 0, "", "", nil
		}
		d, err := time.ParseDuration(p.Spec.ReclaimAfter)
		if err != nil {
			return 0, "", "", nil //nolint:nilerr // validated on write; an unreadable value reclaims nothing
		}
		return d, ReasonIdle, fmt.Sprintf("its runtime_profile %q's reclaim_after (%s)", o.Name, d), nil
	}
	return 0, "", "", nil
}

// Finalize tells the runtimes provisioned from the profile that it is going, so that each counts the
// owner grace from now (see usage) instead of learning it at a recheck.
func (r *ProfileReconciler) Finalize(ctx context.Context, p *api.RuntimeProfile) (reconcile.Result, error) {
	for rt, err := range r.Client.KubernetesRuntimes().All(ctx, client.ListOptions{LabelSelector: api.LabelProfile + "=" + p.Name}) {
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("list runtimes provisioned from the profile: %w", err)
		}
		if err := r.Client.KubernetesRuntimes().RequestReconcile(ctx, rt.ID); err != nil && !api.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("tell kubernetes_runtime %q: %w", rt.Name, err)
		}
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) ownerGrace() time.Duration {
	if r.OwnerGrace > 0 {
		return r.OwnerGrace
	}
	return 5 * time.Minute
}

func (r *Reconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 30 * time.Second
}
