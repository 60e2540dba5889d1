package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// graph serves GET /v1/graph[?root=<kind>/<id or name>]: the objects and the edges between them, from
// consumers to providers, each naming the field that makes it.
func (s *Server) graph(w http.ResponseWriter, r *http.Request) {
	g, err := s.buildGraph(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if root := r.URL.Query().Get("root"); root != "" {
		id, err := s.resolveRoot(r.Context(), root)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		g = connected(g, id)
	}
	writeJSON(w, http.StatusOK, g)
}

// resolveRoot turns "<kind>/<id or name>" into an id.
func (s *Server) resolveRoot(ctx context.Context, root string) (string, error) {
	kind, ref, ok := strings.Cut(root, "/")
	ki, known := api.LookupKind(kind)
	if !known {
		ki, known = api.LookupPlural(kind)
	}
	if !ok || !known || ref == "" {
		return "", &api.Error{Code: api.CodeInvalid, Field: "root", Message: fmt.Sprintf("must be <kind>/<id or name>, e.g. workload_instance/web, not %q", root)}
	}
	obj, err := s.cfg.Store.Get(ctx, ki.Kind, ref)
	if errors.Is(err, store.ErrNotFound) {
		obj, err = s.cfg.Store.GetByName(ctx, ki.Kind, ref)
	}
	if err != nil {
		return "", err
	}
	return obj.ID, nil
}

// buildGraph reads every object and derives the edges from their specs (references), statuses
// (placements) and owners.
func (s *Server) buildGraph(ctx context.Context) (*api.Graph, error) {
	g := &api.Graph{Nodes: []api.GraphNode{}, Edges: []api.GraphEdge{}}
	exists := map[string]bool{}
	for _, ki := range api.Kinds() {
		err := s.eachObject(ctx, ki, func(o *store.Object) {
			exists[o.ID] = true
			g.Nodes = append(g.Nodes, graphNode(o))
			g.Edges = append(g.Edges, objectEdges(ki, o)...)
		})
		if err != nil {
			return nil, err
		}
	}
	// One edge per consumer and provider: a pinned runtime is also the instance's placement. An owner
	// that also uses what it owns (a gateway and the support service it installed) keeps the use only,
	// so that the graph has no cycle.
	uses := map[[2]string]bool{}
	for _, e := range g.Edges {
		if e.Type != api.EdgeOwner {
			uses[[2]string{e.From, e.To}] = true
		}
	}
	edges := g.Edges[:0]
	seen := map[[2]string]bool{}
	for _, e := range g.Edges {
		if e.Type == api.EdgeOwner && uses[[2]string{e.To, e.From}] {
			continue
		}
		if exists[e.To] && exists[e.From] && !seen[[2]string{e.From, e.To}] {
			seen[[2]string{e.From, e.To}] = true
			edges = append(edges, e)
		}
	}
	g.Edges = edges
	sort.SliceStable(g.Nodes, func(i, j int) bool {
		if g.Nodes[i].Kind != g.Nodes[j].Kind {
			return g.Nodes[i].Kind < g.Nodes[j].Kind
		}
		return g.Nodes[i].Name < g.Nodes[j].Name
	})
	return g, nil
}

func graphNode(o *store.Object) api.GraphNode {
	var st api.Status
	_ = json.Unmarshal(o.Status, &st)
	n := api.GraphNode{Kind: o.Kind, ID: o.ID, Name: o.Name, Labels: o.Labels, Phase: st.Phase, Message: st.Message,
		Reconciled: api.Reconciled(o.Generation, &st), Deleting: o.DeletionRequestedAt != nil, CreatedAt: o.CreatedAt}
	for _, c := range st.Conditions {
		if c.Type == "Ready" && c.Status != api.ConditionTrue && c.WaitingOn != "" {
			since := c.LastTransitionTime
			n.WaitingOn, n.WaitingSince = c.WaitingOn, &since
		}
	}
	return n
}

// objectEdges are all the edges an object makes: those that protect deletes (graphEdges), then one for
// every other reference field of its spec and status (api.KindInfo.References: found by construction, so
// that a field added to a kind is an edge without a list to keep up by hand). An edge already made by
// graphEdges is not repeated.
func objectEdges(ki *api.KindInfo, o *store.Object) []api.GraphEdge {
	out := graphEdges(ki, o)
	have := map[[3]string]bool{}
	for _, e := range out {
		have[[3]string{e.From, e.To, e.Why}] = true
	}
	spec, status := ki.NewSpec(), ki.NewStatus()
	if json.Unmarshal(o.Spec, spec) != nil {
		spec = nil
	}
	if len(o.Status) == 0 || json.Unmarshal(o.Status, status) != nil {
		status = nil
	}
	for _, r := range ki.References(spec, status) {
		e := api.GraphEdge{From: o.ID, To: r.ID, Type: api.EdgeReference, Why: r.Field, Attached: r.Direction == api.RefAttached}
		if strings.HasPrefix(r.Field, "status.") {
			e.Type = api.EdgePlacement
		}
		if r.Direction == api.RefUsedBy {
			e.From, e.To, e.Why = r.ID, o.ID, o.Kind+" "+r.Field
		}
		if k := [3]string{e.From, e.To, e.Why}; !have[k] {
			have[k] = true
			out = append(out, e)
		} else if e.Attached {
			for i := range out {
				if out[i].From == e.From && out[i].To == e.To && out[i].Why == e.Why {
					out[i].Attached = true
				}
			}
		}
	}
	return out
}

// graphEdges are the edges an object makes that protect deletes, as the store's reference rows say: its
// spec's references (KindInfo.Refs and UsedBy), its status's (KindInfo.StatusRefs), and its owners.
func graphEdges(ki *api.KindInfo, o *store.Object) []api.GraphEdge {
	var out []api.GraphEdge
	spec := ki.NewSpec()
	if json.Unmarshal(o.Spec, spec) == nil {
		for _, r := range ki.Refs(spec) {
			out = append(out, api.GraphEdge{From: o.ID, To: r.ID, Type: api.EdgeReference, Why: r.Field})
		}
		// An object attached to its user by its own field: the edge goes from the user to it.
		for _, r := range ki.UsedBy(spec) {
			out = append(out, api.GraphEdge{From: r.ID, To: o.ID, Type: api.EdgeReference, Why: o.Kind + " " + r.Field})
		}
	}
	if ki.StatusRefs != nil {
		status := ki.NewStatus()
		if json.Unmarshal(o.Status, status) == nil {
			for _, r := range ki.StatusRefs(status) {
				out = append(out, api.GraphEdge{From: o.ID, To: r.ID, Type: api.EdgePlacement, Why: r.Field})
			}
		}
	}
	for _, ow := range o.Owners {
		out = append(out, api.GraphEdge{From: o.ID, To: ow.ID, Type: api.EdgeOwner, Why: "owners"})
	}
	return out
}

// connected keeps root, everything it needs (its providers and the consumers attached to it, such as its
// gateways, and what those need in turn: api.Graph.Needs), and everything that depends on it, transitively.
// Each walk follows an index of the edges by endpoint, so that it costs the edges it meets, not every edge
// per object reached (which was quadratic: seconds at 10,000 instances of one definition).
func connected(g *api.Graph, root string) *api.Graph {
	needs := make(map[string][]string, len(g.Nodes))
	consumers := make(map[string][]string, len(g.Nodes))
	for _, e := range g.Edges {
		needs[e.From] = append(needs[e.From], e.To)
		consumers[e.To] = append(consumers[e.To], e.From)
		if e.Attached {
			needs[e.To] = append(needs[e.To], e.From)
		}
	}
	walk := func(next map[string][]string) map[string]bool {
		reached := map[string]bool{root: true}
		queue := []string{root}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			for _, to := range next[id] {
				if !reached[to] {
					reached[to] = true
					queue = append(queue, to)
				}
			}
		}
		return reached
	}
	keep := walk(needs)
	for id := range walk(consumers) {
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
