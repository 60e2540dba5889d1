// Package gateway reconciles gateways (ingress routing and TLS for a workload instance, on every runtime
// it is placed on, with the support services that needs) and domain_names (the DNS records of the
// gateways whose hosts are in a zone).
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/requirements"
)

// ReasonInstallingSupport is the event reason of a support service a gateway asked for.
const ReasonInstallingSupport = "InstallingSupportService"

var certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// Reconciler reconciles gateways.
type Reconciler struct {
	// Client reads instances, definitions, runtimes (a controller token), support services and domain
	// names, and creates support services.
	Client *client.Client
	// Connector connects to runtimes' clusters.
	Connector *kube.Connector
	// RouteWait is how long a reconcile that has applied a route waits for its address and certificate
	// before it ends (default DefaultRouteWait; negative: it does not wait).
	RouteWait time.Duration
}

// lookups are the reads of other objects that the runtime hands the reconcile (reconcile.LookupsFrom).
func (r *Reconciler) lookups(ctx context.Context) *reconcile.Lookups {
	return reconcile.LookupsFrom(ctx, r.Client)
}

// Reconcile makes sure every runtime the instance is placed on has the support services the gateway
// needs (ingress; cert-manager with TLS; external-dns when a domain name holds a host), waits for them
// and for the instance, then applies an Ingress (and a Certificate) there and reports the address, URL
// and certificate per runtime.
//
// Nothing waits for the app to be Ready that does not need it: the support services go in as soon as
// the instance has placements, while its cluster and app still come up, and the route (Ingress,
// Certificate) as soon as the app is applied on a runtime. The gateway is Ready once the app is too.
//
// The domain names it was or is in are notified when its records change (its hosts, the domain names
// they are in, or its addresses): they have no timer of their own.
func (r *Reconciler) Reconcile(ctx context.Context, gw *api.Gateway) (reconcile.Result, error) {
	was, wasIn := dnsKey(gw), slices.Clone(gw.Status.DomainNames)
	res, err := r.reconcile(ctx, gw)
	if dnsKey(gw) != was {
		for _, d := range append(wasIn, gw.Status.DomainNames...) {
			if !slices.ContainsFunc(res.Notify, func(n api.ObjectRef) bool { return n.ID == d.ID }) {
				res.Notify = append(res.Notify, d)
			}
		}
	}
	return res, err
}

// dnsKey is what a gateway's DNS records are made of: its hosts, the domain names they are in, and its
// addresses.
func dnsKey(gw *api.Gateway) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q", gw.Spec.Hosts)
	for _, d := range gw.Status.DomainNames {
		b.WriteString(" " + d.ID)
	}
	for _, rs := range gw.Status.Runtimes {
		b.WriteString(" " + rs.RuntimeID + "=" + rs.Address)
	}
	return b.String()
}

