package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

// BenchmarkGraph times GET /v1/graph (whole, and rooted at the definition every instance uses) with
// 2,000 instances over 5 runtimes stored.
func BenchmarkGraph(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	var rts []*api.KubernetesRuntime
	for i := range 5 {
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime(fmt.Sprintf("rt-%d", i)))
		require.NoError(b, err)
		rts = append(rts, rt)
	}
	def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition("web"))
	require.NoError(b, err)
	const n = 2000
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: fmt.Sprintf("i%05d", i)},
				Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rts[i%len(rts)].ID}})
			if err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, q := range []struct {
		root  string
		nodes int
	}{{"", n + len(rts) + 1}, {"workload_definition/web", n + 1}} {
		b.Run("root="+q.root, func(b *testing.B) {
			for range b.N {
				g, err := e.viewer.Graph(ctx, q.root)
				require.NoError(b, err)
				require.Len(b, g.Nodes, q.nodes)
			}
		})
	}
}
