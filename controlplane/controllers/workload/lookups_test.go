package workload_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// listCounter counts the list requests a client makes (GET /v1/<kinds>), and among them those with
// neither a reference nor a label filter: lists of a whole kind.
type listCounter struct {
	mu           sync.Mutex
	lists, whole int
	wholeKinds   []string
}

func (c *listCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method == http.MethodGet && len(parts) == 2 && parts[0] == "v1" {
		q := req.URL.Query()
		c.mu.Lock()
		c.lists++
		if q.Get("references") == "" && q.Get("label_selector") == "" {
			c.whole++
			c.wholeKinds = append(c.wholeKinds, parts[1])
		}
		c.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (c *listCounter) take() (lists, whole int, kinds []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lists, whole, kinds = c.lists, c.whole, c.wholeKinds
	c.lists, c.whole, c.wholeKinds = 0, 0, nil
	return lists, whole, kinds
}

// countingClient mints a token with the role and returns a client whose list requests c counts.
func countingClient(t testing.TB, svc *apitest.API, role string, c *listCounter) *client.Client {
	t.Helper()
	tok, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, svc.Store.CreateToken(context.Background(), &store.Token{Hash: server.HashToken(tok), Name: role + "-counted", Role: role}))
	cl, err := client.New(svc.URL, client.WithToken(tok), client.WithHTTPClient(&http.Client{Transport: c}))
	require.NoError(t, err)
	return cl
}

// TestInstanceReconcileListsNoWholeKind: an instance's reconcile finds the secrets that serve it, the
// instances that use it and its runtime and definition through the store's indexes and reads by id. It
// lists no whole kind, and makes as many list requests with 40 other secrets and instances as with 2:
// its cost follows what it depends on, not the size of the estate (issue 30).
func TestInstanceReconcileListsNoWholeKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := apitest.Start(t)
	admin := svc.Client(t, server.RoleAdmin)
	counter := &listCounter{}
	ctrl := countingClient(t, svc, server.RoleController, counter)
	sim := kubesimtest.Start(t)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rt, err := admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "sim"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: string(raw)}})
	require.NoError(t, err)
	_, err = ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, rt.ResourceVersion, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: rt.Generation}, Version: "v1.31.4"})
	require.NoError(t, err)
	def, err := admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"}, Spec: webSpec()})
	require.NoError(t, err)
	newInstance := func(name string) *api.WorkloadInstance {
		i, err := admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		return i
	}
	readySecret := func(name, instanceID string) *api.Secret {
		s, err := admin.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: name},
			Spec: api.SecretSpec{InstanceIDs: []string{instanceID}, Values: map[string]string{"KEY": name}}})
		require.NoError(t, err)
		_, err = ctrl.Secrets().UpdateStatus(ctx, s.ID, s.ResourceVersion, api.SecretStatus{
			Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: s.Generation}})
		require.NoError(t, err)
		return s
	}
	inst := newInstance("served")
	own := readySecret("own", inst.ID)
	others := 0
	addOthers := func(n int) {
		for i := range n {
			o := newInstance(fmt.Sprintf("other-%d", others+i))
			readySecret(fmt.Sprintf("other-%d", others+i), o.ID)
		}
		others += n
	}

	r := &workload.InstanceReconciler{Client: ctrl, Connector: kube.NewConnector(kube.ConnectorConfig{}),
		Renderer: &render.Renderer{HelmCacheDir: t.TempDir(), ChartDir: os.TempDir()}}
	reconcileOnce := func(t *testing.T) (lists int) {
		t.Helper()
		cur, err := ctrl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		counter.take()
		_, err = r.Reconcile(ctx, cur)
		require.NoError(t, err)
		lists, whole, kinds := counter.take()
		require.Zero(t, whole, "lists of a whole kind during one reconcile: %v", kinds)
		require.Contains(t, cur.Status.Dependencies, api.ObjectRef{Kind: api.KindSecret, ID: own.ID, Name: own.Name},
			"the secret that serves it is found through the index")
		require.Len(t, cur.Status.Dependencies, 1, "and no other instance's secret")
		return lists
	}

	addOthers(2)
	few := reconcileOnce(t)
	require.Positive(t, few, "the reverse lookups are list requests, which the counter sees")
	addOthers(38)
	require.Equal(t, few, reconcileOnce(t), "the same list requests with %d other instances and secrets", others)
}
