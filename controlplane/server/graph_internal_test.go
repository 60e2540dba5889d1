package server

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

// connectedByScan is connected as it was before the edge index: each object reached scans every edge.
// Kept to check the new one against and to benchmark them side by side.
func connectedByScan(g *api.Graph, root string) *api.Graph {
	keep := map[string]bool{root: true}
	walk := func(next func(api.GraphEdge) (from, to string)) {
		queue := []string{root}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			for _, e := range g.Edges {
				if from, to := next(e); from == id && !keep[to] {
					keep[to] = true
					queue = append(queue, to)
				}
			}
		}
	}
	walk(func(e api.GraphEdge) (string, string) { return e.From, e.To })
	seen := map[string]bool{}
	for id := range keep {
		seen[id] = true
	}
	keep = map[string]bool{root: true}
	walk(func(e api.GraphEdge) (string, string) { return e.To, e.From })
	for id := range seen {
		keep[id] = true
	}
	out := &api.Graph{Root: root, Nodes: []api.GraphNode{}, Edges: []api.GraphEdge{}}
	for _, n := range g.Nodes {
		if keep[n.ID] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	for _, e := range g.Edges {
		if keep[e.From] && keep[e.To] {
			out.Edges = append(out.Edges, e)
		}
	}
	return out
}

// fleetGraph is the graph of n instances of one definition over rts runtimes, each instance also using
// the one before it (a chain, so that walks go deep), plus a gateway on every tenth.
func fleetGraph(n, rts int) *api.Graph {
	g := &api.Graph{}
	add := func(kind, id string) { g.Nodes = append(g.Nodes, api.GraphNode{Kind: kind, ID: id, Name: id}) }
	edge := func(from, to, why string) {
		g.Edges = append(g.Edges, api.GraphEdge{From: from, To: to, Type: api.EdgeReference, Why: why})
	}
	add(api.KindWorkloadDefinition, "def")
	for r := range rts {
		add(api.KindKubernetesRuntime, fmt.Sprintf("rt%d", r))
	}
	for i := range n {
		id := fmt.Sprintf("inst%d", i)
		add(api.KindWorkloadInstance, id)
		edge(id, "def", "spec.definition_id")
		edge(id, fmt.Sprintf("rt%d", i%rts), "spec.runtime_id")
		if i%7 == 3 {
			edge(id, fmt.Sprintf("inst%d", i-1), "spec.uses")
		}
		if i%10 == 0 {
			gw := "gw" + id
			add(api.KindGateway, gw)
			edge(gw, id, "spec.instance_id")
		}
	}
	return g
}

func ids(g *api.Graph) ([]string, []string) {
	var nodes, edges []string
	for _, n := range g.Nodes {
		nodes = append(nodes, n.ID)
	}
	for _, e := range g.Edges {
		edges = append(edges, e.From+">"+e.To)
	}
	sort.Strings(nodes)
	sort.Strings(edges)
	return nodes, edges
}

// TestConnectedMatchesTheScan: the indexed walk keeps exactly what the edge-scanning walk kept, from
// roots of every shape (a shared provider, a leaf, the middle of a chain, a gateway, an unknown id).
func TestConnectedMatchesTheScan(t *testing.T) {
	g := fleetGraph(300, 4)
	r := rand.New(rand.NewPCG(1, 2))
	roots := []string{"def", "rt1", "inst3", "inst2", "gwinst10", "missing"}
	for range 20 {
		roots = append(roots, g.Nodes[r.IntN(len(g.Nodes))].ID)
	}
	for _, root := range roots {
		want := connectedByScan(g, root)
		got := connected(g, root)
		wn, we := ids(want)
		gn, ge := ids(got)
		require.Equal(t, wn, gn, "nodes from %s", root)
		require.Equal(t, we, ge, "edges from %s", root)
		require.Equal(t, root, got.Root)
	}
	// A check of the shape itself: from the definition every consumer comes, transitively, but not the
	// runtimes (providers of its consumers, not of it).
	require.Len(t, connected(g, "def").Nodes, len(g.Nodes)-4)
	require.Len(t, connected(g, "inst3").Nodes, 5, "inst3, inst2 (used), def, rt3 and rt2")
}

// BenchmarkConnected compares the edge-scanning walk with the indexed one on 10,000 instances of one
// definition, rooted at the definition (every instance and gateway is reached).
func BenchmarkConnected(b *testing.B) {
	g := fleetGraph(10000, 5)
	for _, impl := range []struct {
		name string
		f    func(*api.Graph, string) *api.Graph
	}{{"scan", connectedByScan}, {"index", connected}} {
		b.Run(impl.name, func(b *testing.B) {
			for range b.N {
				if len(impl.f(g, "def").Nodes) != len(g.Nodes)-5 {
					b.Fatal("not every consumer reached")
				}
			}
		})
	}
}
