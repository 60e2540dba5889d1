// Package support reconciles support_services: add-ons (ingress, cert-manager, external-dns,
// metrics-server) installed on a runtime from a pinned Helm chart, and removed from it on delete.
// Controllers create them, owned, when a dependency needs one; the reconcile runtime garbage-collects an
// owned one a grace period after its last owner and consumer are gone. One an operator declares stays.
package support

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/controlplane/requirements"
)

// Reconciler reconciles support_services.
type Reconciler struct {
	// Client reads runtimes (a controller token) and counts consumers.
	Client *client.Client
	// Connector connects to runtimes' clusters.
	Connector *kube.Connector
	// ChartDir holds local charts by type (<dir>/ingress, ...); a type found there is installed from it,
	// with QleetOS's values for the upstream chart (so that a copy of the pinned upstream chart works
	// there), unless the support service names a repository. Empty: upstream charts only.
	ChartDir string
	// HelmCacheDir caches downloaded charts (default: the renderer's).
	HelmCacheDir string
	// ChartMirror is a chart repository (https, http or oci URL) that holds the pinned upstream charts
	// under their upstream names and versions, used instead of each chart's upstream repository. A
	// support service that names its own repository, or whose type the chart directory holds, does not
	// use it. Empty: the upstream repositories.
	ChartMirror string
	// OwnerGrace is how long a support service a controller created outlives its last owner and
	// consumer before it removes itself (default 5m, as reconcile.Config's). The removal is scheduled
	// for exactly the end of the grace: the last consumer's going notifies the support service (the
	// store notifies what a finalized object referenced), and it looks again when the grace ends.
	OwnerGrace time.Duration
}

// lookups are the reads of other objects that the runtime hands the reconcile (reconcile.LookupsFrom).
func (r *Reconciler) lookups(ctx context.Context) *reconcile.Lookups {
	return reconcile.LookupsFrom(ctx, r.Client)
}

// renderers hold one renderer (with its cache of downloaded charts) per chart and cache directory.
var renderers sync.Map // [2]string{ChartDir, HelmCacheDir} -> *render.Renderer

// renderer is the renderer of the reconciler's chart and cache directories.
func (r *Reconciler) renderer() *render.Renderer {
	v, _ := renderers.LoadOrStore([2]string{r.ChartDir, r.HelmCacheDir}, &render.Renderer{ChartDir: r.ChartDir, HelmCacheDir: r.HelmCacheDir})
	return v.(*render.Renderer)
}

