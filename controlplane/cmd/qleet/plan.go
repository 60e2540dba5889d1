package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

func (q *cli) planCmd() *cobra.Command {
	var files, deletes []string
	var cascade bool
	var output string
	cmd := &cobra.Command{
		Use:   "plan -f FILE [--delete KIND/NAME]",
		Short: "Preview what creating, updating or deleting objects would do; nothing is written",
		Long: `plan sends changes to POST /v1/plans and prints what applying them would do: the requested creates,
updates and deletes, and what they imply (runtimes provisioned from which profile in which region,
support services installed or removed, dependencies created, instances rolled), each with its reason.
A change the real write would refuse fails the plan the same way. Nothing is written.

FILE (JSON or YAML; - reads stdin) holds either objects as the API returns them (one, a list, or
{"items": [...]}), each with its kind and name, where an object that exists is an update and any other
a create; or a plan request: {"changes": [{"op": "create", "kind": "workload_instance", "name": "web",
"spec": {...}}, ...]}. A create may carry an "id" of its own choosing that other objects of the file
reference, e.g. an instance's definition_id naming a definition the file creates.`,
		Example: `  qleet plan -f quickstart.json
  qleet get instance web -o yaml > web.yaml; $EDITOR web.yaml; qleet plan -f web.yaml
  qleet plan --delete runtime/eu-west --cascade`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if len(files) == 0 && len(deletes) == 0 {
				return usagef("plan: give the changes with -f FILE or --delete KIND/NAME")
			}
			cl, err := q.client()
			if err != nil {
				return err
			}
			var req api.PlanRequest
			for _, f := range files {
				changes, err := readChanges(cmd.Context(), cl, cmd.InOrStdin(), f)
				if err != nil {
					return err
				}
				req.Changes = append(req.Changes, changes...)
			}
			for _, d := range deletes {
				kind, name, ok := strings.Cut(d, "/")
				if !ok || name == "" {
					return usagef("--delete %q: want KIND/NAME, e.g. runtime/eu-west", d)
				}
				k, err := resolveKind(kind)
				if err != nil {
					return err
				}
				req.Changes = append(req.Changes, api.PlanChange{Op: api.PlanDelete, Kind: k, Name: name, Cascade: cascade})
			}
			res, err := cl.Plan(cmd.Context(), req)
			if err != nil {
				return err
			}
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, res)
			}
			return printPlan(cmd.OutOrStdout(), res, output)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a JSON or YAML file of objects or of a plan request; - is stdin (repeatable)")
	cmd.Flags().StringArrayVar(&deletes, "delete", nil, "also preview deleting KIND/NAME, e.g. runtime/eu-west (repeatable)")
	cmd.Flags().BoolVar(&cascade, "cascade", false, "the --delete changes delete dependents too")
	_ = cmd.MarkFlagFilename("filename", "json", "yaml", "yml")
	addOutputFlag(cmd, &output)
	q.addConnFlags(cmd.Flags())
	return cmd
}

