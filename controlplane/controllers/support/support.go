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
	// ChartDir holds local charts by type (<dir>/ingress, ...); a type found there is installed from it
	// unless the support service names a repository. Empty: upstream charts only.
	ChartDir string
	// HelmCacheDir caches downloaded charts (default: the renderer's).
	HelmCacheDir string

	once     sync.Once
	renderer *render.Renderer
	runtimes reconcile.Deps[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus]
}

func (r *Reconciler) init() *Reconciler {
	r.once.Do(func() {
		r.renderer = &render.Renderer{ChartDir: r.ChartDir, HelmCacheDir: r.HelmCacheDir}
		r.runtimes.Resource = r.Client.KubernetesRuntimes()
	})
	return r
}

// Reconcile installs (or upgrades) the support service's chart on its runtime and reports its health.
func (r *Reconciler) Reconcile(ctx context.Context, ss *api.SupportService) (reconcile.Result, error) {
	rt, err := r.init().runtimes.RequireReady(ctx, ss.Spec.RuntimeID)
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
		if errors.As(err, &fe) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, reconcile.Terminal(err)
	}
	ss.Status.Chart, ss.Status.Namespace = source, namespace(ss)
	previous := kube.RefsOf(ss.Status.Objects)
	owner := kube.Owner{InstanceID: ss.ID, Namespace: namespace(ss), Previous: previous, ClusterScoped: true}
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
	n, err := reconcile.CountConsumers(ctx, r.Client, ss.ID)
	if err != nil {
		return reconcile.Result{}, err
	}
	ss.Status.Consumers = n
	switch {
	case n > 0:
		ss.Status.UnusedSince = nil
	case ss.Status.UnusedSince == nil:
		now := time.Now().UTC().Truncate(time.Second)
		ss.Status.UnusedSince = &now
	}
	if !rep.Ready {
		nr := rep.NotReady()
		ss.Status.Message = fmt.Sprintf("%s %q is not ready: %s", nr.Kind, nr.Name, nr.Message)
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{}, nil
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
		h = &api.HelmSource{Chart: ss.Spec.Type}
		source = "local chart " + filepath.Join(r.ChartDir, ss.Spec.Type)
	}
	if ss.Spec.Values != "" {
		h.Values = ss.Spec.Values
	}
	def := &api.WorkloadDefinition{Meta: api.Meta{Name: "qleet-" + ss.Spec.Type}, Spec: api.WorkloadDefinitionSpec{Helm: h, ClusterScoped: true}}
	inst := &api.WorkloadInstance{Meta: api.Meta{Name: "qleet-" + ss.Spec.Type}, Spec: api.WorkloadInstanceSpec{Namespace: namespace(ss)}}
	objs, err := r.renderer.Render(ctx, def, inst, kubeVersion)
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
	rt, err := r.init().runtimes.Get(ctx, ss.Spec.RuntimeID)
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
	owner := kube.Owner{InstanceID: ss.ID, Namespace: namespace(ss), Previous: r.searchRefs(ctx, ss, rt.Status.Version), ClusterScoped: true}
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