// Reconcile installs (or upgrades) the support service's chart on its runtime and reports its health.
//
// A support service a controller created removes itself once unused for the owner grace: see usage.
// A chart that cannot be fetched stalls it (ReasonChartUnreachable): whoever waits on it stops with
// the reason, and it is retried with backoff until the chart can be fetched.
func (r *Reconciler) Reconcile(ctx context.Context, ss *api.SupportService) (reconcile.Result, error) {
	left, removed, err := r.usage(ctx, ss)
	if err != nil || removed {
		return reconcile.Result{}, err
	}
	rt, err := r.lookups(ctx).Runtimes.RequireReady(ctx, ss.Spec.RuntimeID)
	if err != nil {
		return reconcile.Result{}, err
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return reconcile.Result{}, err
	}
	objs, source, err := r.render(ctx, ss, rt.Status.Version)
	if err != nil {
		var fe *render.FetchError
		if !errors.As(err, &fe) {
			return reconcile.Result{}, reconcile.Terminal(err)
		}
		stall := &reconcile.Stall{Reason: ReasonChartUnreachable, Message: unreachableMessage(ss, err)}
		if left > 0 {
			// Unused: nothing waits on it, and its grace ends first.
			return reconcile.Result{RequeueAfter: left, Stalled: stall}, nil
		}
		return reconcile.Result{Stalled: stall}, err // retried with the runtime's backoff
	}
	ss.Status.Chart, ss.Status.Namespace = source, namespace(ss)
	previous := kube.RefsOf(ss.Status.Objects)
	owner := kube.Owner{InstanceID: ss.ID, Kind: api.KindSupportService, Namespace: namespace(ss), Previous: previous, ClusterScoped: true}
	applied, err := kube.Apply(ctx, cl, owner, objs)
	if err != nil {
		var oe *kube.OwnershipError
		switch {
		case errors.As(err, &oe):
			return reconcile.Result{}, reconcile.Terminal(ownershipFailure(ss, rt.Name, oe))
		case kube.IsInvalid(err):
			return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("install %s: %w", ss.Spec.Type, err))
		}
		return reconcile.Result{}, fmt.Errorf("install %s: %w", ss.Spec.Type, err)
	}
	if len(previous) > 0 {
		if _, err := kube.Prune(ctx, cl, owner, applied); err != nil {
			return reconcile.Result{}, fmt.Errorf("prune: %w", err)
		}
	}
	rep := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{})
	ss.Status.Objects = rep.Objects
	if !rep.Ready {
		nr := rep.NotReady()
		ss.Status.Message = fmt.Sprintf("%s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{Recheck: left}, nil
}

// ReasonChartUnreachable is the reason of the Stalled condition of a support service whose chart
// cannot be fetched.
const ReasonChartUnreachable = "ChartUnreachable"

// unreachableMessage says that the chart cannot be fetched, why, and what an operator can do.
func unreachableMessage(ss *api.SupportService, err error) string {
	fix := "start the control plane with --support-chart-dir (charts on its disk) or --support-chart-mirror (a chart repository it can reach)"
	if ss.Spec.Repository != "" {
		fix = "make that repository reachable from the control plane, or change the support service's repository"
	}
	return fmt.Sprintf("%v. QleetOS retries with backoff and goes on by itself once the chart can be fetched; "+
		"if the chart repositories cannot be reached from here (air-gapped), %s", err, fix)
}

// ReasonGarbageCollected is the event reason of a support service that removed itself because it was
// unused for the owner grace.
const ReasonGarbageCollected = reconcile.ReasonGarbageCollected

// usage counts the support service's consumers (status.consumers) and records since when nothing
// needs it (status.unused_since): no consumer, and, for one a controller created, no owner left
// (gone, or being deleted). For one a controller created, it returns how much of the owner grace is
// left, or, once the grace has passed, deletes the support service and says so. One an operator
// declared is never removed (zero, false).
//
// It is driven by notifications, not by polling: when the last consumer (a gateway) is finalized,
// the store notifies what it referenced, this support service among them; the reconcile then
// schedules itself for exactly the end of the grace (Result.Recheck). Its runtime is told when the
// support service stops or starts being needed, so that a runtime provisioned from a profile counts
// its own grace from then.
func (r *Reconciler) usage(ctx context.Context, ss *api.SupportService) (time.Duration, bool, error) {
	owned := len(ss.Owners) > 0
	needed, n, err := neededBy(ctx, r.Client, ss)
	if err != nil {
		return 0, false, err
	}
	ss.Status.Consumers = n
	wasUnused := ss.Status.UnusedSince != nil
	switch {
	case needed:
		ss.Status.UnusedSince = nil
	case ss.Status.UnusedSince == nil:
		now := time.Now().UTC()
		ss.Status.UnusedSince = &now
	}
	if owned && wasUnused != (ss.Status.UnusedSince != nil) {
		if err := r.Client.KubernetesRuntimes().RequestReconcile(ctx, ss.Spec.RuntimeID); err != nil && !api.IsNotFound(err) {
			return 0, false, fmt.Errorf("tell kubernetes_runtime %q: %w", ss.Spec.RuntimeID, err)
		}
	}
	if !owned || ss.Status.UnusedSince == nil {
		return 0, false, nil
	}
	since := *ss.Status.UnusedSince
	if left := r.grace() - time.Since(since); left > 0 {
		return left, false, nil
	}
	err = r.Client.SupportServices().Delete(ctx, ss.ID, client.DeleteOptions{})
	if api.IsConflict(err) {
		return 0, false, fmt.Errorf("remove unused support service: something came to depend on it: %w", err)
	}
	if err != nil && !api.IsNotFound(err) {
		return 0, false, fmt.Errorf("remove unused support service: %w", err)
	}
	reconcile.Eventf(ctx, api.EventNormal, ReasonGarbageCollected, "deleted: nothing has needed it since %s, longer than the owner grace (%s)",
		since.Format(time.RFC3339), r.grace())
	return 0, true, nil
}

// neededBy reports whether a support service is needed, and how many objects use it: it is needed while
// any object references it, while an owner remains (not gone, not being deleted), and always when an
// operator declared it (no owners). Runtimes decide the same (cluster.supportNeeded): an owned support service that is not needed
// does not keep its runtime.
func neededBy(ctx context.Context, cl *client.Client, ss *api.SupportService) (bool, int, error) {
	n, err := reconcile.CountConsumers(ctx, cl, ss.ID)
	if err != nil {
		return false, 0, err
	}
	if n > 0 || len(ss.Owners) == 0 {
		return true, n, nil
	}
	for _, o := range ss.Owners {
		owner, err := cl.Raw(o.Kind).Get(ctx, o.ID)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, n, fmt.Errorf("get owner %s %q: %w", o.Kind, o.Name, err)
		}
		if owner.DeletionRequestedAt == nil {
			return true, n, nil
		}
	}
	return false, n, nil
}

