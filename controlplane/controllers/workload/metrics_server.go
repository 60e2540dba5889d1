package workload

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/requirements"
)

// ReasonInstallingForConsumer is the event reason of a support service a consumer other than a gateway
// (an autoscaled workload_instance) asked for.
const ReasonInstallingForConsumer = "InstallingSupportService"

// apiServices is the kube-aggregator's registration of an API group version.
var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// metricsAPIService is the registration of the resource metrics API that autoscaling reads.
const metricsAPIService = "v1beta1.metrics.k8s.io"

// needMetrics makes sure the resource metrics API (metrics.k8s.io), which a HorizontalPodAutoscaler
// reads, is served on a runtime before the consumer's autoscaler is applied there. A metrics-server
// support service on the runtime, under any name, is used as it is; else a cluster that serves the API
// already (a managed cluster's own metrics-server) is left as it is; else a metrics-server support
// service is created, owned by the consumer, and the consumer waits until it is Ready (a
// *reconcile.WaitError, and the support service's stall when its chart cannot be fetched, for the
// consumer to stall with).
func needMetrics(ctx context.Context, cl *client.Client, k *kube.Cluster, consumer api.ObjectRef, rt *api.KubernetesRuntime) (*reconcile.Stall, error) {
	var ss *api.SupportService
	for s, err := range reconcile.LookupsFrom(ctx, cl).SupportServicesReferencing(ctx, rt.ID) {
		if err != nil {
			return nil, fmt.Errorf("list the support_services of kubernetes_runtime %q: %w", rt.Name, err)
		}
		if s.Spec.RuntimeID == rt.ID && s.Spec.Type == api.SupportMetricsServer && s.DeletionRequestedAt == nil {
			ss = s
			break
		}
	}
	if ss == nil {
		_, err := k.Dynamic.Resource(apiServices).Get(ctx, metricsAPIService, metav1.GetOptions{})
		switch {
		case err == nil:
			return nil, nil // served by the cluster's own metrics-server
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("look for the metrics API on kubernetes_runtime %q: %w", rt.Name, err)
		}
		name := requirements.Name(api.SupportMetricsServer, rt.Name)
		ss, err = cl.SupportServices().Create(ctx, &api.SupportService{
			Meta: api.Meta{Name: name, Labels: map[string]string{"qleet.io/support-type": api.SupportMetricsServer},
				Owners: []api.ObjectRef{consumer}},
			Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportMetricsServer},
		})
		if api.IsConflict(err) {
			ss, err = cl.SupportServices().GetByName(ctx, name)
		} else if err == nil {
			reconcile.Eventf(ctx, api.EventNormal, ReasonInstallingForConsumer, "installing %s on kubernetes_runtime %q: its autoscaling reads the metrics API, which the runtime does not serve", api.SupportMetricsServer, rt.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("install %s on kubernetes_runtime %q: %w", api.SupportMetricsServer, rt.Name, err)
		}
	}
	got, err := reconcile.LookupsFrom(ctx, cl).SupportServices.RequireReady(ctx, ss.ID)
	if err == nil {
		return nil, nil
	}
	if got != nil {
		if c := api.StalledCondition(got.Generation, &got.Status.Status); c != nil {
			return &reconcile.Stall{Reason: c.Reason, Message: fmt.Sprintf("support_service %q on kubernetes_runtime %q: %s", ss.Name, rt.Name, c.Message)}, err
		}
	}
	return nil, err
}
