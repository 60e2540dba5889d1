// Package requirements decides which support services an object needs on a runtime, and what a
// controller names the one it installs. It is pure, and imports nothing beyond package api, so that
// the controllers that install support services and the API server's plan preview (POST /v1/plans)
// make the same decision and cannot drift apart.
package requirements

import (
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// ForInstance returns the support service types a workload instance of the definition needs on every
// runtime it runs on: metrics-server when it autoscales (its HorizontalPodAutoscaler reads the metrics
// API), unless the cluster serves that API itself, which only the controller can see.
func ForInstance(def *api.WorkloadDefinitionSpec) []string {
	if def.Autoscaling != nil {
		return []string{api.SupportMetricsServer}
	}
	return nil
}

// ForGateway returns the support service types a gateway needs on every runtime its instance runs on, in
// install order: ingress always; cert-manager with TLS; external-dns when a domain_name's zone holds one
// of its hosts (inZone).
func ForGateway(spec *api.GatewaySpec, inZone bool) []string {
	needs := []string{api.SupportIngress}
	if spec.TLSOn() {
		needs = append(needs, api.SupportCertManager)
	}
	if inZone {
		needs = append(needs, api.SupportExternalDNS)
	}
	return needs
}

// Name is the name a controller gives the support service of a type on a runtime: one per runtime and
// type, so that concurrent requests for it meet on the name.
func Name(typ, runtime string) string {
	n := typ + "-" + runtime
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}
