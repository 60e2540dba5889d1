package kube

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// BenchmarkFirstLookupOfAKind compares, on one kubesim cluster, the first look-up of a kind through a
// new connection's cache as it is now (Get: the watch's first fill closes a channel, asked every
// syncPoll) with the wait it replaced (client-go's WaitForCacheSync, which asks every 100ms). Each
// iteration opens a new connection, so each look-up starts its kind's watch:
//
//	go test -run '^$' -bench FirstLookupOfAKind -benchtime 20x ./controlplane/compute/kube/
func BenchmarkFirstLookupOfAKind(b *testing.B) {
	sim := kubesimtest.Start(b)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(b, err)
	rc, err := RESTConfigFromKubeconfig(raw, "")
	require.NoError(b, err)
	rc.QPS, rc.Burst = 100, 200
	ctx := context.Background()
	setup, err := NewCluster(rc)
	require.NoError(b, err)
	b.Cleanup(setup.Close)
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings"}, "data": map[string]any{"a": "1"}}}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "first"}}}
	_, err = Apply(ctx, setup, Owner{InstanceID: "bench-first", Namespace: "first"}, []*unstructured.Unstructured{ns, cm})
	require.NoError(b, err)
	ref := AppliedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "first", Name: "settings"}

	b.Run("now: a channel closed at the first fill", func(b *testing.B) {
		for b.Loop() {
			cl, err := NewCluster(rc)
			require.NoError(b, err)
			got, err := cl.Cache().Get(ctx, ref)
			require.NoError(b, err)
			require.NotNil(b, got)
			cl.Close()
		}
	})
	b.Run("before: WaitForCacheSync, every 100ms", func(b *testing.B) {
		for b.Loop() {
			cl, err := NewCluster(rc)
			require.NoError(b, err)
			inf, _, err := cl.Cache().informer(ref.GroupKind(), "v1")
			require.NoError(b, err)
			require.True(b, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
			_, exists, err := inf.GetIndexer().GetByKey("first/settings")
			require.NoError(b, err)
			require.True(b, exists)
			cl.Close()
		}
	})
}
