package api

import (
	"fmt"
	"time"
)

// Edge types of the dependency graph.
const (
	// EdgeReference is a spec field naming another object (an instance's definition, its pinned runtime,
	// the instances a secret serves).
	EdgeReference = "reference"
	// EdgePlacement is a status field naming what a controller placed the object on or gave it: the
	// runtimes of status.placements, a gateway's support services, the secrets in status.dependencies.
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
	// Attached says the consumer exists for the provider (a gateway routes traffic to its instance): what
	// the consumer needs counts among what the provider needs (Graph.Needs), and the graph rooted at the
	// provider includes it.
	Attached bool `json:"attached,omitempty"`
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

// Needs returns the edges of what id needs: its providers (e.To), and the consumers attached to it
// (e.From; a gateway that routes to the instance), whose own needs count among id's.
func (g *Graph) Needs(id string) []GraphEdge {
	return g.edges(func(e GraphEdge) bool { return e.From == id || (e.To == id && e.Attached) })
}

// Other returns the end of e that is not id.
func (e GraphEdge) Other(id string) string {
	if e.From == id {
		return e.To
	}
	return e.From
}

// RootCause follows id's providers that are not reconciled, depth first, to the deepest one: the
// chain from id to what it ultimately waits on (id itself first). At each step the provider the object
// says it waits on (WaitingOn) comes first, even when that provider is reconciled itself: then the wait
// is on how the two stand to each other (a used instance placed where its consumer is not, see
// MissingPlacements), and the provider ends the chain. An object whose providers are all reconciled,
// and that names none it waits on, ends the chain.
func (g *Graph) RootCause(id string) []GraphNode {
	var chain []GraphNode
	seen := map[string]bool{}
	for n := g.Node(id); n != nil && !seen[n.ID]; {
		seen[n.ID] = true
		chain = append(chain, *n)
		var next *GraphNode
		for _, e := range g.Providers(n.ID) {
			p := g.Node(e.To)
			if p == nil || seen[p.ID] {
				continue
			}
			if n.WaitingOn != "" && n.WaitingOn == fmt.Sprintf("%s %q", p.Kind, p.Name) {
				next = p
				break
			}
			if next == nil && !p.Reconciled {
				next = p
			}
		}
		if next != nil && next.Reconciled {
			chain = append(chain, *next)
			break
		}
		n = next
	}
	return chain
}

// Placements returns the runtimes id runs on: its kubernetes_runtime providers (a pinned runtime, the
// runtimes of its placements), not an owner.
func (g *Graph) Placements(id string) []GraphNode {
	var out []GraphNode
	for _, e := range g.Providers(id) {
		if n := g.Node(e.To); e.Type != EdgeOwner && n != nil && n.Kind == KindKubernetesRuntime {
			out = append(out, *n)
		}
	}
	return out
}

// MissingPlacements returns the runtimes the consumer is placed on where the provider is not, when the
// provider is placed anywhere: a used instance placed only in another region leaves its consumer waiting
// there, although it is Ready where it runs.
func (g *Graph) MissingPlacements(consumer, provider string) []GraphNode {
	theirs := g.Placements(provider)
	if len(theirs) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, n := range theirs {
		have[n.ID] = true
	}
	var out []GraphNode
	for _, n := range g.Placements(consumer) {
		if !have[n.ID] {
			out = append(out, n)
		}
	}
	return out
}
