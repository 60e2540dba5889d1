package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

func (q *cli) graphCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "graph [KIND NAME]",
		Short: "Print the dependency graph as trees",
		Long: `graph prints, for an object, what it depends on and what depends on it; with no object, every object
that nothing depends on, with its dependencies. The same graph is served at GET /v1/graph.`,
		Example: `  qleet graph
  qleet graph instance web
  qleet graph -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return usagef("usage: %s", cmd.UseLine())
			}
			if len(args) == 2 {
				_, err := resolveKind(args[0])
				return err
			}
			return nil
		},
		ValidArgsFunction: q.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := q.client()
			if err != nil {
				return err
			}
			root := ""
			if len(args) == 2 {
				kind, _ := resolveKind(args[0])
				root = kind + "/" + args[1]
			}
			g, err := cl.Graph(cmd.Context(), root)
			if err != nil {
				return err
			}
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, g)
			}
			printGraph(cmd.OutOrStdout(), g, time.Now(), width(output, 120))
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	q.addConnFlags(cmd.Flags())
	return cmd
}

// printGraph writes the trees of a graph. Rooted at an object, the first tree is everything the object
// needs (api.Graph.Needs: its providers, and the objects attached to it such as its gateways, each with
// what it needs in turn), and the second what uses it.
func printGraph(w io.Writer, g *api.Graph, now time.Time, msgWidth int) {
	if g.Root != "" {
		n := g.Node(g.Root)
		fmt.Fprintln(w, nodeLine(n, now, msgWidth))
		printTree(w, g, g.Root, "", g.Needs, now, msgWidth, map[string]bool{g.Root: true})
		usedBy := func(id string) []api.GraphEdge {
			var out []api.GraphEdge
			for _, e := range g.Consumers(id) {
				if !e.Attached || id != g.Root {
					out = append(out, e)
				}
			}
			return out
		}
		if cs := usedBy(g.Root); len(cs) > 0 {
			fmt.Fprintf(w, "\nused by:\n")
			fmt.Fprintln(w, nodeLine(n, now, msgWidth))
			printTree(w, g, g.Root, "", usedBy, now, msgWidth, map[string]bool{g.Root: true})
		}
		return
	}
	for _, n := range g.Nodes {
		if len(g.Consumers(n.ID)) > 0 {
			continue
		}
		fmt.Fprintln(w, nodeLine(&n, now, msgWidth))
		printTree(w, g, n.ID, "", g.Providers, now, msgWidth, map[string]bool{n.ID: true})
	}
}

// printTree writes the objects that edges(id) lead to (the end of each edge that is not id), and theirs
// in turn; an object already written is not expanded again.
func printTree(w io.Writer, g *api.Graph, id, indent string, edges func(string) []api.GraphEdge, now time.Time, msgWidth int, seen map[string]bool) {
	es := edges(id)
	for i, e := range es {
		branch, next := "├── ", "│   "
		if i == len(es)-1 {
			branch, next = "└── ", "    "
		}
		n := g.Node(e.Other(id))
		if n == nil {
			continue
		}
		why := e.Why
		if e.Attached && e.To == id {
			why = "attached: " + n.Kind + " " + e.Why
		}
		fmt.Fprintf(w, "%s%s%s  [%s]\n", indent, branch, nodeLine(n, now, msgWidth), why)
		if !seen[n.ID] {
			seen[n.ID] = true
			printTree(w, g, n.ID, indent+next, edges, now, msgWidth, seen)
		}
	}
}

// nodeLine is `kind/name  Phase  message (waiting on ..., for ...)`.
func nodeLine(n *api.GraphNode, now time.Time, msgWidth int) string {
	phase := string(n.Phase)
	if phase == "" {
		phase = "Pending"
	}
	if n.Deleting {
		phase += " (deleting)"
	}
	line := fmt.Sprintf("%s/%s  %s", n.Kind, n.Name, phase)
	if n.Message != "" && !n.Reconciled {
		line += "  " + truncate(n.Message, msgWidth)
	}
	if n.WaitingSince != nil && n.Message == "" {
		line += fmt.Sprintf("  waiting on %s for %s", n.WaitingOn, now.Sub(*n.WaitingSince).Truncate(time.Second))
	}
	return line
}

// waitChain is describe's "Root cause" line: the chain from the object to the root cause of its wait.
// Each object after the first says its state; the last one, when it is reconciled itself, says why the
// one before still waits on it (placed where its consumer is not), never just "Ready".
func waitChain(ctx context.Context, cl *client.Client, kind, id string) (string, error) {
	g, err := cl.Graph(ctx, kind+"/"+id)
	if err != nil {
		return "", err
	}
	return rootCauseLine(g, id, time.Now()), nil
}

// rootCauseLine renders g.RootCause(id); empty when nothing blocks id beyond itself.
func rootCauseLine(g *api.Graph, id string, now time.Time) string {
	chain := g.RootCause(id)
	if len(chain) < 2 {
		return ""
	}
	parts := make([]string, len(chain))
	for i, n := range chain {
		parts[i] = fmt.Sprintf("%s %q", n.Kind, n.Name)
		if i == 0 {
			continue
		}
		var state string
		switch {
		case n.Reconciled:
			state = fmt.Sprintf("reconciled itself, yet %s %q waits on it", chain[i-1].Kind, chain[i-1].Name)
			if missing := g.MissingPlacements(chain[i-1].ID, n.ID); len(missing) > 0 {
				state = fmt.Sprintf("not placed on %s, where %s %q runs; it runs on %s",
					nodeNames(missing), chain[i-1].Kind, chain[i-1].Name, nodeNames(g.Placements(n.ID)))
			}
		case n.Kind == api.KindKubernetesRuntime && n.Labels[api.LabelProfile] != "":
			state = fmt.Sprintf("%s: provisioning from runtime_profile %q, %s", orPending(n.Phase), n.Labels[api.LabelProfile], now.Sub(n.CreatedAt).Truncate(time.Second))
		case n.Message != "":
			state = orPending(n.Phase) + ": " + truncate(n.Message, 100)
		default:
			state = orPending(n.Phase)
		}
		parts[i] += " (" + state + ")"
	}
	return strings.Join(parts, " → ")
}

func orPending(p api.Phase) string {
	if p == "" {
		return string(api.PhasePending)
	}
	return string(p)
}

// nodeNames is `kubernetes_runtime "a", kubernetes_runtime "b"`.
func nodeNames(ns []api.GraphNode) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprintf("%s %q", n.Kind, n.Name)
	}
	return strings.Join(parts, ", ")
}