func (r *Reconciler) grace() time.Duration {
	if r.OwnerGrace > 0 {
		return r.OwnerGrace
	}
	return 5 * time.Minute
}

// render renders the support service's chart: from the support chart directory when it holds the type
// (and no repository is named), else from the upstream (or given) repository at the pinned version.
// cert-manager also gets the ClusterIssuer that gateways name.
func (r *Reconciler) render(ctx context.Context, ss *api.SupportService, kubeVersion string) ([]*unstructured.Unstructured, string, error) {
	up := api.SupportCharts[ss.Spec.Type]
	h := &api.HelmSource{Repository: up.Repository, Chart: up.Chart, Version: up.Version, Values: defaultValues[ss.Spec.Type]}
	if ss.Spec.Version != "" {
		h.Version = ss.Spec.Version
	}
	source := fmt.Sprintf("%s %s from %s", h.Chart, h.Version, h.Repository)
	switch {
	case ss.Spec.Repository != "":
		h.Repository = ss.Spec.Repository
		source = fmt.Sprintf("%s %s from %s", h.Chart, h.Version, h.Repository)
	case r.hasLocal(ss.Spec.Type):
		h = &api.HelmSource{Chart: ss.Spec.Type, Values: h.Values} // an upstream chart copied there needs QleetOS's values too
		source = "local chart " + filepath.Join(r.ChartDir, ss.Spec.Type)
	case r.ChartMirror != "":
		h.Repository = r.ChartMirror
		source = fmt.Sprintf("%s %s from %s (mirror of %s)", h.Chart, h.Version, h.Repository, up.Repository)
	}
	if ss.Spec.Values != "" {
		h.Values = ss.Spec.Values
	}
	def := &api.WorkloadDefinition{Meta: api.Meta{Name: "qleet-" + ss.Spec.Type}, Spec: api.WorkloadDefinitionSpec{Helm: h, ClusterScoped: true}}
	inst := &api.WorkloadInstance{Meta: api.Meta{Name: "qleet-" + ss.Spec.Type}, Spec: api.WorkloadInstanceSpec{Namespace: namespace(ss)}}
	objs, err := r.renderer().Render(ctx, def, inst, kubeVersion)
	if err != nil {
		return nil, "", fmt.Errorf("render %s: %w", source, err)
	}
	if ss.Spec.Type == api.SupportCertManager {
		objs = append(objs, clusterIssuer())
	}
	return objs, source, nil
}

// defaultValues make the upstream charts install what gateways rely on: the qleet IngressClass and a
// labelled LoadBalancer Service, and cert-manager's CRDs.
var defaultValues = map[string]string{
	api.SupportIngress: `controller:
  ingressClass: qleet
  ingressClassResource:
    name: qleet
    controllerValue: k8s.io/ingress-nginx
  service:
    labels:
      qleetos.io/ingress-controller: "true"
`,
	api.SupportCertManager: `crds:
  enabled: true
extraArgs:
  - --enable-certificate-owner-ref=true
`,
	api.SupportExternalDNS: `sources: [ingress]
extraArgs: [--ingress-class=qleet]
`,
}

