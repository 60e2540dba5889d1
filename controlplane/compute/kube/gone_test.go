package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestDeleteOwnedWithoutWaiting checks deletion that holds no one while objects go: one DeleteOwned
// pass deletes an owner's objects and names what is still there (a namespace goes only after the
// namespace controller's grace), Remaining reads what is left, and WhenGone calls back once the cache
// has seen all of it deleted; kinds the cache does not watch are not tracked.
func TestDeleteOwnedWithoutWaiting(t *testing.T) {
	cl := connect(t)
	t.Cleanup(cl.Close)
	ctx := context.Background()
	owner := kube.Owner{InstanceID: "inst-nowait", Namespace: "nowait"}
	refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "nowait"), deployment(t, "web", 1, "10m"), configMap(t, "settings")})
	require.NoError(t, err)
	await.Explained(t, 60*time.Second, func() (bool, string) {
		rep := kube.Health(ctx, cl, refs)
		return rep.Ready, fmt.Sprintf("%+v", rep.Objects)
	})
	// The watches the controller's health and drift checks start.
	for _, r := range refs {
		_, err := cl.Cache().Informer(ctx, r.GroupKind(), "v1")
		require.NoError(t, err)
	}

	left, err := kube.DeleteOwned(ctx, cl, owner)
	require.NoError(t, err)
	require.Contains(t, refNames(left), "Namespace/nowait", "the namespace is being deleted, not gone")
	require.ErrorIs(t, kube.StillPresent(left), kube.ErrStillPresent)

	t.Run("a kind the cache does not watch is not tracked", func(t *testing.T) {
		stop, tracked := cl.Cache().WhenGone([]kube.AppliedRef{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "nowait", Name: "default"}}, func() {
			t.Error("called back for an untracked object")
		})
		defer stop()
		require.Zero(t, tracked)
	})

	fired := make(chan struct{})
	stop, tracked := cl.Cache().WhenGone(left, func() { close(fired) })
	defer stop()
	require.Positive(t, tracked)
	select {
	case <-fired:
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "WhenGone did not call back", "left: %v", refNames(left))
	}
	still, err := kube.Remaining(ctx, cl, left)
	require.NoError(t, err)
	require.Empty(t, still, "Remaining agrees with the cache")
	owned, err := kube.Owned(ctx, cl, owner)
	require.NoError(t, err)
	require.Empty(t, owned, "the API server's lists find nothing of the owner's either")
	_, err = cl.Clientset.CoreV1().Namespaces().Get(ctx, "nowait", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "namespace gone: %v", err)
	stop() // after the call back, and twice: harmless
}

// TestOwnersDeletedAtOnceShareTheirLists deletes twelve owners at once on a cluster of their own: each
// loses everything it applied, a foreign object keeps its namespace, and the cluster-wide lists that
// find owned objects are shared, so that the first pass costs about half the requests of one search
// per owner.
func TestOwnersDeletedAtOnceShareTheirLists(t *testing.T) {
	cl := connect(t)
	ctx := context.Background()
	const owners = 12
	ownerOf := func(i int) kube.Owner {
		return kube.Owner{InstanceID: fmt.Sprintf("inst-%02d", i), Namespace: fmt.Sprintf("ns-%02d", i)}
	}
	for i := range owners {
		o := ownerOf(i)
		_, err := kube.Apply(ctx, cl, o, []*unstructured.Unstructured{namespace(t, o.Namespace), configMap(t, "app"), service(t, "app")})
		require.NoError(t, err)
	}
	_, err := cl.Clientset.CoreV1().ConfigMaps("ns-00").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}, Data: map[string]string{"a": "b"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	await.Explained(t, 10*time.Second, func() (bool, string) {
		for i := range owners {
			ns := kube.AppliedRef{APIVersion: "v1", Kind: "Namespace", Name: ownerOf(i).Namespace}
			if o, _ := cl.Cache().Get(ctx, ns); o == nil {
				return false, ns.String() + " is not in the cache yet"
			}
		}
		return true, ""
	})

	before := cl.Requests().Calls
	errs := make(chan error, owners)
	for i := range owners {
		go func() {
			_, err := kube.DeleteOwned(ctx, cl, ownerOf(i))
			errs <- err
		}()
	}
	for range owners {
		require.NoError(t, <-errs)
	}
	calls := cl.Requests().Calls - before
	// Per owner, without sharing: the namespace's 18 checked kinds, its delete, the two objects'
	// deletes, and 22 cluster-wide lists (44 with the namespace read the cache now answers). Owner 0's
	// namespace, which holds a foreign object, is checked twice and not deleted.
	alone := int64(owners * (18 + 1 + 2 + 22))
	t.Logf("first pass of %d owners at once: %d requests (%d without shared lists)", owners, calls, alone)
	require.LessOrEqual(t, calls, int64(owners*(18+1+2)+22*owners/2), "the cluster-wide lists are shared")

	for i := range owners {
		require.NoError(t, kube.DeleteAll(ctx, cl, ownerOf(i)))
		left, err := kube.Owned(ctx, cl, ownerOf(i))
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, []string{"Namespace/ns-00"}, refNames(left), "a namespace holding a foreign object is left")
			continue
		}
		require.Empty(t, left, "owner %d", i)
	}
	cm, err := cl.Clientset.CoreV1().ConfigMaps("ns-00").Get(ctx, "by-hand", metav1.GetOptions{})
	require.NoError(t, err, "the foreign object and its namespace stay")
	require.Equal(t, "b", cm.Data["a"])
	_, err = cl.Clientset.CoreV1().ConfigMaps("ns-00").Get(ctx, "app", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the owner's object in the shared namespace is gone: %v", err)
}
