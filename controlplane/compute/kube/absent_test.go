package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestApplyCreatesAbsentObjectsInOneRequest counts the requests an apply makes on a cluster of its
// own: a new object costs one request (the apply that creates it), where it cost a read and an apply;
// an object that exists without being QleetOS's is refused without a write, then read, and the next
// apply of it reads it straight away.
func TestApplyCreatesAbsentObjectsInOneRequest(t *testing.T) {
	cl := connect(t)
	ctx := context.Background()
	calls := func(f func()) int64 {
		before := cl.Requests().Calls
		f()
		return cl.Requests().Calls - before
	}

	// The first apply starts the cache's watches of these kinds (a list each) and reads discovery.
	_, err := kube.Apply(ctx, cl, kube.Owner{InstanceID: "inst-warm", Namespace: "warm"}, []*unstructured.Unstructured{
		namespace(t, "warm"), configMap(t, "app"), deployment(t, "app", 1, "10m"),
	})
	require.NoError(t, err)

	owner := kube.Owner{InstanceID: "inst-new", Namespace: "fresh"}
	objs := []*unstructured.Unstructured{namespace(t, "fresh"), configMap(t, "app"), deployment(t, "app", 1, "10m")}
	var refs []kube.AppliedRef
	n := calls(func() {
		refs, err = kube.Apply(ctx, cl, owner, objs)
	})
	require.NoError(t, err)
	require.Equal(t, []string{"Namespace/fresh", "ConfigMap/fresh/app", "Deployment/fresh/app"}, refNames(refs))
	require.EqualValues(t, 3, n, "one request per new object: no read before the create")
	dep, err := cl.Clientset.AppsV1().Deployments("fresh").Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "inst-new", dep.Labels[kube.LabelInstanceID])
	require.Len(t, dep.ManagedFields, 1)
	require.Equal(t, "qleet", dep.ManagedFields[0].Manager)
	require.Equal(t, metav1.ManagedFieldsOperationApply, dep.ManagedFields[0].Operation, "created by a server-side apply, so later applies own the same fields")

	// Until the cache has seen them, the objects just created would be taken for unknown ones.
	await.Explained(t, 10*time.Second, func() (bool, string) {
		for _, r := range refs {
			if o, _ := cl.Cache().Get(ctx, r); o == nil {
				return false, r.String() + " is not in the cache yet"
			}
		}
		return true, ""
	})

	foreign, err := cl.Clientset.CoreV1().ConfigMaps("fresh").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "by hand"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	withForeign := append(objs, configMap(t, "settings"))
	n = calls(func() {
		_, err = kube.Apply(ctx, cl, owner, withForeign)
	})
	require.True(t, kube.IsOwnershipConflict(err), "%v", err)
	require.EqualValues(t, 2, n, "the objects the cache holds in sync cost nothing; the foreign one a refused apply and a read")
	again, err := cl.Clientset.CoreV1().ConfigMaps("fresh").Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, foreign.ResourceVersion, again.ResourceVersion, "the refused apply wrote nothing")
	require.Equal(t, foreign.UID, again.UID)
	require.Empty(t, again.Labels)

	n = calls(func() {
		_, err = kube.Apply(ctx, cl, owner, withForeign)
	})
	require.True(t, kube.IsOwnershipConflict(err), "%v", err)
	require.EqualValues(t, 1, n, "an object found present is read first next time")

	// Once the foreign object is gone, the read finds nothing, the apply creates it, and the object is
	// created in one request again after that.
	require.NoError(t, cl.Clientset.CoreV1().ConfigMaps("fresh").Delete(ctx, "settings", metav1.DeleteOptions{}))
	n = calls(func() {
		_, err = kube.Apply(ctx, cl, owner, withForeign)
	})
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "a read (404) and the apply")
	cm, err := cl.Clientset.CoreV1().ConfigMaps("fresh").Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "inst-new", cm.Labels[kube.LabelInstanceID])
}
