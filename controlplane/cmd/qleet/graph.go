package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
)

// runGraph prints the dependency graph as trees: for an object, what it depends on and what depends on
// it; with no object, every object that nothing depends on, with its dependencies.
func runGraph(ctx context.Context, args []string) error {
	output := "table"
	var pos []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			output = args[i+1]
			i++
		case strings.HasPrefix(a, "-o="):
			output = strings.TrimPrefix(a, "-o=")
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 0 && len(pos) != 2 || output != "table" && output != "json" {
		return usageError{"usage: qleet graph [<kind> <name>] [-o table|json]"}
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	root := ""
	if len(pos) == 2 {
		kind, err := resolveKind(pos[0])
		if err != nil {
			return err
		}
		root = kind + "/" + pos[1]
	}
	g, err := cl.Graph(ctx, root)
	if err != nil {
		return err
	}
	if output == "json" {
		return printJSON(g)
	}
	printGraph(os.Stdout, g, time.Now())
	return nil
}

// printGraph writes the trees of a graph.
func printGraph(w io.Writer, g *client.Graph, now time.Time) {
	if g.Root != "" {
		n := g.Node(g.Root)
		fmt.Fprintln(w, nodeLine(n, now))
		printTree(w, g, g.Root, "", g.Providers, func(e client.GraphEdge) string { return e.To }, now, map[string]bool{g.Root: true})
		if cs := g.Consumers(g.Root); len(cs) > 0 {
			fmt.Fprintf(w, "\nused by:\n")
			fmt.Fprintln(w, nodeLine(n, now))
			printTree(w, g, g.Root, "", g.Consumers, func(e client.GraphEdge) string { return e.From }, now, map[string]bool{g.Root: true})
		}
		return
	}
	for _, n := range g.Nodes {
		if len(g.Consumers(n.ID)) > 0 {
			continue
		}
		fmt.Fprintln(w, nodeLine(&n, now))
		printTree(w, g, n.ID, "", g.Providers, func(e client.GraphEdge) string { return e.To }, now, map[string]bool{n.ID: true})
	}
}

func printTree(w io.Writer, g *client.Graph, id, indent string, edges func(string) []client.GraphEdge, other func(client.GraphEdge) string, now time.Time, seen map[string]bool) {
	es := edges(id)
	for i, e := range es {
		branch, next := "├── ", "│   "
		if i == len(es)-1 {
			branch, next = "└── ", "    "
		}
		n := g.Node(other(e))
		if n == nil {
			continue
		}
		fmt.Fprintf(w, "%s%s%s  [%s]\n", indent, branch, nodeLine(n, now), e.Why)
		if !seen[n.ID] {
			seen[n.ID] = true
			printTree(w, g, n.ID, indent+next, edges, other, now, seen)
		}
	}
}

// nodeLine is `kind/name  Phase  message (waiting on ..., for ...)`.
func nodeLine(n *client.GraphNode, now time.Time) string {
	phase := string(n.Phase)
	if phase == "" {
		phase = "Pending"
	}
	if n.Deleting {
		phase += " (deleting)"
	}
	line := fmt.Sprintf("%s/%s  %s", n.Kind, n.Name, phase)
	if n.Message != "" && !n.Reconciled {
		line += "  " + truncate(n.Message, 120)
	}
	if n.WaitingSince != nil && n.Message == "" {
		line += fmt.Sprintf("  waiting on %s for %s", n.WaitingOn, now.Sub(*n.WaitingSince).Truncate(time.Second))
	}
	return line
}

// waitChain is describe's "Waiting on" line: the chain from the object to the root cause of its wait.
func waitChain(ctx context.Context, cl *client.Client, kind, id string) (string, error) {
	g, err := cl.Graph(ctx, kind+"/"+id)
	if err != nil {
		return "", err
	}
	chain := g.RootCause(id)
	if len(chain) < 2 {
		return "", nil
	}
	parts := make([]string, len(chain))
	for i, n := range chain {
		parts[i] = fmt.Sprintf("%s %q", n.Kind, n.Name)
		if i > 0 {
			state := string(n.Phase)
			if state == "" {
				state = "Pending"
			}
			if prof := n.Labels[client.LabelProfile]; prof != "" && n.Kind == client.KindKubernetesRuntime {
				state += fmt.Sprintf(": provisioning from runtime_profile %q, %s", prof, time.Since(n.CreatedAt).Truncate(time.Second))
			} else if n.Message != "" {
				state += ": " + truncate(n.Message, 100)
			}
			parts[i] += " (" + state + ")"
		}
	}
	return strings.Join(parts, " → "), nil
}
