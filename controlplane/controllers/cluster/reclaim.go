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

// usage counts the instances placed on the runtime and, for a runtime provisioned from a profile with
// reclaim_after, the data it holds (status.data), and deletes it once nothing has been placed there,
// and it has held no data, for that long. A runtime with instances placed on it, or data, is looked at
// again every recheck, so that its failure, or the data's release, is seen soon. It never deletes a
// runtime while anything is placed there (the API refuses, too: placements reference their runtime),
// nor one that holds data, nor one a user declared. It returns how soon to look again.
func (r *Reconciler) usage(ctx context.Context, rt *api.KubernetesRuntime) (time.Duration, error) {
	n := 0
	for _, err := range r.Client.WorkloadInstances().All(ctx, client.ListOptions{References: rt.ID}) {
		if err != nil {
			return 0, fmt.Errorf("list instances placed on the runtime: %w", err)
		}
		n++
	}
	rt.Status.Placements = n
	after, err := r.reclaimAfter(ctx, rt)
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
	if inUse {
		rt.Status.IdleSince = nil
	} else if rt.Status.IdleSince == nil {
		now := time.Now().UTC().Truncate(time.Second)
		rt.Status.IdleSince = &now
	}
	if after == 0 {
		if n > 0 {
			// Instances placed here fail over when it stops answering: look at it regularly, not only
			// at the drift interval, so that failover starts within a recheck of the failure.
			return r.recheck(), nil
		}
		return 0, nil
	}
	if inUse {
		return min(after, r.recheck()), nil // its instances may move off, its data be released, without telling it
	}
	idle := time.Since(*rt.Status.IdleSince)
	if idle < after {
		return min(after-idle, r.recheck()), nil
	}
	err = r.Client.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{})
	if api.IsConflict(err) {
		return r.recheck(), nil // something was placed on it meanwhile
	}
	if err != nil {
		return 0, fmt.Errorf("reclaim: %w", err)
	}
	reconcile.Eventf(ctx, api.EventNormal, ReasonReclaimed, "deleted: nothing has been placed on it since %s, longer than its runtime_profile's reclaim_after (%s)",
		rt.Status.IdleSince.Format(time.RFC3339), after)
	return 0, nil
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

// reclaimAfter is the reclaim_after of the profile that owns the runtime; zero when none does, or when
// the profile never reclaims.
func (r *Reconciler) reclaimAfter(ctx context.Context, rt *api.KubernetesRuntime) (time.Duration, error) {
	for _, o := range rt.Owners {
		if o.Kind != api.KindRuntimeProfile {
			continue
		}
		p, err := r.Client.RuntimeProfiles().Get(ctx, o.ID)
		if api.IsNotFound(err) {
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
