package kube

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// BenchmarkListOwned compares, on one kubesim cluster, finding an owner's objects one kind after another
// (as before) with listing the kinds concurrently (as Prune, Owned and DeleteAll do now):
//
//	go test -run '^$' -bench ListOwned ./controlplane/compute/kube/
func BenchmarkListOwned(b *testing.B) {
	sim := kubesimtest.Start(b)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(b, err)
	rc, err := RESTConfigFromKubeconfig(raw, "")
	require.NoError(b, err)
	rc.QPS, rc.Burst = 1000, 2000
	cl, err := NewCluster(rc)
	require.NoError(b, err)
	ctx := context.Background()
	owner := Owner{InstanceID: "bench", Namespace: "bench"}
	kinds := searchKinds(SearchKinds)

	for _, bc := range []struct {
		name  string
		limit int
	}{{"one kind at a time", 1}, {"concurrent", listConcurrency}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_, err := listOwnedAtOnce(ctx, cl, owner, kinds, bc.limit)
				require.NoError(b, err)
			}
		})
	}
}
