package kube_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cutproxy"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// ownedChanges collects OnOwnedChange calls.
type ownedChanges struct {
	mu   sync.Mutex
	seen []string // "kind/id"
}

func (o *ownedChanges) add(kind, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, kind+"/"+id)
}

func (o *ownedChanges) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, s := range o.seen {
		if s == key {
			n++
		}
	}
	return n
}

// TestOwnedChangesComeFromTheWatch checks that the cluster's watch names the owner of an object QleetOS
// applied when someone edits or deletes it, and only then (not for status updates, not for the owner's
// own unchanged re-apply), and that a change made while the connection to the cluster was cut is reported
// once the watch resumes.
func TestOwnedChangesComeFromTheWatch(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rc, err := kube.RESTConfigFromKubeconfig(raw, "")
	require.NoError(t, err)
	host := strings.TrimPrefix(rc.Host, "https://")
	direct, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	proxy := cutproxy.New(t, host)
	changes := &ownedChanges{}
	conn := kube.NewConnector(kube.ConnectorConfig{OnOwnedChange: changes.add})
	t.Cleanup(conn.Close)
	rt := &api.KubernetesRuntime{Meta: api.Meta{ID: "rt-proxied", Name: "proxied"}, Spec: api.KubernetesRuntimeSpec{
		Provider: api.ProviderKubeconfig, Kubeconfig: strings.ReplaceAll(string(raw), host, proxy.Addr())}}
	cl, err := conn.Connect(context.Background(), rt)
	require.NoError(t, err)
	ctx := context.Background()

	owner := kube.Owner{InstanceID: "inst-watched", Kind: "workload_instance", Namespace: "watched"}
	key := "workload_instance/inst-watched"
	desired := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{namespace(t, "watched"), configMap(t, "settings"), configMap(t, "extra"), service(t, "web")}
	}
	_, err = kube.Apply(ctx, cl, owner, desired())
	require.NoError(t, err)
	// The apply read each kind through the cache, which started its watch; wait until it is synced.
	await.Explained(t, 30*time.Second, func() (bool, string) {
		_, ok := kube.InSync(ctx, cl, owner, desired())
		return ok, "the cache has not seen the applied objects yet"
	})
	settle := changes.count(key)

	t.Run("an unchanged re-apply reports nothing", func(t *testing.T) {
		_, err := kube.Apply(ctx, cl, owner, desired())
		require.NoError(t, err)
		// A later edit is reported; had the re-apply been reported, it would be counted before it.
		patch := []byte(`{"data":{"a":"edited"}}`)
		_, err = direct.CoreV1().ConfigMaps("watched").Patch(ctx, "settings", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"})
		require.NoError(t, err)
		await.True(t, 10*time.Second, func() bool { return changes.count(key) > settle }, "the edit is reported")
		require.Equal(t, settle+1, changes.count(key), "only the edit was reported")
	})

	t.Run("a rollout's own writes are not edits, an annotation added by hand is", func(t *testing.T) {
		rolled := kube.Owner{InstanceID: "inst-rolled", Kind: "workload_instance", Namespace: "watched"}
		rolledKey := "workload_instance/inst-rolled"
		// Deployments are watched before the apply (as the agent has them watched), so that the watch
		// sees the controller's writes as updates.
		_, err := cl.Cache().Informer(ctx, kube.DeploymentKind, "v1")
		require.NoError(t, err)
		_, err = kube.Apply(ctx, cl, rolled, []*unstructured.Unstructured{deployment(t, "rolled", 1, "10m")})
		require.NoError(t, err)
		// The deployment controller stamps its revision annotation and writes the status; the watch
		// sees both before this condition can hold.
		await.Explained(t, 60*time.Second, func() (bool, string) {
			d, err := direct.AppsV1().Deployments("watched").Get(ctx, "rolled", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return d.Annotations["deployment.kubernetes.io/revision"] == "1" && d.Status.ObservedGeneration == d.Generation,
				"the deployment controller has not stamped its revision yet"
		})
		// A later edit is reported; had the controller's writes been reported, they would be counted first.
		patch := []byte(`{"metadata":{"annotations":{"team":"edited-by-hand"}}}`)
		_, err = direct.AppsV1().Deployments("watched").Patch(ctx, "rolled", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"})
		require.NoError(t, err)
		await.True(t, 10*time.Second, func() bool { return changes.count(rolledKey) > 0 }, "the hand edit is reported")
		// no signal: had the rollout's writes been reported, the count was 1 before the edit, and the
		// edit's own report arrives within this
		time.Sleep(time.Second)
		require.Equal(t, 1, changes.count(rolledKey), "only the hand edit was reported, not the rollout's writes")
	})

	t.Run("a deletion names the owner", func(t *testing.T) {
		before := changes.count(key)
		require.NoError(t, direct.CoreV1().Services("watched").Delete(ctx, "web", metav1.DeleteOptions{}))
		await.True(t, 10*time.Second, func() bool { return changes.count(key) > before }, "the deletion is reported")
	})

	t.Run("a change made while the watch was cut is reported when it resumes", func(t *testing.T) {
		proxy.SetCut(true)
		before := changes.count(key)
		patch := []byte(`{"data":{"a":"while-cut"}}`)
		_, err := direct.CoreV1().ConfigMaps("watched").Patch(ctx, "settings", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"})
		require.NoError(t, err)
		require.NoError(t, direct.CoreV1().ConfigMaps("watched").Delete(ctx, "extra", metav1.DeleteOptions{}))
		require.Equal(t, before, changes.count(key), "nothing can be seen through a cut connection")
		proxy.SetCut(false)
		await.True(t, 90*time.Second, func() bool { return changes.count(key) >= before+2 }, "the edit and the deletion are reported after the watch resumes")
	})
}
