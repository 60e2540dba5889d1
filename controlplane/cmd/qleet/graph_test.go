package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// appGraph is GET /v1/graph?root=workload_instance/app for an app in eu-west that uses rpc, which runs in
// us-east only; the app has a secret, a database and a gateway, whose support service and domain name the
// gateway uses.
func appGraph() *api.Graph {
	node := func(kind, id string, phase api.Phase) api.GraphNode {
		return api.GraphNode{Kind: kind, ID: id, Name: id, Phase: phase, Reconciled: phase == api.PhaseReady}
	}
	app := node(api.KindWorkloadInstance, "app", api.PhaseReconciling)
	app.WaitingOn = `workload_instance "rpc"`
	app.Message = `waiting for workload_instance "rpc" (not placed on kubernetes_runtime "eu-1", 3s)`
	return &api.Graph{Root: "app", Nodes: []api.GraphNode{
		app,
		node(api.KindWorkloadInstance, "rpc", api.PhaseReady),
		node(api.KindWorkloadDefinition, "def", api.PhaseReady),
		node(api.KindSecret, "keys", api.PhaseReady),
		node(api.KindDatabase, "orders", api.PhaseReady),
		node(api.KindGateway, "gw", api.PhaseReady),
		node(api.KindSupportService, "ingress-eu-1", api.PhaseReady),
		node(api.KindDomainName, "example", api.PhaseReady),
		node(api.KindKubernetesRuntime, "eu-1", api.PhaseReady),
		node(api.KindKubernetesRuntime, "us-1", api.PhaseReady),
		node(api.KindRuntimeProfile, "eu", api.PhaseReady),
	}, Edges: []api.GraphEdge{
		{From: "app", To: "def", Type: api.EdgeReference, Why: "spec.definition_id"},
		{From: "app", To: "rpc", Type: api.EdgeReference, Why: "spec.uses[0].instance_id"},
		{From: "app", To: "eu-1", Type: api.EdgePlacement, Why: "status.placements[0].runtime_id"},
		{From: "app", To: "keys", Type: api.EdgeReference, Why: "secret spec.instance_ids[0]"},
		{From: "app", To: "orders", Type: api.EdgeReference, Why: "database spec.instance_id"},
		{From: "rpc", To: "def", Type: api.EdgeReference, Why: "spec.definition_id"},
		{From: "rpc", To: "us-1", Type: api.EdgeReference, Why: "spec.runtime_id"},
		{From: "orders", To: "eu-1", Type: api.EdgePlacement, Why: "status.runtimes[0].runtime_id"},
		{From: "gw", To: "app", Type: api.EdgeReference, Why: "spec.instance_id", Attached: true},
		{From: "gw", To: "ingress-eu-1", Type: api.EdgePlacement, Why: "status.support_services[0]"},
		{From: "gw", To: "example", Type: api.EdgePlacement, Why: "status.domain_names[0]"},
		{From: "ingress-eu-1", To: "eu-1", Type: api.EdgeReference, Why: "spec.runtime_id"},
		{From: "eu-1", To: "eu", Type: api.EdgeOwner, Why: "owners"},
	}}
}

func TestGraphOfAnAppShowsEverythingItNeeds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printGraph(&b, appGraph(), time.Now(), 120)
	out := b.String()
	needs, usedBy, _ := strings.Cut(out, "\nused by:\n")
	for _, want := range []string{
		`(?m)^workload_instance/app  Reconciling  waiting for workload_instance "rpc"`,
		`(?m)^├── secret/keys  Ready  \[secret spec.instance_ids\[0\]\]$`,
		`(?m)^├── database/orders  Ready  \[database spec.instance_id\]$`,
		`(?m)^└── gateway/gw  Ready  \[attached: gateway spec.instance_id\]$`,
		`(?m)^    ├── support_service/ingress-eu-1  Ready  \[status.support_services\[0\]\]$`,
		`(?m)^    └── domain_name/example  Ready  \[status.domain_names\[0\]\]$`,
		`(?m)^│   └── runtime_profile/eu  Ready  \[owners\]$`,
		`(?m)^│   └── kubernetes_runtime/us-1  Ready  \[spec.runtime_id\]$`,
	} {
		require.Regexp(t, regexp.MustCompile(want), needs, "what the app needs:\n%s", out)
	}
	require.Empty(t, usedBy, "the gateway is shown with what the app needs, not again as a user:\n%s", out)
}

func TestRootCauseNamesADependencyPlacedWhereItsConsumerIsNot(t *testing.T) {
	t.Parallel()
	got := rootCauseLine(appGraph(), "app", time.Now())
	require.Equal(t, `workload_instance "app" → workload_instance "rpc" (not placed on kubernetes_runtime "eu-1", where workload_instance "app" runs; it runs on kubernetes_runtime "us-1")`, got)
	require.NotRegexp(t, `\bReady\b`, got)
}