// readChanges reads a file of objects or a plan request. Objects become creates, or updates of the
// objects of the same kind and name that exist.
func readChanges(ctx context.Context, cl *client.Client, stdin io.Reader, path string) ([]api.PlanChange, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("plan: %s: %w", path, err)
	}
	js = bytes.TrimSpace(js)
	var objs []json.RawMessage
	switch {
	case bytes.HasPrefix(js, []byte("[")):
		if err := json.Unmarshal(js, &objs); err != nil {
			return nil, fmt.Errorf("plan: %s: %w", path, err)
		}
	case bytes.HasPrefix(js, []byte("{")):
		var probe struct {
			Changes []api.PlanChange  `json:"changes"`
			Items   []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &probe); err != nil {
			return nil, fmt.Errorf("plan: %s: %w", path, err)
		}
		switch {
		case probe.Changes != nil:
			for i := range probe.Changes {
				if k, err := resolveKind(probe.Changes[i].Kind); err == nil {
					probe.Changes[i].Kind = k
				}
			}
			return probe.Changes, nil
		case probe.Items != nil:
			objs = probe.Items
		default:
			objs = []json.RawMessage{js}
		}
	default:
		return nil, fmt.Errorf("plan: %s: want objects or a plan request, as JSON or YAML", path)
	}
	changes := make([]api.PlanChange, 0, len(objs))
	for i, raw := range objs {
		var o api.RawObject
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("plan: %s: object %d: %w", path, i, err)
		}
		if o.Kind == "" || o.Name == "" {
			return nil, fmt.Errorf("plan: %s: object %d: needs a kind and a name", path, i)
		}
		kind, err := resolveKind(o.Kind)
		if err != nil {
			return nil, fmt.Errorf("plan: %s: object %d: %w", path, i, err)
		}
		ch := api.PlanChange{Op: api.PlanCreate, Kind: kind, ID: o.ID, Name: o.Name, Labels: o.Labels, Spec: o.Spec}
		cur, err := cl.Raw(kind).GetByName(ctx, o.Name)
		switch {
		case err == nil:
			ch.Op, ch.ID = api.PlanUpdate, cur.ID
		case !api.IsNotFound(err):
			return nil, err
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

// printPlan writes the actions as a table, then the summary of what the changes imply.
func printPlan(w io.Writer, res *api.PlanResult, output string) error {
	if len(res.Actions) == 0 {
		fmt.Fprintln(w, "No changes.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if output == outWide {
			fmt.Fprintln(tw, "ACTION\tKIND\tNAME\tDETAIL\tID\tCAUSE\tREASON")
		} else {
			fmt.Fprintln(tw, "ACTION\tKIND\tNAME\tDETAIL\tREASON")
		}
		for _, a := range res.Actions {
			if output == outWide {
				cause := "requested"
				if a.Cause != nil {
					cause = a.Cause.Kind + "/" + a.Cause.Name
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Action, a.Kind, a.Name, orDash(actionDetail(a)), a.ID, cause, a.Reason)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Action, a.Kind, a.Name, orDash(actionDetail(a)), truncate(a.Reason, 70))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if sum := res.Summary(); len(sum) > 0 {
		fmt.Fprintln(w, "\nBeyond the requested changes:")
		for _, l := range sum {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	return nil
}

// actionDetail is where an action happens: a region and profile, a runtime, or the provider of a
// dependency.
func actionDetail(a api.PlanAction) string {
	switch a.Action {
	case api.ActionProvision:
		return fmt.Sprintf("in %s from runtime_profile %q", a.Region, a.Profile)
	case api.ActionInstall, api.ActionRemove:
		return fmt.Sprintf("%s on kubernetes_runtime %q", a.SupportType, a.Runtime)
	case api.ActionDepend:
		if a.Provider != nil {
			return "on " + a.Provider.Kind + "/" + a.Provider.Name
		}
	}
	if a.Runtime != "" {
		return fmt.Sprintf("on kubernetes_runtime %q", a.Runtime)
	}
	return ""
}

// deleteKeeps asks the delete's preview what outlives it: a runtime provisioned for the object that
// runs on until its profile's reclaim_after, the data of a database or bucket deleted with retain. It
// says nothing when the preview cannot tell (the delete itself reports a refusal).
func deleteKeeps(ctx context.Context, cl *client.Client, kind, id string, cascade bool) []api.PlanAction {
	res, err := cl.Plan(ctx, api.PlanRequest{Changes: []api.PlanChange{{Op: api.PlanDelete, Kind: kind, ID: id, Cascade: cascade}}})
	if err != nil {
		return nil
	}
	var out []api.PlanAction
	for _, a := range res.Actions {
		if a.Action == api.ActionKeep {
			out = append(out, a)
		}
	}
	return out
}

// printKeeps writes what outlives a delete, one line each.
func printKeeps(w io.Writer, kept []api.PlanAction) {
	if len(kept) == 0 {
		return
	}
	fmt.Fprintln(w, "What stays after it:")
	for _, a := range kept {
		fmt.Fprintf(w, "  %s %q: %s\n", a.Kind, a.Name, a.Reason)
	}
}
