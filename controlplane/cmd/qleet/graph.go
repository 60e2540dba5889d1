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

// printGraph writes the trees of a graph.
func printGraph(w io.Writer, g *api.Graph, now time.Time, msgWidth int) {
	if g.Root != "" {
		n := g.Node(g.Root)
		fmt.Fprintln(w, nodeLine(n, now, msgWidth))
		printTree(w, g, g.Root, "", g.Providers, func(e api.GraphEdge) string { return e.To }, now, msgWidth, map[string]bool{g.Root: true})
		if cs := g.Consumers(g.Root); len(cs) > 0 {
			fmt.Fprintf(w, "\nused by:\n")
			fmt.Fprintln(w, nodeLine(n, now, msgWidth))
			printTree(w, g, g.Root, "", g.Consumers, func(e api.GraphEdge) string { return e.From }, now, msgWidth, map[string]bool{g.Root: true})
		}
		return
	}
	for _, n := range g.Nodes {
		if len(g.Consumers(n.ID)) > 0 {
			continue
		}
		fmt.Fprintln(w, nodeLine(&n, now, msgWidth))
		printTree(w, g, n.ID, "", g.Providers, func(e api.GraphEdge) string { return e.To }, now, msgWidth, map[string]bool{n.ID: true})
	}
}

func printTree(w io.Writer, g *api.Graph, id, indent string, edges func(string) []api.GraphEdge, other func(api.GraphEdge) string, now time.Time, msgWidth int, seen map[string]bool) {
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
		fmt.Fprintf(w, "%s%s%s  [%s]\n", indent, branch, nodeLine(n, now, msgWidth), e.Why)
		if !seen[n.ID] {
			seen[n.ID] = true
			printTree(w, g, n.ID, indent+next, edges, other, now, msgWidth, seen)
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
			if prof := n.Labels[api.LabelProfile]; prof != "" && n.Kind == api.KindKubernetesRuntime {
				state += fmt.Sprintf(": provisioning from runtime_profile %q, %s", prof, time.Since(n.CreatedAt).Truncate(time.Second))
			} else if n.Message != "" {
				state += ": " + truncate(n.Message, 100)
			}
			parts[i] += " (" + state + ")"
		}
	}
	return strings.Join(parts, " → "), nil
}
