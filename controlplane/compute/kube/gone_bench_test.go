package kube

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// BenchmarkDeleteToGone compares, on one kubesim cluster, DeleteAll as it was before (delete, then list
// every searched kind every 100ms doubling to 1s until nothing is left) with DeleteAll now (delete, wait
// on the cache's delete events, then one more full pass), for an owner's Deployment (with its ReplicaSet
// and pod) and ConfigMap in a namespace of its own (which goes only after the namespace controller's 5s
// grace) and in a shared one (gone in tens of milliseconds):
//
//	go test -run '^$' -bench DeleteToGone -benchtime 3x ./controlplane/compute/kube/
func BenchmarkDeleteToGone(b *testing.B) {
	sim := kubesimtest.Start(b)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(b, err)
	rc, err := RESTConfigFromKubeconfig(raw, "")
	require.NoError(b, err)
	rc.QPS, rc.Burst = 100, 200 // the controllers' limits
	cl, err := NewCluster(rc)
	require.NoError(b, err)
	b.Cleanup(cl.Close)
	ctx := context.Background()
	_, err = cl.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	for _, gvk := range []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"}, {Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "ConfigMap"}} {
		_, err := cl.Cache().Informer(ctx, gvk.GroupKind(), gvk.Version)
		require.NoError(b, err)
	}

	n := 0
	// setup applies an owner's ConfigMap and 1-replica Deployment, in a namespace of its own when own is
	// set (the default for an instance), else in the shared namespace "bench", and waits until ready.
	setup := func(b *testing.B, own bool) Owner {
		b.Helper()
		n++
		owner := Owner{InstanceID: fmt.Sprintf("bench-%d", n), Namespace: "bench"}
		name := fmt.Sprintf("web-%d", n)
		var objs []*unstructured.Unstructured
		if own {
			owner.Namespace = name
			objs = append(objs, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}})
		}
		dep := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"replicas": int64(1),
				"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": name}},
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27"}}},
				},
			},
		}}
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}}}
		refs, err := Apply(ctx, cl, owner, append(objs, cm, dep))
		require.NoError(b, err)
		await.True(b, 2*time.Minute, func() bool { return Health(ctx, cl, refs).Ready }, "the applied objects ready")
		owner.Previous = refs
		return owner
	}

	for _, own := range []bool{true, false} {
		where := "own namespace"
		if !own {
			where = "shared namespace"
		}
		b.Run(where+"/poll every searched kind (before)", func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				owner := setup(b, own)
				b.StartTimer()
				_, err := DeleteOwned(ctx, cl, owner)
				require.NoError(b, err)
				kinds := searchKinds(append(append([]schema.GroupVersionKind{}, SearchKinds...), childKinds...), owner.Previous)
				for delay := 100 * time.Millisecond; ; delay = min(2*delay, time.Second) {
					time.Sleep(delay) // no signal: this poll with back-off is the old way, being measured
					owned, err := listOwned(ctx, cl, owner, kinds)
					require.NoError(b, err)
					if len(owned) == 0 {
						break
					}
				}
			}
		})
		b.Run(where+"/wait on the cache's delete events (now)", func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				owner := setup(b, own)
				b.StartTimer()
				require.NoError(b, DeleteAll(ctx, cl, owner))
			}
		})
	}
}
