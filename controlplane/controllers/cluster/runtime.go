// Package cluster reconciles kubernetes_runtimes: it starts local (kubesim) clusters, connects to
// bring-your-own clusters by kubeconfig, and reports endpoint, version and node readiness.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kubesim"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/redact"
)

// ConditionConnected says whether the runtime's Kubernetes API answers, and since when it does not.
const ConditionConnected = "Connected"

// Reconciler reconciles kubernetes_runtimes.
type Reconciler struct {
	// Connector opens connections to clusters.
	Connector *kube.Connector
	// Local runs local runtimes' kubesim clusters; nil when this controller does not serve them.
	Local *kubesim.Supervisor
	// EKS provisions eks runtimes through AWS; nil when this controller does not serve them.
	EKS *EKS
	// Client counts the instances placed on each runtime and reclaims idle runtimes provisioned from
	// profiles; nil turns both off.
	Client *client.Client
	// RecheckInterval is how often a runtime whose node count follows demand, or that may be reclaimed,
	// is looked at again while Ready (default 30s; node autoscaling looks every 5s while it acts).
	RecheckInterval time.Duration
	// ScaleDownDelay is how long a node that autoscaling added must be idle before it is removed
	// (default 2m).
	ScaleDownDelay time.Duration
	// OwnerGrace is how long a runtime provisioned from a profile that is gone outlives its last use
	// (default 5m, as reconcile.Config's).
	OwnerGrace time.Duration

	nodes nodeScaler
}

// Reconcile connects to the runtime's cluster and reports what it finds.
func (r *Reconciler) Reconcile(ctx context.Context, rt *api.KubernetesRuntime) (reconcile.Result, error) {
	wasReady := rt.Status.Phase == api.PhaseReady && rt.Status.ObservedGeneration == rt.Generation
	if rt.Spec.Provider == api.ProviderLocal {
		if r.Local == nil {
			return reconcile.Result{}, reconcile.Terminal(errors.New("local runtimes need the all-in-one `qleet server` (this controller has no local data dir)"))
		}
		spec := kubesim.Spec{Name: rt.Name, Region: rt.Spec.Region, Zones: rt.Spec.Zones, Nodes: rt.Spec.Nodes}
		if err := r.Local.Ensure(ctx, rt.ID, spec); err != nil {
			return reconcile.Result{}, fmt.Errorf("start local cluster: %w", err)
		}
	}
	if rt.Spec.Provider == api.ProviderEKS {
		if r.EKS == nil {
			return reconcile.Result{}, reconcile.Terminal(errors.New("eks runtimes are not served by this controller (no AWS support configured)"))
		}
		if after, err := r.EKS.Ensure(ctx, rt); err != nil || after > 0 {
			return reconcile.Result{RequeueAfter: after}, err
		}
	}
	cl, err := r.Connector.Connect(ctx, rt)
	if err != nil {
		return reconcile.Result{}, reconcile.Terminal(err)
	}
	rt.Status.Endpoint = redact.URL(cl.Config.Host) // viewers read it: no userinfo
	// The probe is bounded (kube.DefaultProbeTimeout): a hung API server is found unreachable in
	// seconds, not at a request timeout. A cluster its prober already found unreachable is not asked
	// again: the prober asks for a reconcile as soon as it answers.
	var ver *version.Info
	err = cl.Reachable()
	if err == nil {
		ver, err = cl.Probe(ctx)
	}
	if err != nil {
		if !kube.Transient(err) {
			r.Connector.Forget(rt.ID) // the next attempt connects afresh (new credentials, say)
		}
		// A transient failure keeps the connection: its prober says when the cluster answers again.
		if !kube.Transient(err) && !wasReady && rt.Spec.Provider != api.ProviderLocal {
			return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("the Kubernetes API at %s refuses this runtime: %w", cl.Config.Host, err))
		}
		// Unreachable: retry with backoff, keep what was last observed, and say since when.
		since := time.Now().UTC()
		for _, c := range rt.Status.Conditions {
			if c.Type == ConditionConnected && c.Status == api.ConditionFalse && !c.LastTransitionTime.IsZero() {
				since = c.LastTransitionTime
			}
		}
		rt.Status.SetCondition(api.Condition{Type: ConditionConnected, Status: api.ConditionFalse, Reason: "APIServerUnreachable",
			Message:            fmt.Sprintf("unreachable since %s: %v", since.Format(time.RFC3339), err),
			LastTransitionTime: since})
		return reconcile.Result{}, fmt.Errorf("cannot reach the Kubernetes API at %s (unreachable since %s): %w", cl.Config.Host, since.Format(time.RFC3339), err)
	}
	rt.Status.Version = ver.GitVersion
	if want := rt.Spec.KubernetesVersion; want != "" && ver.GitVersion != want && !strings.HasPrefix(ver.GitVersion, want+".") {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("the cluster runs Kubernetes %s, not the %s its spec asks for", ver.GitVersion, want))
	}
	nodes, err := cl.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("list nodes at %s: %w", cl.Config.Host, err)
	}
	rt.Status.NodesTotal = len(nodes.Items)
	rt.Status.NodesReady = 0
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			rt.Status.NodesReady++
		}
		if reg := n.Labels[corev1.LabelTopologyRegion]; reg != "" {
			rt.Status.Region = reg
		}
	}
	if rt.Status.Region == "" {
		rt.Status.Region = rt.Spec.Region
	}
	rt.Status.SetCondition(api.Condition{Type: ConditionConnected, Status: api.ConditionTrue, Reason: "APIServerReachable",
		Message: fmt.Sprintf("Kubernetes %s at %s", ver.GitVersion, cl.Config.Host)})
	if rt.Status.NodesReady == 0 {
		rt.Status.Message = fmt.Sprintf("no Ready nodes (%d total)", rt.Status.NodesTotal)
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	var recheck time.Duration
	if rt.Spec.MaxNodes > 0 && rt.Spec.Provider == api.ProviderLocal {
		changed, err := r.nodes.scale(ctx, cl, rt, nodes.Items, cmp.Or(r.ScaleDownDelay, 2*time.Minute))
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("node autoscaling: %w", err)
		}
		recheck = min(r.recheck(), 5*time.Second)
		if changed {
			return reconcile.Result{Recheck: time.Second}, nil // report the new nodes once Ready; the runtime stays Ready
		}
	}
	if r.Client != nil {
		after, err := r.usage(ctx, rt)
		if err != nil {
			return reconcile.Result{}, err
		}
		if rt.DeletionRequestedAt == nil && after > 0 && (recheck == 0 || after < recheck) {
			recheck = after
		}
	}
	return reconcile.Result{Recheck: recheck}, nil
}

