package dataservice

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
)

// Reasons a data service's home is where it is (api.DataHome.Reason).
const (
	HomeBySpecRuntime = "spec.runtime_id"
	HomeBySpecRegion  = "spec.region"
	HomeByConsumer    = "the primary region of its first consumer"
	HomeByCopy        = "the copy that held its data when it got one home"
)

// ReasonHomeChosen is the event reason of a data service's home being decided.
const ReasonHomeChosen = "HomeChosen"

// site is one runtime a data service is on, and what it does there.
type site struct {
	runtimeID string
	role      string
	// copy: the runtime holds a copy of the data from before the data service had one home.
	copy bool
	// replicas: read replicas run there for its region.
	replicas int
}

// sortConsumers orders a data service's consumers: the one it names first, then the oldest.
func sortConsumers(insts []*api.WorkloadInstance, named string) {
	slices.SortStableFunc(insts, func(a, b *api.WorkloadInstance) int {
		if (a.ID == named) != (b.ID == named) {
			if a.ID == named {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
}

// primaryPlacement is where an instance runs first: its pinned runtime, or its placement in the first
// region it names (else its first placement). ok is false while it is placed nowhere.
func primaryPlacement(inst *api.WorkloadInstance) (id, region string, ok bool) {
	if inst.Spec.RuntimeID != "" {
		return inst.Spec.RuntimeID, "", true
	}
	first := ""
	if p := inst.Spec.Placement; p != nil && len(p.Regions) > 0 {
		first = p.Regions[0]
	}
	var fallback *api.PlacementStatus
	for i, p := range inst.Status.Placements {
		if p.Phase == api.PhaseDeleting || p.RuntimeID == "" {
			continue
		}
		if p.Region == first {
			return p.RuntimeID, p.Region, true
		}
		if fallback == nil {
			fallback = &inst.Status.Placements[i]
		}
	}
	if fallback != nil {
		return fallback.RuntimeID, fallback.Region, true
	}
	return "", "", false
}

// chooseHome decides where the data service lives. A home that holds data stays: a spec asking for
// another one fails the data service with the reason (data is not moved between clusters). Without a
// home yet, it is spec.runtime_id, else the runtime of an existing copy (a data service from before it
// had one home), else a runtime in spec.region (a consumer's there if any), else its first consumer's
// primary placement. nil: no consumer is placed yet.
func (r *Reconciler[S, T]) chooseHome(ctx context.Context, svc Service, prev *api.DataHome, prevRuntimes []api.DataRuntimeStatus, insts []*api.WorkloadInstance) (*api.DataHome, error) {
	if prev != nil && holdsData(prevRuntimes, prev.RuntimeID) {
		switch {
		case svc.HomeRuntimeID != "" && svc.HomeRuntimeID != prev.RuntimeID:
			return nil, reconcile.Terminal(fmt.Errorf("spec.runtime_id asks for another home, but its data is on kubernetes_runtime %q; QleetOS does not move data between clusters: restore a backup into a new %s there, or set spec.runtime_id back", prev.Runtime, svc.Kind))
		case svc.HomeRuntimeID == "" && svc.HomeRegion != "" && prev.Region != "" && svc.HomeRegion != prev.Region:
			return nil, reconcile.Terminal(fmt.Errorf("spec.region asks for a home in %q, but its data is on kubernetes_runtime %q in %q; QleetOS does not move data between regions: restore a backup into a new %s there, or set spec.region back", svc.HomeRegion, prev.Runtime, prev.Region, svc.Kind))
		}
		return prev, nil
	}
	home := func(id, reason string) (*api.DataHome, error) {
		rt, err := r.lookups(ctx).Runtimes.Get(ctx, id)
		if api.IsNotFound(err) {
			return nil, reconcile.Wait(fmt.Sprintf("kubernetes_runtime %s, its home", id), "not found", "HomeRuntimeMissing", 0)
		}
		if err != nil {
			return nil, err
		}
		return &api.DataHome{RuntimeID: rt.ID, Runtime: rt.Name, Region: cmp.Or(rt.Spec.Region, rt.Status.Region), Reason: reason}, nil
	}
	if svc.HomeRuntimeID != "" {
		return home(svc.HomeRuntimeID, HomeBySpecRuntime)
	}
	if h, err := r.homeFromCopies(ctx, prevRuntimes, insts, home); h != nil || err != nil {
		return h, err
	}
	if svc.HomeRegion != "" {
		return r.homeInRegion(ctx, svc.HomeRegion, insts, home)
	}
	for _, inst := range insts {
		if id, _, ok := primaryPlacement(inst); ok {
			return home(id, HomeByConsumer)
		}
	}
	return nil, nil
}

// holdsData reports whether the data service has applied anything on the runtime.
func holdsData(rts []api.DataRuntimeStatus, runtimeID string) bool {
	return slices.ContainsFunc(rts, func(rs api.DataRuntimeStatus) bool {
		return rs.RuntimeID == runtimeID && (rs.Role == "" || rs.Role == api.DataRoleHome) && (len(rs.Objects) > 0 || rs.CloudID != "")
	})
}

// homeFromCopies picks the home of a data service written before data services had one home, which may
// run on several runtimes, each with its own data: the copy where its first consumer runs first, else
// the first copy. The others are kept as they are (site.copy) and the choice is said in an event.
func (r *Reconciler[S, T]) homeFromCopies(ctx context.Context, prevRuntimes []api.DataRuntimeStatus, insts []*api.WorkloadInstance, home func(id, reason string) (*api.DataHome, error)) (*api.DataHome, error) {
	var copies []string
	for _, rs := range prevRuntimes {
		if rs.Role == "" && (len(rs.Objects) > 0 || rs.CloudID != "") {
			copies = append(copies, rs.RuntimeID)
		}
	}
	if len(copies) == 0 {
		return nil, nil
	}
	chosen := copies[0]
	for _, inst := range insts {
		if id, _, ok := primaryPlacement(inst); ok && slices.Contains(copies, id) {
			chosen = id
			break
		}
	}
	h, err := home(chosen, HomeByCopy)
	if err != nil {
		return nil, err
	}
	others := len(copies) - 1
	reconcile.Eventf(ctx, api.EventWarning, ReasonHomeChosen, "the copy on kubernetes_runtime %q became its one home: every consumer now uses it; %d other copy(ies) keep their data, unused, until it is deleted", h.Runtime, others)
	return h, nil
}

// homeInRegion picks a runtime in the region: a consumer's there, else the first Ready one by name.
func (r *Reconciler[S, T]) homeInRegion(ctx context.Context, region string, insts []*api.WorkloadInstance, home func(id, reason string) (*api.DataHome, error)) (*api.DataHome, error) {
	for _, inst := range insts {
		for _, p := range inst.Status.Placements {
			if p.Region == region && p.RuntimeID != "" && p.Phase != api.PhaseDeleting {
				return home(p.RuntimeID, HomeBySpecRegion)
			}
		}
	}
	var best *api.KubernetesRuntime
	for rt, err := range r.Client.KubernetesRuntimes().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list kubernetes_runtimes: %w", err)
		}
		if cmp.Or(rt.Spec.Region, rt.Status.Region) == region && rt.Status.Phase == api.PhaseReady && rt.DeletionRequestedAt == nil &&
			(best == nil || rt.Name < best.Name) {
			best = rt
		}
	}
	if best == nil {
		// A runtime created there, or a profile's runtime there becoming Ready, ends the wait at once
		// (Kinds); the timer is for a runtime of no profile becoming Ready, which no write announces.
		return nil, &reconcile.WaitError{On: fmt.Sprintf("a Ready kubernetes_runtime in region %q, its home", region), State: "none yet",
			Reason: "NoRuntimeInHomeRegion", After: 5 * time.Second, Kinds: []string{api.KindKubernetesRuntime, api.KindRuntimeProfile}}
	}
	return home(best.ID, HomeBySpecRegion)
}

// sites lists where the data service runs: its home first, then every other runtime a consumer runs
// on (access), then runtimes that only hold an old copy of its data.
func sites(home *api.DataHome, insts []*api.WorkloadInstance, prev []api.DataRuntimeStatus) []site {
	out := []site{{runtimeID: home.RuntimeID, role: api.DataRoleHome}}
	has := func(id string) bool { return slices.ContainsFunc(out, func(s site) bool { return s.runtimeID == id }) }
	for _, inst := range insts {
		for _, id := range runtimeIDs(inst) {
			if !has(id) {
				out = append(out, site{runtimeID: id, role: api.DataRoleAccess})
			}
		}
	}
	for _, rs := range prev {
		oldCopy := rs.Copy || (rs.Role == "" && len(rs.Objects) > 0)
		if rs.RuntimeID == home.RuntimeID || !oldCopy {
			continue
		}
		i := slices.IndexFunc(out, func(s site) bool { return s.runtimeID == rs.RuntimeID })
		if i < 0 {
			out = append(out, site{runtimeID: rs.RuntimeID, copy: true})
			continue
		}
		out[i].copy = true
	}
	return out
}

// exposedAddress is the address of the home's LoadBalancer Service, once it has one.
func exposedAddress(ctx context.Context, cl *kube.Cluster, ns string) (string, error) {
	s, err := cl.Clientset.CoreV1().Services(ns).Get(ctx, render.ExposeService, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a := cmp.Or(in.IP, in.Hostname); a != "" {
			return a, nil
		}
	}
	return "", nil
}

// accessObjects give a runtime that is not the home what its consumers need to reach the home: a copy of
// the credentials, and (for a home in a cluster) an alias Service whose endpoint is the home's address.
func accessObjects(svc Service, address string, inCluster bool, creds map[string][]byte, replicas int) []*unstructured.Unstructured {
	ns, port := svc.Namespace, svc.Port
	data := map[string]any{}
	for k, v := range creds {
		data[k] = base64.StdEncoding.EncodeToString(v)
	}
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": render.AccessCredentialsSecret, "namespace": ns}, "type": "Opaque", "data": data},
	}
	if inCluster {
		ports := []any{map[string]any{"name": "main", "port": int64(port), "targetPort": int64(port)}}
		if ip, err := netip.ParseAddr(address); err == nil {
			family := "IPv4"
			if ip.Is6() {
				family = "IPv6"
			}
			objs = append(objs,
				map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": render.AccessService, "namespace": ns},
					"spec": map[string]any{"ports": ports}},
				map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
					"metadata":    map[string]any{"name": render.AccessService, "namespace": ns, "labels": map[string]any{"kubernetes.io/service-name": render.AccessService}},
					"addressType": family,
					"endpoints":   []any{map[string]any{"addresses": []any{address}, "conditions": map[string]any{"ready": true}}},
					"ports":       []any{map[string]any{"name": "main", "port": int64(port), "protocol": "TCP"}}})
		} else {
			objs = append(objs, map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": render.AccessService, "namespace": ns},
				"spec": map[string]any{"type": "ExternalName", "externalName": address, "ports": ports}})
		}
		if replicas > 0 {
			objs = append(objs, replicaObjects(svc, fmt.Sprintf("%s.%s.svc.cluster.local", render.AccessService, ns), render.AccessCredentialsSecret, replicas)...)
		}
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out
}

