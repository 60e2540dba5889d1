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
}

// lookups are the reads of other objects that the runtime hands the reconcile (reconcile.LookupsFrom).
func (r *Reconciler) lookups(ctx context.Context) *reconcile.Lookups {
	return reconcile.LookupsFrom(ctx, r.Client)
}

// Reconcile makes sure every runtime the instance runs on has the support services the gateway needs
// (ingress; cert-manager with TLS; external-dns when a domain name holds a host), waits for them, then
// applies an Ingress (and a Certificate) there and reports the address, URL and certificate per runtime.
func (r *Reconciler) Reconcile(ctx context.Context, gw *api.Gateway) (reconcile.Result, error) {
	inst, err := r.lookups(ctx).Instances.RequireReady(ctx, gw.Spec.InstanceID)
	if err != nil {
		return reconcile.Result{}, err
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
	var waitErr, firstErr error
	var stall *reconcile.Stall
	for _, p := range inst.Status.Placements {
		if p.Phase == api.PhaseDeleting {
			continue
		}
		rs := api.GatewayRuntimeStatus{RuntimeID: p.RuntimeID, Runtime: p.Runtime, Phase: api.PhasePending}
		for _, prev := range gw.Status.Runtimes {
			if prev.RuntimeID == p.RuntimeID {
				rs.Objects = prev.Objects
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
		if ready {
			if err := r.route(ctx, gw, inst, port, &rs); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		runtimes = append(runtimes, rs)
	}
	gw.Status.SupportServices = used
	if err := r.leave(ctx, gw, runtimes); err != nil && firstErr == nil {
		firstErr = err
	}
	gw.Status.Runtimes = runtimes
	gw.Status.URL = gatewayURL(gw)
	switch {
	case firstErr != nil:
		return reconcile.Result{}, firstErr
	case waitErr != nil:
		return reconcile.Result{Stalled: stall}, waitErr
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
	ing, err := cl.Clientset.NetworkingV1().Ingresses(ns).Get(ctx, gw.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read ingress on kubernetes_runtime %q: %w", rt.Name, err)
	}
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		rs.Address = cmp.Or(lb.IP, lb.Hostname)
	}
	if rs.Address == "" {
		rs.Message = "waiting for the ingress controller to give the route an address"
		return nil
	}
	rs.URL = runtimeURL(gw, rs.Address)
	if gw.Spec.TLSOn() {
		cert, err := cl.Dynamic.Resource(certificates).Namespace(ns).Get(ctx, gw.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read certificate on kubernetes_runtime %q: %w", rt.Name, err)
		}
		rs.CertificateReady, rs.CertificateExpiry = certificateState(cert)
		if !rs.CertificateReady {
			rs.Message = "waiting for cert-manager to issue the certificate"
			return nil
		}
	}
	rs.Phase, rs.Message = api.PhaseReady, ""
	return nil
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