// Finalize stops and removes a local cluster, deletes what QleetOS made in AWS for an eks one (unless
// the deletion orphans it); bring-your-own clusters are left untouched.
func (r *Reconciler) Finalize(ctx context.Context, rt *api.KubernetesRuntime) (reconcile.Result, error) {
	r.Connector.Forget(rt.ID)
	if rt.Spec.Provider == api.ProviderEKS && r.EKS != nil && !rt.DeletionOrphan {
		if after, err := r.EKS.Remove(ctx, rt); err != nil || after > 0 {
			return reconcile.Result{RequeueAfter: after}, err
		}
	}
	if rt.Spec.Provider == api.ProviderLocal && r.Local != nil {
		if err := r.Local.Remove(ctx, rt.ID); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// ReportReachability is kube.ConnectorConfig.OnReachability for a control plane: when a runtime's cluster
// stops answering its probe, or answers again, it asks for a reconcile of the runtime (through the API,
// like every notification), which records it in the Connected condition within seconds, rather than at
// the runtime's next recheck. Failover of the instances placed there counts from that condition.
func ReportReachability(ctx context.Context, rts *client.Resource[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus], id string, reachErr error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := rts.RequestReconcile(ctx, id)
	switch {
	case err == nil || api.IsNotFound(err):
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		// Shutting down, or the request outlived its deadline: the recheck catches it, and nobody
		// needs to read about it.
		reconcile.Logger(ctx).Debug("requeue runtime whose reachability changed; its recheck will", "id", id, "unreachable", reachErr, "err", err)
	default:
		reconcile.Logger(ctx).Warn("requeue runtime whose reachability changed; its recheck will", "id", id, "unreachable", reachErr, "err", err)
	}
}

// ReasonLocalClusterExited is the event reason of a local cluster whose process exited on its own.
const ReasonLocalClusterExited = "LocalClusterExited"

// ReportExit is kubesim.SupervisorConfig.OnExit for a control plane: it drops the connection to the dead cluster,
// records a Warning event on the runtime, and asks for a reconcile (through the API, like every
// notification), which starts the cluster again on its data.
func ReportExit(ctx context.Context, rts *client.Resource[api.KubernetesRuntimeSpec, api.KubernetesRuntimeStatus], conn *kube.Connector, id string, exitErr error) {
	conn.Forget(id)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ev := api.Event{Type: api.EventWarning, Reason: ReasonLocalClusterExited, Source: "controller/" + api.KindKubernetesRuntime,
		Message: fmt.Sprintf("the local cluster's process exited (%v); restarting it", exitErr)}
	if err := rts.RecordEvent(ctx, id, ev); err != nil && !api.IsNotFound(err) {
		reconcile.Logger(ctx).Warn("record local cluster exit", "id", id, "err", err)
	}
	if err := rts.RequestReconcile(ctx, id); err != nil && !api.IsNotFound(err) {
		reconcile.Logger(ctx).Warn("requeue exited local cluster; resync will", "id", id, "err", err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