// access makes the home reachable on a runtime that is not the home, for the consumers there.
func (r *Reconciler[S, T]) access(ctx context.Context, id, name string, svc Service, home *api.DataRuntimeStatus, address string, creds map[string][]byte, consumers []string, rs *api.DataRuntimeStatus) error {
	rt, err := r.lookups(ctx).Runtimes.RequireReady(ctx, rs.RuntimeID)
	if rt != nil {
		rs.Runtime = rt.Name
	}
	if err != nil {
		return err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return err
	}
	ns := svc.Namespace
	if err := ownNamespace(ctx, cl, ns, id, rs.Copy); err != nil {
		return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
	}
	inCluster := home.CloudID == ""
	objs := accessObjects(svc, address, inCluster, creds, rs.Replicas)
	owner := kube.Owner{InstanceID: id, Kind: svc.Kind, Namespace: ns, Previous: kube.RefsOf(rs.Objects)}
	applied, err := kube.Apply(ctx, cl, owner, objs)
	if err != nil {
		if kube.IsInvalid(err) || kube.IsOwnershipConflict(err) {
			return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
		}
		return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
	}
	rep := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{})
	if rs.Copy {
		// An old copy's objects stay, listed, to be deleted with the data service.
		rs.Objects = mergeObjects(rs.Objects, rep.Objects)
	} else {
		if err := pruneDropped(ctx, cl, owner, applied); err != nil {
			return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
		}
		rs.Objects = rep.Objects
	}
	rs.Namespace, rs.Port = ns, home.Port
	rs.Host = fmt.Sprintf("%s.%s.svc.cluster.local", render.AccessService, ns)
	rs.ReadHost = ""
	if !inCluster {
		rs.Host, rs.Endpoint, rs.Region, rs.CloudID = home.Host, home.Endpoint, home.Region, home.CloudID
		if r.AWS != nil && rt.Spec.Provider == api.ProviderEKS && svc.Kind == api.KindBucket {
			if err := r.AWS.bucketAccess(ctx, cl, id, name, svc, home, rt, consumers); err != nil {
				return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
			}
		}
		if r.AWS != nil && rt.Spec.Provider == api.ProviderEKS && (rs.Replicas > 0 || len(rs.ReplicaCloudIDs) > 0) {
			ready, err := r.AWS.syncReplicas(ctx, rt, id, name, svc, home, rs.Replicas, rs)
			if err != nil {
				return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
			}
			if !ready {
				rs.Phase = api.PhaseReconciling
				return nil
			}
		}
	} else if rs.Replicas > 0 {
		rs.ReadHost = readHost(ns)
		if !rep.Ready {
			nr := rep.NotReady()
			rs.Phase, rs.Message = api.PhaseReconciling, fmt.Sprintf("read replicas: %s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
			return nil
		}
	}
	rs.Phase, rs.Message = api.PhaseReady, ""
	return nil
}

// mergeObjects keeps what was applied before (an old copy's objects stay listed, to be deleted with the
// data service) and adds or refreshes what was applied now.
func mergeObjects(prev, now []api.AppliedObject) []api.AppliedObject {
	out := slices.Clone(now)
	for _, p := range prev {
		if !slices.ContainsFunc(now, func(o api.AppliedObject) bool {
			return o.APIVersion == p.APIVersion && o.Kind == p.Kind && o.Namespace == p.Namespace && o.Name == p.Name
		}) {
			out = append(out, p)
		}
	}
	return out
}
