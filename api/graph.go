package api

import (
	"fmt"
	"time"
)

// Edge types of the dependency graph.
const (
	// EdgeReference is a spec field naming another object (an instance's definition, its pinned runtime).
	EdgeReference = "reference"
	// EdgePlacement is a runtime a controller placed the object on (status.placements).
	EdgePlacement = "placement"
	// EdgeOwner is the object this one was created for, or from (a runtime provisioned from a profile).
	EdgeOwner = "owner"
)

// GraphNode is one object of the dependency graph, with the state that explains it.
type GraphNode struct {
	// Kind, ID and Name identify the object.
	Kind string `json:"kind"`
	// ID is the object's id.
	ID string `json:"id"`
	// Name is the object's name.
	Name string `json:"name"`
	// Labels are the object's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Phase is the object's phase.
	Phase Phase `json:"phase,omitempty"`
	// Reconciled says the object is Ready at its generation.
	Reconciled bool `json:"reconciled"`
	// Message explains a phase that is not Ready.
	Message string `json:"message,omitempty"`
	// WaitingOn names what the object waits on, when it waits.
	WaitingOn string `json:"waiting_on,omitempty"`
	// WaitingSince is when it began to wait.
	WaitingSince *time.Time `json:"waiting_since,omitempty"`
	// Deleting says the object's deletion was requested.
	Deleting bool `json:"deleting,omitempty"`
	// CreatedAt is when the object was created.
	CreatedAt time.Time `json:"created_at"`
}

// GraphEdge goes from a consumer to the provider it depends on.
type GraphEdge struct {
	// From is the consumer's id.
	From string `json:"from"`
	// To is the provider's id.
	To string `json:"to"`
	// Type is reference, placement or owner.
	Type string `json:"type"`
	// Why names the field that makes the edge, e.g. "spec.runtime_id" or "status.placements[0].runtime_id".
	Why string `json:"why"`
}

// Graph is the dependency graph, or the part of it connected to a root.
type Graph struct {
	// Root is the id of the object the graph was asked for; empty for the whole graph.
	Root string `json:"root,omitempty"`
	// Nodes are the objects, ordered by kind and name.
	Nodes []GraphNode `json:"nodes"`
	// Edges go from consumers to providers.
	Edges []GraphEdge `json:"edges"`
}

// Node returns the node with the given id, or nil.
func (g *Graph) Node(id string) *GraphNode {
	for i := range g.Nodes {
		if g.Nodes[i].ID == id {
			return &g.Nodes[i]
		}
	}
	return nil
}

// Providers returns the edges from id to what it depends on.
func (g *Graph) Providers(id string) []GraphEdge {
	return g.edges(func(e GraphEdge) bool { return e.From == id })
}

// Consumers returns the edges into id from what depends on it.
func (g *Graph) Consumers(id string) []GraphEdge {
	return g.edges(func(e GraphEdge) bool { return e.To == id })
}

func (g *Graph) edges(keep func(GraphEdge) bool) []GraphEdge {
	var out []GraphEdge
	for _, e := range g.Edges {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// RootCause follows id's providers that are not reconciled, depth first, to the deepest one: the
// chain from id to what it ultimately waits on (id itself first). At each step the provider the object
// says it waits on (WaitingOn) comes first. An object whose providers are all reconciled ends the chain.
func (g *Graph) RootCause(id string) []GraphNode {
	var chain []GraphNode
	seen := map[string]bool{}
	for n := g.Node(id); n != nil && !seen[n.ID]; {
		seen[n.ID] = true
		chain = append(chain, *n)
		var next *GraphNode
		for _, e := range g.Providers(n.ID) {
			p := g.Node(e.To)
			if p == nil || p.Reconciled || seen[p.ID] {
				continue
			}
			if next == nil || n.WaitingOn == fmt.Sprintf("%s %q", p.Kind, p.Name) {
				next = p
			}
		}
		n = next
	}
	return chain
}
