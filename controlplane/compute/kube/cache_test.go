package kube_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestInSync checks the drift check that reads the cluster's cache: objects as applied are in sync;
// an edit to a field QleetOS sets, a deletion, or a changed desired object are not; what other field
// managers add next to ours (a label, defaults) is not drift.
func TestInSync(t *testing.T) {
	cl := connect(t)
	t.Cleanup(cl.Close)
	ctx := context.Background()
	desired := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{namespace(t, "sync"), service(t, "web"), deployment(t, "web", 2, "100m")}
	}
	owner := kube.Owner{InstanceID: "inst-sync", Namespace: "sync"}
	refs, err := kube.Apply(ctx, cl, owner, desired())
	require.NoError(t, err)

	inSync := func(objs []*unstructured.Unstructured) (bool, string) {
		got, ok := kube.InSync(ctx, cl, owner, objs)
		return ok, fmt.Sprintf("refs %v", refNames(got))
	}
	// The cache follows the cluster through a watch, so each answer is awaited.
	await.Explained(t, 30*time.Second, func() (bool, string) { return inSync(desired()) })
	got, ok := kube.InSync(ctx, cl, owner, desired())
	require.True(t, ok)
	require.Equal(t, refNames(refs), refNames(got), "the refs in apply order")
	require.Positive(t, got[2].Generation, "the deployment's generation is reported")

	t.Run("a changed desired object is not in sync", func(t *testing.T) {
		objs := desired()
		objs[2] = deployment(t, "web", 3, "100m")
		ok, _ := inSync(objs)
		require.False(t, ok)
	})

	t.Run("a label added by someone else is not drift", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"team":"blue"}}}`)
		_, err := cl.Clientset.AppsV1().Deployments("sync").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"})
		require.NoError(t, err)
		await.Explained(t, 30*time.Second, func() (bool, string) {
			d, err := cl.Cache().Get(ctx, kube.AppliedRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "sync", Name: "web"})
			if err != nil || d == nil {
				return false, fmt.Sprint(err)
			}
			l, _, _ := unstructured.NestedString(d, "metadata", "labels", "team")
			return l == "blue", "label not seen by the cache yet"
		})
		ok, msg := inSync(desired())
		require.True(t, ok, msg)
	})

	t.Run("a field scaled by hand is drift until applied again", func(t *testing.T) {
		patch := []byte(`{"spec":{"replicas":5}}`)
		_, err := cl.Clientset.AppsV1().Deployments("sync").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-scale"})
		require.NoError(t, err)
		await.Explained(t, 30*time.Second, func() (bool, string) { ok, msg := inSync(desired()); return !ok, msg })

		owner := owner
		owner.Previous = refs
		applied, err := kube.Apply(ctx, cl, owner, desired())
		require.NoError(t, err)
		require.Contains(t, applied[2].Drift, "spec.replicas (5 -> 2)")
		await.Explained(t, 30*time.Second, func() (bool, string) { return inSync(desired()) })
	})

	t.Run("a deleted object is not in sync", func(t *testing.T) {
		require.NoError(t, cl.Clientset.CoreV1().Services("sync").Delete(ctx, "web", metav1.DeleteOptions{}))
		await.Explained(t, 30*time.Second, func() (bool, string) { ok, msg := inSync(desired()); return !ok, msg })
	})

	t.Run("health read from the cache matches health read from the API server", func(t *testing.T) {
		_, err := kube.Apply(ctx, cl, owner, desired())
		require.NoError(t, err)
		// The two reads are moments apart while the scale-down settles: wait until they agree on a
		// settled, ready deployment.
		await.Explained(t, 60*time.Second, func() (bool, string) {
			cached := kube.HealthWith(ctx, cl, refs, kube.HealthOptions{Cached: true})
			direct := kube.Health(ctx, cl, refs)
			settled := cached.Ready && cached.ReadyReplicas == 2 && cached.AvailableReplicas == 2
			return settled && fmt.Sprint(direct) == fmt.Sprint(cached), fmt.Sprintf("cached %+v, direct %+v", cached, direct)
		})
	})

	t.Run("a closed cluster's cache answers ErrNotCached", func(t *testing.T) {
		other, err := kube.NewCluster(cl.Config)
		require.NoError(t, err)
		other.Close()
		_, err = other.Cache().Get(ctx, kube.AppliedRef{APIVersion: "v1", Kind: "Namespace", Name: "sync"})
		require.ErrorIs(t, err, kube.ErrNotCached)
		_, ok := kube.InSync(ctx, other, owner, desired())
		require.False(t, ok, "no cache: the caller applies")
	})
}

// TestConnectorSharesClusters checks that runtimes with the same kubeconfig share one Cluster (and so one
// cache), and that the Cluster is closed once no runtime uses it.
func TestConnectorSharesClusters(t *testing.T) {
	sim := kubesimtest.Start(t)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	conn := kube.NewConnector(kube.ConnectorConfig{})
	t.Cleanup(conn.Close)
	ctx := context.Background()
	rt := func(id string) *api.KubernetesRuntime {
		return &api.KubernetesRuntime{
			Meta: api.Meta{ID: id, Name: id},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: string(raw)},
		}
	}
	a, err := conn.Connect(ctx, rt("a"))
	require.NoError(t, err)
	b, err := conn.Connect(ctx, rt("b"))
	require.NoError(t, err)
	require.Same(t, a, b, "one kubeconfig, one cluster")
	_, err = a.Cache().Get(ctx, kube.AppliedRef{APIVersion: "v1", Kind: "Namespace", Name: "default"})
	require.NoError(t, err)

	conn.Forget("a")
	_, err = b.Cache().Get(ctx, kube.AppliedRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "x", Name: "y"})
	require.NoError(t, err, "still used by b: still open")
	conn.Forget("b")
	_, err = b.Cache().Get(ctx, kube.AppliedRef{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "x", Name: "y"})
	require.ErrorIs(t, err, kube.ErrNotCached, "closed with its last runtime")

	c, err := conn.Connect(ctx, rt("a"))
	require.NoError(t, err)
	require.NotSame(t, a, c, "a fresh cluster after the old one was closed")
}

// TestCacheChangedWakesOnTheInstancesObjects checks Cache.Changed: the channel of an instance closes
// when the cache sees a change of an object labelled for it, and not for another instance's.
func TestCacheChangedWakesOnTheInstancesObjects(t *testing.T) {
	cl := connect(t)
	t.Cleanup(cl.Close)
	ctx := context.Background()
	_, err := cl.Cache().Informer(ctx, kube.DeploymentKind, "v1")
	require.NoError(t, err)

	mine, releaseMine := cl.Cache().Changed("inst-changed")
	defer releaseMine()
	other, releaseOther := cl.Cache().Changed("inst-other")
	defer releaseOther()
	_, err = kube.Apply(ctx, cl, kube.Owner{InstanceID: "inst-changed", Namespace: "changed"},
		[]*unstructured.Unstructured{namespace(t, "changed"), deployment(t, "web", 1, "10m")})
	require.NoError(t, err)
	select {
	case <-mine:
	case <-time.After(30 * time.Second):
		t.Fatal("the instance's Deployment was added to the cache, and its waiter was not woken")
	}
	select {
	case <-other:
		t.Fatal("another instance's waiter was woken")
	default:
	}
}

// Peek answers from the cache only once the kind's watch has filled it: the first look-up of a kind
// starts the watch and answers nil at once, where Get waits for the fill; later ones find the object.
func TestPeekDoesNotWaitForTheWatch(t *testing.T) {
	cl := connect(t)
	t.Cleanup(cl.Close)
	ctx := context.Background()
	owner := kube.Owner{InstanceID: "inst-peek", Namespace: "peek"}
	_, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "peek"), configMap(t, "settings")})
	require.NoError(t, err)
	ref := kube.AppliedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "peek", Name: "settings"}

	// A second connection to the same cluster, whose cache watches nothing yet.
	fresh, err := kube.NewCluster(cl.Config)
	require.NoError(t, err)
	t.Cleanup(fresh.Close)
	got, err := fresh.Cache().Peek(ref)
	require.NoError(t, err)
	require.Nil(t, got, "the watch has only just started")
	await.True(t, 30*time.Second, func() bool {
		got, err := fresh.Cache().Peek(ref)
		return err == nil && got != nil
	}, "the watch Peek started fills the cache")

	// Get, on a third connection, waits for the fill and finds the object on the first look-up.
	other, err := kube.NewCluster(cl.Config)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	got, err = other.Cache().Get(ctx, ref)
	require.NoError(t, err)
	require.NotNil(t, got)
}
