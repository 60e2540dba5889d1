package agent_test

import (
	"github.com/qleetos/terraform-provider-qleet/api"

	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/controlplane/agent"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// deployment is a one-replica Deployment named name, running container (YAML flow style).
func deployment(t *testing.T, name, container string) *unstructured.Unstructured {
	t.Helper()
	var u unstructured.Unstructured
	require.NoError(t, yaml.Unmarshal([]byte(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [%[2]s]
`, name, container)), &u.Object))
	return &u
}

// awaitEvent waits for an event of the reason among an object's events, and returns it.
func awaitEvent(t *testing.T, events func(context.Context, string) ([]api.Event, error), id, reason string) api.Event {
	t.Helper()
	var got api.Event
	await.True(t, 60*time.Second, func() bool {
		evs, err := events(context.Background(), id)
		require.NoError(t, err)
		for _, e := range evs {
			if e.Reason == reason {
				got = e
				return true
			}
		}
		return false
	}, "a mirrored %s event", reason)
	return got
}

// changes records OnChange calls.
type changes struct {
	mu  sync.Mutex
	ids map[string]int
}

func (c *changes) add(kind, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[kind+"/"+id]++
}

func (c *changes) count(kind, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[kind+"/"+id]
}

func TestAgent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// A real API server to mirror events into.
	srv := apitest.Start(t)
	svc := srv.Client(t, server.RoleAdmin)

	sim := kubesimtest.Start(t)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rt, err := svc.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{
		Meta: api.Meta{Name: "sim"}, Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: string(raw)},
	})
	require.NoError(t, err)
	// The agent runs with a controller token: only that role reads the kubeconfig back.
	rt, err = srv.Client(t, server.RoleController).KubernetesRuntimes().Get(ctx, rt.ID)
	require.NoError(t, err)
	def, err := svc.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{
		Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.27"}}},
	})
	require.NoError(t, err)
	inst, err := svc.WorkloadInstances().Create(ctx, &api.WorkloadInstance{
		Meta: api.Meta{Name: "web-a"}, Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID},
	})
	require.NoError(t, err)

	conn := kube.NewConnector(kube.ConnectorConfig{})
	cl, err := conn.Connect(ctx, rt)
	require.NoError(t, err)
	seen := &changes{ids: map[string]int{}}
	a, err := agent.New(agent.Config{Client: svc, Connector: conn, Runtime: rt, OnChange: seen.add, Logger: quiet})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("agent caches did not sync")
	}

	// Apply what the instance controller would, with a CPU request no node can meet.
	u := deployment(t, "web-a", `{name: app, image: "nginx:1.27", resources: {requests: {cpu: "1000"}}}`)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web-a"}}}
	owner := kube.Owner{InstanceID: inst.ID, Namespace: "web-a"}
	_, err = kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{ns, u})
	require.NoError(t, err)

	t.Run("a health change of an applied workload notifies the instance", func(t *testing.T) {
		await.True(t, 30*time.Second, func() bool { return seen.count(api.KindWorkloadInstance, inst.ID) > 0 }, "OnChange")
	})

	t.Run("a workload applied for another kind of owner notifies that owner", func(t *testing.T) {
		// A data service's StatefulSet says whose it is (kube.Owner.Kind): its health reaches the
		// database, not an instance of the same id.
		db := deployment(t, "db-a", `{name: db, image: "postgres:16"}`)
		const dbID = "database-agent-test"
		_, err := kube.Apply(ctx, cl, kube.Owner{InstanceID: dbID, Kind: api.KindDatabase, Namespace: "web-a"}, []*unstructured.Unstructured{db})
		require.NoError(t, err)
		await.True(t, 30*time.Second, func() bool { return seen.count(api.KindDatabase, dbID) > 0 }, "OnChange of the database")
	})

	t.Run("warning events about managed objects are mirrored onto the instance", func(t *testing.T) {
		got := awaitEvent(t, svc.WorkloadInstances().Events, inst.ID, "FailedScheduling")
		require.Equal(t, api.EventWarning, got.Type)
		require.Contains(t, got.Message, "Pod web-a/web-a-")
		require.Contains(t, got.Message, "Insufficient cpu")
		require.Equal(t, "agent/sim", got.Source)
	})

	t.Run("warning events about a data service's pods are mirrored onto the data service", func(t *testing.T) {
		// Its pods' labels name the database's id but not its kind, which comes from their StatefulSet.
		db, err := svc.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "events"}, Spec: api.DatabaseSpec{InstanceID: inst.ID}})
		require.NoError(t, err)
		sts := deployment(t, "db-events", `{name: db, image: "postgres:16", resources: {requests: {cpu: "1000"}}}`)
		sts.SetKind("StatefulSet")
		require.NoError(t, unstructured.SetNestedField(sts.Object, "db-events", "spec", "serviceName"))
		_, err = kube.Apply(ctx, cl, kube.Owner{InstanceID: db.ID, Kind: api.KindDatabase, Namespace: "web-a"}, []*unstructured.Unstructured{sts})
		require.NoError(t, err)
		got := awaitEvent(t, svc.Databases().Events, db.ID, "FailedScheduling")
		require.Contains(t, got.Message, "Pod web-a/db-events-0")
		require.Equal(t, api.KindDatabase, got.Kind)
	})

	t.Run("deleting an applied object by hand notifies the instance", func(t *testing.T) {
		before := seen.count(api.KindWorkloadInstance, inst.ID)
		require.NoError(t, cl.Clientset.AppsV1().Deployments("web-a").Delete(ctx, "web-a", metav1.DeleteOptions{}))
		await.True(t, 30*time.Second, func() bool { return seen.count(api.KindWorkloadInstance, inst.ID) > before }, "OnChange after delete")
	})

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not stop")
	}
}

func TestInstallManifests(t *testing.T) {
	t.Parallel()
	out := agent.InstallManifests("us-east", "https://qleet.example.com", `tok"en`)
	objs, err := render.ParseManifests(out)
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	require.Equal(t, []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret", "Deployment"}, kinds)
	secret, _, _ := unstructured.NestedString(objs[4].Object, "stringData", "token")
	require.Equal(t, `tok"en`, secret, "the token survives quoting")
	cs, _, _ := unstructured.NestedSlice(objs[5].Object, "spec", "template", "spec", "containers")
	args := cs[0].(map[string]any)["args"]
	require.Equal(t, []any{"agent", "--runtime", "us-east", "--endpoint", "https://qleet.example.com"}, args)
	require.True(t, strings.HasPrefix(objs[5].GetNamespace(), agent.InstallNamespace))
}