func (r *Reconciler) reconcile(ctx context.Context, gw *api.Gateway) (reconcile.Result, error) {
	inst, instWait := r.lookups(ctx).Instances.RequireReady(ctx, gw.Spec.InstanceID)
	var we *reconcile.WaitError
	if instWait != nil && (inst == nil || inst.DeletionRequestedAt != nil || !errors.As(instWait, &we)) {
		return reconcile.Result{}, instWait // not there yet, going, or Failed: nothing to install for
	}
	port, err := r.port(ctx, gw, inst)
	if err != nil {
		return reconcile.Result{}, err
	}
	domains, err := r.domains(ctx, gw)
	if err != nil {
		return reconcile.Result{}, err
	}
	gw.Status.DomainNames = domains
	needs := requirements.ForGateway(&gw.Spec, len(domains) > 0)

	var used []api.ObjectRef
	var runtimes []api.GatewayRuntimeStatus
	var waitErr, firstErr, notApplied error
	var stall *reconcile.Stall
	for _, p := range inst.Status.Placements {
		if p.Phase == api.PhaseDeleting {
			continue
		}
		rs := api.GatewayRuntimeStatus{RuntimeID: p.RuntimeID, Runtime: p.Runtime, Phase: api.PhasePending}
		var last *api.GatewayRuntimeStatus // what the gateway reported there before
		for i, prev := range gw.Status.Runtimes {
			if prev.RuntimeID == p.RuntimeID {
				rs.Objects, last = prev.Objects, &gw.Status.Runtimes[i]
			}
		}
		ready := true
		for _, typ := range needs {
			ss, err := r.ensure(ctx, gw, p, typ)
			if err != nil {
				return reconcile.Result{}, err
			}
			used = append(used, api.ObjectRef{Kind: api.KindSupportService, ID: ss.ID, Name: ss.Name})
			if got, err := r.lookups(ctx).SupportServices.RequireReady(ctx, ss.ID); err != nil {
				ready = false
				rs.Message = err.Error()
				if waitErr == nil {
					waitErr = err
				}
				// A support service that cannot make progress (its chart cannot be fetched) stalls the
				// gateway with its reason, so that whoever waits on the gateway stops and is told why.
				if c := stalledOf(got); c != nil && stall == nil {
					stall = &reconcile.Stall{Reason: c.Reason, Message: fmt.Sprintf("support_service %q on kubernetes_runtime %q: %s", ss.Name, p.Runtime, c.Message)}
				}
			}
		}
		switch {
		case !ready:
		case len(p.Objects) == 0 || inst.Status.Namespace == "":
			// The app is not applied there yet, so its namespace may not exist: the route waits. The
			// instance stays Reconciling when it applies, which notifies nobody, so this wait looks
			// again, soon for a new app and slower as it ages (its Ready notifies the gateway anyway).
			rs.Message = fmt.Sprintf("waiting for workload_instance %q to be applied on kubernetes_runtime %q", inst.Name, p.Runtime)
			if notApplied == nil {
				notApplied = reconcile.Wait(fmt.Sprintf("workload_instance %q", inst.Name), "not applied on kubernetes_runtime "+strconv.Quote(p.Runtime)+" yet",
					"WorkloadInstanceNotApplied", reconcile.PollAfter(time.Second, 30*time.Second, inst.CreatedAt))
			}
			if last != nil {
				rs = *last // a route already there keeps serving
			}
		default:
			// The route goes in beside the app's rollout, so that its address and certificate are
			// there when the app is Ready; the gateway is Ready only then (instWait below).
			if err := r.route(ctx, gw, inst, port, &rs); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		runtimes = append(runtimes, rs)
	}
	gw.Status.SupportServices = used
	if instWait == nil {
		if err := r.leave(ctx, gw, runtimes); err != nil && firstErr == nil {
			firstErr = err
		}
	} else {
		// While the instance is not Ready (placed for the first time, or moving) the routes it leaves
		// keep serving, and their objects stay on record, until it is Ready where it goes.
		for _, prev := range gw.Status.Runtimes {
			if !slices.ContainsFunc(runtimes, func(c api.GatewayRuntimeStatus) bool { return c.RuntimeID == prev.RuntimeID }) {
				runtimes = append(runtimes, prev)
			}
		}
	}
	gw.Status.Runtimes = runtimes
	gw.Status.URL = gatewayURL(gw)
	switch {
	case firstErr != nil:
		return reconcile.Result{}, firstErr
	case waitErr != nil:
		return reconcile.Result{Stalled: stall}, waitErr
	case notApplied != nil:
		return reconcile.Result{}, notApplied
	case instWait != nil:
		return reconcile.Result{}, instWait
	case len(runtimes) == 0:
		return reconcile.Result{}, reconcile.Wait(fmt.Sprintf("workload_instance %q", inst.Name), "no placements", "WorkloadInstanceNotPlaced", 5*time.Second)
	}
	for _, rs := range runtimes {
		if rs.Phase != api.PhaseReady {
			gw.Status.Message = fmt.Sprintf("on kubernetes_runtime %q: %s", rs.Runtime, rs.Message)
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
	}
	return reconcile.Result{}, nil
}

// ensure returns the support service of a type on a placement's runtime, creating it (owned by the
// gateway) when none exists. One declared by an operator, under any name, is used as it is. Concurrent
// gateways meet on the deterministic name: the loser of the create finds the winner's.
func (r *Reconciler) ensure(ctx context.Context, gw *api.Gateway, p api.PlacementStatus, typ string) (*api.SupportService, error) {
	for ss, err := range r.lookups(ctx).SupportServicesReferencing(ctx, p.RuntimeID) {
		if err != nil {
			return nil, fmt.Errorf("list the support_services of kubernetes_runtime %q: %w", p.Runtime, err)
		}
		if ss.Spec.RuntimeID == p.RuntimeID && ss.Spec.Type == typ && ss.DeletionRequestedAt == nil {
			return ss, nil
		}
	}
	name := requirements.Name(typ, p.Runtime)
	ss, err := r.Client.SupportServices().Create(ctx, &api.SupportService{
		Meta: api.Meta{Name: name, Labels: map[string]string{"qleet.io/support-type": typ},
			Owners: []api.ObjectRef{{Kind: api.KindGateway, ID: gw.ID, Name: gw.Name}}},
		Spec: api.SupportServiceSpec{RuntimeID: p.RuntimeID, Type: typ},
	})
	if api.IsConflict(err) {
		return r.Client.SupportServices().GetByName(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("install %s on kubernetes_runtime %q: %w", typ, p.Runtime, err)
	}
	reconcile.Eventf(ctx, api.EventNormal, ReasonInstallingSupport, "installing %s on kubernetes_runtime %q: the gateway needs it and the runtime has none", typ, p.Runtime)
	return ss, nil
}

// port is the Service port the gateway routes to: its own, or the definition's first container port.
func (r *Reconciler) port(ctx context.Context, gw *api.Gateway, inst *api.WorkloadInstance) (int32, error) {
	if gw.Spec.Port != 0 {
		return gw.Spec.Port, nil
	}
	def, err := r.lookups(ctx).Definitions.Get(ctx, inst.Spec.DefinitionID)
	if err != nil {
		return 0, fmt.Errorf("get workload_definition: %w", err)
	}
	for _, c := range def.Spec.Containers {
		for _, p := range c.Ports {
			return p.ContainerPort, nil
		}
	}
	return 0, reconcile.Terminal(fmt.Errorf("workload_definition %q declares no container port: set the gateway's port", def.Name))
}

// domains returns the domain names whose zones hold one of the gateway's hosts.
func (r *Reconciler) domains(ctx context.Context, gw *api.Gateway) ([]api.ObjectRef, error) {
	var out []api.ObjectRef
	if len(gw.Spec.Hosts) == 0 {
		return nil, nil
	}
	for d, err := range r.Client.DomainNames().All(ctx, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list domain_names: %w", err)
		}
		if d.DeletionRequestedAt == nil && slices.ContainsFunc(gw.Spec.Hosts, func(h string) bool { return api.InZone(h, d.Spec.Zone) }) {
			out = append(out, api.ObjectRef{Kind: api.KindDomainName, ID: d.ID, Name: d.Name})
		}
	}
	return out, nil
}

// route applies the Ingress (and Certificate) on one runtime and reads back the address and certificate.
func (r *Reconciler) route(ctx context.Context, gw *api.Gateway, inst *api.WorkloadInstance, port int32, rs *api.GatewayRuntimeStatus) error {
	rt, err := r.lookups(ctx).Runtimes.RequireReady(ctx, rs.RuntimeID)
	if err != nil {
		rs.Message = err.Error()
		var we *reconcile.WaitError
		if errors.As(err, &we) {
			return nil
		}
		return err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		rs.Message = err.Error()
		return err
	}
	ns := inst.Status.Namespace
	objs := render(gw, inst.Name, ns, port)
	owner := kube.Owner{InstanceID: gw.ID, Kind: api.KindGateway, Namespace: ns, Previous: kube.RefsOf(rs.Objects)}
	applied, err := kube.Apply(ctx, cl, owner, objs)
	if err != nil {
		rs.Message = err.Error()
		if kube.IsInvalid(err) || kube.IsOwnershipConflict(err) {
			rs.Phase = api.PhaseFailed
			return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
		}
		return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
	}
	if len(rs.Objects) > 0 {
		if _, err := kube.Prune(ctx, cl, owner, applied); err != nil {
			return fmt.Errorf("prune on kubernetes_runtime %q: %w", rt.Name, err)
		}
	}
	rs.Objects = kube.HealthWith(ctx, cl, applied, kube.HealthOptions{}).Objects
	rs.Phase = api.PhaseReconciling
	wait := time.NewTimer(cmp.Or(r.RouteWait, DefaultRouteWait))
	defer wait.Stop()
	for {
		// Subscribe before reading, so that no change between the read and the wait is missed.
		changed, release := cl.Cache().Changed(gw.ID)
		done, err := r.readRoute(ctx, cl, gw, ns, rs)
		if done || err != nil {
			release()
			if err != nil {
				return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
			}
			return nil
		}
		select {
		case <-changed:
			release()
		case <-wait.C:
			release()
			return nil // the reconcile's RequeueAfter looks again
		case <-ctx.Done():
			release()
			return nil
		}
	}
}

// DefaultRouteWait is how long a reconcile that has applied a route waits, on the cluster's watch
// events, for its address and certificate before it ends and looks again later (Reconciler.RouteWait).
const DefaultRouteWait = 2 * time.Second

// readRoute reads the route's address and certificate into rs, from the cluster's watch cache (a
// change of either wakes the waiting reconcile) or, while that kind's watch is not synced, from the API
// server. It reports whether the route is Ready there.
func (r *Reconciler) readRoute(ctx context.Context, cl *kube.Cluster, gw *api.Gateway, ns string, rs *api.GatewayRuntimeStatus) (bool, error) {
	ing, err := cachedOrGet(ctx, cl, kube.AppliedRef{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Namespace: ns, Name: gw.Name},
		schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"})
	if err != nil {
		return false, fmt.Errorf("read ingress: %w", err)
	}
	lbs, _, _ := unstructured.NestedSlice(ing, "status", "loadBalancer", "ingress")
	for _, raw := range lbs {
		lb, _ := raw.(map[string]any)
		ip, _ := lb["ip"].(string)
		host, _ := lb["hostname"].(string)
		rs.Address = cmp.Or(ip, host)
	}
	if rs.Address == "" {
		rs.Message = "waiting for the ingress controller to give the route an address"
		return false, nil
	}
	rs.URL = runtimeURL(gw, rs.Address)
	if gw.Spec.TLSOn() {
		cert, err := cachedOrGet(ctx, cl, kube.AppliedRef{APIVersion: "cert-manager.io/v1", Kind: "Certificate", Namespace: ns, Name: gw.Name}, certificates)
		if err != nil {
			return false, fmt.Errorf("read certificate: %w", err)
		}
		rs.CertificateReady, rs.CertificateExpiry = certificateState(&unstructured.Unstructured{Object: cert})
		if !rs.CertificateReady {
			rs.Message = "waiting for cert-manager to issue the certificate"
			return false, nil
		}
	}
	rs.Phase, rs.Message = api.PhaseReady, ""
	return true, nil
}

// cachedOrGet returns an object QleetOS applied, from the cluster's watch cache, or from the API server
// when the cache cannot answer yet. An object not there yet is an error: the route was just applied.
func cachedOrGet(ctx context.Context, cl *kube.Cluster, ref kube.AppliedRef, gvr schema.GroupVersionResource) (map[string]any, error) {
	obj, err := cl.Cache().Get(ctx, ref)
	if err == nil && obj != nil {
		return obj, nil
	}
	if err != nil && !errors.Is(err, kube.ErrNotCached) {
		return nil, err
	}
	u, err := cl.Dynamic.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}

// leave deletes the gateway's objects from runtimes its instance no longer runs on.
func (r *Reconciler) leave(ctx context.Context, gw *api.Gateway, current []api.GatewayRuntimeStatus) error {
	for _, prev := range gw.Status.Runtimes {
		if slices.ContainsFunc(current, func(c api.GatewayRuntimeStatus) bool { return c.RuntimeID == prev.RuntimeID }) {
			continue
		}
		if err := r.remove(ctx, gw, prev); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the gateway's objects from one runtime; a runtime that is gone has none left.
func (r *Reconciler) remove(ctx context.Context, gw *api.Gateway, rs api.GatewayRuntimeStatus) error {
	if len(rs.Objects) == 0 {
		return nil
	}
	rt, err := r.lookups(ctx).Runtimes.Get(ctx, rs.RuntimeID)
	if api.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return err
	}
	owner := kube.Owner{InstanceID: gw.ID, Kind: api.KindGateway, Previous: kube.RefsOf(rs.Objects)}
	if err := kube.DeleteAll(ctx, cl, owner); err != nil && !errors.Is(err, kube.ErrStillPresent) {
		return fmt.Errorf("remove the route from kubernetes_runtime %q: %w", rt.Name, err)
	}
	// The TLS Secret cert-manager issued for the gateway's Certificate goes with it (cert-manager
	// leaves it unless run with owner references); a Secret of that name it did not issue for this
	// Certificate is left alone.
	for _, o := range rs.Objects {
		if o.Kind != "Certificate" {
			continue
		}
		sec, err := cl.Clientset.CoreV1().Secrets(o.Namespace).Get(ctx, gw.Name+"-tls", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the TLS secret on kubernetes_runtime %q: %w", rt.Name, err)
		}
		if sec.Annotations["cert-manager.io/certificate-name"] != o.Name {
			continue
		}
		if err := cl.Clientset.CoreV1().Secrets(o.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the TLS secret on kubernetes_runtime %q: %w", rt.Name, err)
		}
	}
	return nil
}

// Finalize removes the gateway's routes and certificates from every runtime, before the support services
// it used can go (they are its status references until it is gone).
func (r *Reconciler) Finalize(ctx context.Context, gw *api.Gateway) (reconcile.Result, error) {
	if gw.DeletionOrphan {
		return reconcile.Result{}, nil
	}
	for _, rs := range gw.Status.Runtimes {
		if err := r.remove(ctx, gw, rs); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// render makes the gateway's Ingress and, with TLS, its Certificate.
func render(gw *api.Gateway, service, ns string, port int32) []*unstructured.Unstructured {
	var paths []any
	for _, p := range gw.Spec.Paths {
		paths = append(paths, map[string]any{"path": p, "pathType": "Prefix", "backend": map[string]any{
			"service": map[string]any{"name": service, "port": map[string]any{"number": int64(port)}}}})
	}
	var rules []any
	if len(gw.Spec.Hosts) == 0 {
		rules = append(rules, map[string]any{"http": map[string]any{"paths": paths}})
	}
	for _, h := range gw.Spec.Hosts {
		rules = append(rules, map[string]any{"host": h, "http": map[string]any{"paths": paths}})
	}
	spec := map[string]any{"ingressClassName": api.IngressClassName, "rules": rules}
	redirect := "false"
	var out []*unstructured.Unstructured
	if gw.Spec.TLSOn() {
		hosts := make([]any, len(gw.Spec.Hosts))
		for i, h := range gw.Spec.Hosts {
			hosts[i] = h
		}
		spec["tls"] = []any{map[string]any{"hosts": hosts, "secretName": gw.Name + "-tls"}}
		if gw.Spec.RedirectHTTP == nil || *gw.Spec.RedirectHTTP {
			redirect = "true"
		}
		cert := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"secretName": gw.Name + "-tls", "dnsNames": hosts,
			"issuerRef": map[string]any{"name": api.ClusterIssuerName, "kind": "ClusterIssuer", "group": "cert-manager.io"},
		}}}
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		cert.SetName(gw.Name)
		cert.SetNamespace(ns)
		out = append(out, cert)
	}
	ing := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	ing.SetAPIVersion("networking.k8s.io/v1")
	ing.SetKind("Ingress")
	ing.SetName(gw.Name)
	ing.SetNamespace(ns)
	ing.SetAnnotations(map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": redirect, "nginx.ingress.kubernetes.io/force-ssl-redirect": redirect})
	return append(out, ing)
}

// certificateState reads a Certificate's Ready condition and expiry.
func certificateState(cert *unstructured.Unstructured) (bool, *time.Time) {
	var expiry *time.Time
	if s, _, _ := unstructured.NestedString(cert.Object, "status", "notAfter"); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			expiry = &t
		}
	}
	conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		if c["type"] == "Ready" {
			return c["status"] == "True", expiry
		}
	}
	return false, expiry
}

func runtimeURL(gw *api.Gateway, address string) string {
	scheme, host := "http", address
	if gw.Spec.TLSOn() {
		scheme = "https"
	}
	if len(gw.Spec.Hosts) > 0 {
		host = gw.Spec.Hosts[0]
	}
	path := "/"
	if len(gw.Spec.Paths) > 0 {
		path = gw.Spec.Paths[0]
	}
	return scheme + "://" + host + path
}

// gatewayURL is the gateway's URL: its first host's, or the first runtime's address.
func gatewayURL(gw *api.Gateway) string {
	for _, rs := range gw.Status.Runtimes {
		if rs.URL != "" {
			return rs.URL
		}
	}
	return ""
}

// stalledOf returns a support service's Stalled condition at its generation, if any.
func stalledOf(ss *api.SupportService) *api.Condition {
	if ss == nil {
		return nil
	}
	return api.StalledCondition(ss.Generation, &ss.Status.Status)
}
