package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