func clusterIssuer() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"selfSigned": map[string]any{}}}}
	u.SetAPIVersion("cert-manager.io/v1")
	u.SetKind("ClusterIssuer")
	u.SetName(api.ClusterIssuerName)
	return u
}

func (r *Reconciler) hasLocal(typ string) bool {
	if r.ChartDir == "" {
		return false
	}
	st, err := os.Stat(filepath.Join(r.ChartDir, typ, "Chart.yaml"))
	return err == nil && st.Mode().IsRegular()
}

// namespace is where a support service is installed.
func namespace(ss *api.SupportService) string {
	return api.SupportCharts[ss.Spec.Type].Namespace
}

// ownershipFailure says that installing the support service met an object QleetOS does not own. A
// support service cannot adopt (its chart is QleetOS's, and what is already there may be another
// installation of the add-on that others rely on), so it names the object and what a person can do.
func ownershipFailure(ss *api.SupportService, runtime string, oe *kube.OwnershipError) error {
	holder := "was not created by QleetOS"
	if oe.OwnedBy != "" {
		holder = fmt.Sprintf("belongs to another QleetOS owner (%s)", oe.OwnedBy)
	}
	return fmt.Errorf("install %s on kubernetes_runtime %q: %s already exists and %s; it was left unchanged. "+
		"Remove it from the cluster if nothing else uses it, or install %s on another runtime; "+
		"deleting this support service removes only what QleetOS made for it", ss.Spec.Type, runtime, oe.Ref, holder, ss.Spec.Type)
}

// Finalize removes what the support service installed: every object in the cluster labelled as its
// own, found by those labels, not only those its status lists, so that an install that failed part way
// (before its status recorded anything) leaves nothing behind. Objects without its ownership labels are
// never touched, and a namespace that holds anything else stays. A runtime that is gone has nothing
// left to remove, nor has one that cannot be reached when nothing was ever installed on it; a deletion
// with orphan leaves everything.
func (r *Reconciler) Finalize(ctx context.Context, ss *api.SupportService) (reconcile.Result, error) {
	if ss.DeletionOrphan {
		return reconcile.Result{}, nil
	}
	rt, err := r.lookups(ctx).Runtimes.Get(ctx, ss.Spec.RuntimeID)
	if api.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	installed := len(ss.Status.Objects) > 0 || ss.Status.Chart != ""
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		if !installed {
			return reconcile.Result{}, nil // the install never began there
		}
		return reconcile.Result{}, err
	}
	owner := kube.Owner{InstanceID: ss.ID, Kind: api.KindSupportService, Namespace: namespace(ss), Previous: r.searchRefs(ctx, ss, rt.Status.Version), ClusterScoped: true}
	err = kube.DeleteAll(ctx, cl, owner)
	if errors.Is(err, kube.ErrStillPresent) {
		ss.Status.Message = err.Error()
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("remove %s: %w", ss.Spec.Type, err)
	}
	return reconcile.Result{}, nil
}

// searchRefs are the objects whose kinds Finalize searches for the support service's labels, besides
// kube.SearchKinds: those its status lists, and those its chart renders (an install that failed part
// way may have made objects of kinds outside SearchKinds, such as an IngressClass or a webhook
// configuration, before the status recorded any). A chart that cannot be rendered now adds nothing.
func (r *Reconciler) searchRefs(ctx context.Context, ss *api.SupportService, kubeVersion string) []kube.AppliedRef {
	refs := kube.RefsOf(ss.Status.Objects)
	objs, _, err := r.render(ctx, ss, kubeVersion)
	if err != nil {
		reconcile.Logger(ctx).Debug("render for cleanup failed; searching the usual kinds", "type", ss.Spec.Type, "err", err)
		return refs
	}
	for _, o := range objs {
		refs = append(refs, kube.RefOf(o))
	}
	return refs
}

// Name is the name a controller gives the support service of a type on a runtime (requirements.Name).
func Name(typ, runtime string) string { return requirements.Name(typ, runtime) }
