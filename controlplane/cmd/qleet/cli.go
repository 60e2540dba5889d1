package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// kindAlias resolves a kind's short name (see api.KindInfo.ShortNames), singular or with an "s".
func kindAlias(s string) (string, bool) {
	for _, ki := range api.Kinds() {
		for _, n := range ki.ShortNames {
			if s == n || s == n+"s" {
				return ki.Kind, true
			}
		}
	}
	return "", false
}

// kindNames are the singular names of the registered kinds.
func kindNames() []string {
	var out []string
	for _, ki := range api.Kinds() {
		out = append(out, ki.Kind)
	}
	return out
}

// resolveKind accepts a kind's singular or plural name, or a short alias.
func resolveKind(s string) (string, error) {
	if k, ok := kindAlias(s); ok {
		return k, nil
	}
	if ki, ok := api.LookupKind(s); ok {
		return ki.Kind, nil
	}
	if ki, ok := api.LookupPlural(s); ok {
		return ki.Kind, nil
	}
	return "", usagef("unknown kind %q (kinds: %s)", s, strings.Join(kindNames(), ", "))
}

// objectArgs validates `<kind> [name]` (or `<kind> <name>` when the name is required) and resolves
// the kind.
func objectArgs(nameRequired bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("%s: missing kind", cmd.Name())
		case len(args) == 1 && nameRequired:
			return usagef("%s: missing name", cmd.Name())
		case len(args) > 2:
			return usagef("usage: %s", cmd.UseLine())
		}
		_, err := resolveKind(args[0])
		return err
	}
}

// completeObject completes a kind, then the names of that kind's objects from the API.
func (q *cli) completeObject(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		var out []string
		for _, k := range kindNames() {
			if strings.HasPrefix(k, toComplete) {
				out = append(out, k)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	case 1:
		kind, err := resolveKind(args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return q.completeNames(cmd.Context(), kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeNames lists the names of a kind's objects that start with prefix; it stays quiet on errors,
// as completion must.
func (q *cli) completeNames(ctx context.Context, kind, prefix string) []string {
	cl, err := q.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []string
	for obj, err := range cl.Raw(kind).All(ctx, client.ListOptions{}) {
		if err != nil {
			return out
		}
		if strings.HasPrefix(obj.Name, prefix) {
			out = append(out, obj.Name)
		}
	}
	return out
}

// resource is the raw API of the kind named by args[0].
func (q *cli) resource(args []string) (*client.Resource[json.RawMessage, json.RawMessage], error) {
	kind, err := resolveKind(args[0])
	if err != nil {
		return nil, err
	}
	cl, err := q.client()
	if err != nil {
		return nil, err
	}
	return cl.Raw(kind), nil
}

// object resolves `KIND NAME` to the kind's resource and the named object.
func (q *cli) object(ctx context.Context, args []string) (*client.Resource[json.RawMessage, json.RawMessage], *api.RawObject, error) {
	res, err := q.resource(args)
	if err != nil {
		return nil, nil, err
	}
	obj, err := res.GetByName(ctx, args[1])
	if err != nil {
		return nil, nil, err
	}
	return res, obj, nil
}

func (q *cli) getCmd() *cobra.Command {
	var output, selector string
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "List objects of a kind, or show one",
		Example: `  qleet get instances
  qleet get instance web -o yaml
  qleet get runtimes -l region=eu-west -o wide
  qleet get instances --watch          # print rows again as they change (Ctrl-C to stop)`,
		Args:              objectArgs(false),
		ValidArgsFunction: q.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := q.resource(args)
			if err != nil {
				return err
			}
			name := ""
			if len(args) > 1 {
				name = args[1]
			}
			if watch {
				return watchObjects(cmd.Context(), cmd.OutOrStdout(), res, name, selector, output, interval)
			}
			objs, err := listObjects(cmd.Context(), res, name, selector)
			if err != nil {
				return err
			}
			if structured(output) {
				if name != "" {
					return printStructured(cmd.OutOrStdout(), output, objs[0])
				}
				return printStructured(cmd.OutOrStdout(), output, objs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			printObjectHeader(tw, output)
			for _, o := range objs {
				printObjectRow(tw, o, output, "")
			}
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only objects with these labels: k=v,k2=v2")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print each object again when it changes (a poll every --watch-interval)")
	cmd.Flags().DurationVar(&interval, "watch-interval", 2*time.Second, "how often --watch polls the API")
	q.addConnFlags(cmd.Flags())
	return cmd
}

// listObjects returns the named object, or every object matching the selector.
func listObjects(ctx context.Context, res *client.Resource[json.RawMessage, json.RawMessage], name, selector string) ([]*api.RawObject, error) {
	if name != "" {
		obj, err := res.GetByName(ctx, name)
		if err != nil {
			return nil, err
		}
		return []*api.RawObject{obj}, nil
	}
	objs := []*api.RawObject{}
	for obj, err := range res.All(ctx, client.ListOptions{LabelSelector: selector}) {
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

func printObjectHeader(w io.Writer, output string) {
	if output == outWide {
		fmt.Fprintln(w, "NAME\tPHASE\tGEN\tOBSERVED\tAGE\tID\tLABELS\tMESSAGE")
		return
	}
	fmt.Fprintln(w, "NAME\tPHASE\tGEN\tOBSERVED\tAGE\tMESSAGE")
}

// printObjectRow writes one object's row; phase, when set, replaces the object's (e.g. "Deleted").
func printObjectRow(w io.Writer, o *api.RawObject, output, phase string) {
	st := client.CommonStatus(o)
	if phase == "" {
		phase = orDash(string(st.Phase))
		if o.DeletionRequestedAt != nil {
			phase += " (deleting)"
		}
	}
	if output == outWide {
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
			labels = append(labels, k+"="+o.Labels[k])
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", o.Name, phase, o.Generation, st.ObservedGeneration,
			age(o.CreatedAt), o.ID, orDash(strings.Join(labels, ",")), st.Message)
		return
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", o.Name, phase, o.Generation, st.ObservedGeneration,
		age(o.CreatedAt), truncate(st.Message, 80))
}

func (q *cli) describeCmd() *cobra.Command {
	var output string
	var withTrace bool
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show an object: spec, status, conditions, what it waits on, and its latest events",
		Example: `  qleet describe instance web
  qleet describe instance web --trace     # the hops of its last reconcile, timed`,
		Args:              objectArgs(true),
		ValidArgsFunction: q.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := q.resource(args)
			if err != nil {
				return err
			}
			if withTrace {
				return cmdTrace(cmd.Context(), cmd.OutOrStdout(), res, args[1], output)
			}
			return cmdDescribe(cmd.Context(), cmd.OutOrStdout(), res, args[1], output)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().BoolVar(&withTrace, "trace", false, "show the hops of the object's last reconcile and how long each took")
	q.addConnFlags(cmd.Flags())
	return cmd
}

// cmdDescribe prints an object for people (see describe.go), or with -o json/yaml the object and its
// events as data.
func cmdDescribe(ctx context.Context, w io.Writer, res *client.Resource[json.RawMessage, json.RawMessage], name, output string) error {
	d, err := describeObject(ctx, res, name)
	if err != nil {
		return err
	}
	if structured(output) {
		return printStructured(w, output, map[string]any{"object": d.Object, "events": d.Events})
	}
	return d.write(w, time.Now())
}

func (q *cli) eventsCmd() *cobra.Command {
	var output string
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "events KIND NAME",
		Short: "List what happened to an object, and why",
		Example: `  qleet events instance web
  qleet events instance web --watch      # then print new events as they happen (Ctrl-C to stop)`,
		Args:              objectArgs(true),
		ValidArgsFunction: q.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, obj, err := q.object(cmd.Context(), args)
			if err != nil {
				return err
			}
			if watch {
				return watchEvents(cmd.Context(), cmd.OutOrStdout(), res, obj.ID, output, interval)
			}
			evs, err := res.Events(cmd.Context(), obj.ID)
			if err != nil {
				return err
			}
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, evs)
			}
			return printEvents(cmd.OutOrStdout(), evs, output, true)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print new events as they are recorded (a poll every --watch-interval)")
	cmd.Flags().DurationVar(&interval, "watch-interval", 2*time.Second, "how often --watch polls the API")
	q.addConnFlags(cmd.Flags())
	return cmd
}

// printEvents writes events as an indented table, with a header when header is set.
func printEvents(w io.Writer, evs []api.Event, output string, header bool) error {
	if len(evs) == 0 && header {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		printEventHeader(tw, output)
	}
	printEventRows(tw, evs, output)
	return tw.Flush()
}

func printEventHeader(w io.Writer, output string) {
	if output == outWide {
		fmt.Fprintln(w, "  AGE\tTYPE\tREASON\tGEN\tDURATION\tSOURCE\tTIME\tMESSAGE")
		return
	}
	fmt.Fprintln(w, "  AGE\tTYPE\tREASON\tGEN\tDURATION\tMESSAGE")
}

// printEventRows writes one tab-separated line per event.
func printEventRows(tw io.Writer, evs []api.Event, output string) {
	for _, e := range evs {
		if output == outWide {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%dms\t%s\t%s\t%s\n", eventAge(e), e.Type, e.Reason, e.Generation, e.DurationMS,
				orDash(e.Source), lastSeen(e).Format(time.RFC3339), e.Message)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%dms\t%s\n", eventAge(e), e.Type, e.Reason, e.Generation, e.DurationMS, truncate(e.Message, 100))
	}
}

// lastSeen is when the event last happened.
func lastSeen(e api.Event) time.Time {
	if e.LastTimestamp != nil {
		return *e.LastTimestamp
	}
	return e.CreatedAt
}

// eventAge is how long ago the event last happened and, for a repeated one, how often and over how long,
// as kubectl describe shows it: "12s (x7 over 3m)".
func eventAge(e api.Event) string {
	if e.Count <= 1 {
		return age(lastSeen(e))
	}
	return fmt.Sprintf("%s (x%d over %s)", age(lastSeen(e)), e.Count, age(e.CreatedAt))
}

func (q *cli) deleteCmd() *cobra.Command {
	var cascade, orphan, wait bool
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Request an object's deletion",
		Example: `  qleet delete instance web --wait
  qleet delete runtime eu-west --cascade      # its dependents first
  qleet delete instance web --orphan          # its cluster is gone: abandon what it made there`,
		Args:              objectArgs(true),
		ValidArgsFunction: q.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, obj, err := q.object(cmd.Context(), args)
			if err != nil {
				return err
			}
			if !orphan {
				// Said before the deletion waits: a cluster that does not answer blocks it.
				if hint := orphanHint(cmd.Context(), res, obj, args, cascade); hint != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), hint)
				}
			}
			kept := deleteKeeps(cmd.Context(), res.Client(), res.Kind(), obj.ID, cascade)
			if err := res.Delete(cmd.Context(), obj.ID, client.DeleteOptions{Cascade: cascade, Orphan: orphan, Wait: wait}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %q deletion requested\n", res.Kind(), args[1])
			printKeeps(cmd.OutOrStdout(), kept)
			return nil
		},
	}
	cmd.Flags().BoolVar(&cascade, "cascade", false, "delete dependents first")
	cmd.Flags().BoolVar(&orphan, "orphan", false, "abandon what the object made in its cluster (when the cluster is gone or unreachable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the object is gone")
	q.addConnFlags(cmd.Flags())
	return cmd
}

// orphanHint says, for a runtime or an instance whose cluster does not answer (its runtime's Connected
// condition is False), that the deletion cannot clean up there until it does, and how to abandon what
// it made there instead (--orphan); "" when nothing blocks it, or when that cannot be told.
func orphanHint(ctx context.Context, res *client.Resource[json.RawMessage, json.RawMessage], obj *api.RawObject, args []string, cascade bool) string {
	var ids []string
	switch res.Kind() {
	case api.KindKubernetesRuntime:
		if c := disconnected(client.CommonStatus(obj)); c != nil {
			return fmt.Sprintf("kubernetes_runtime %q does not answer (%s): what its dependents made there cannot be deleted until it does.\n"+
				"To abandon it instead: qleet delete %s %s --cascade --orphan", obj.Name, c.Message, args[0], args[1])
		}
		return ""
	case api.KindWorkloadInstance:
		var doc struct {
			Spec struct {
				RuntimeID string `json:"runtime_id"`
			} `json:"spec"`
			Status struct {
				Placements []struct {
					RuntimeID string `json:"runtime_id"`
				} `json:"placements"`
			} `json:"status"`
		}
		if json.Unmarshal(obj.Spec, &doc.Spec) != nil || json.Unmarshal(obj.Status, &doc.Status) != nil {
			return ""
		}
		ids = append(ids, doc.Spec.RuntimeID)
		for _, p := range doc.Status.Placements {
			ids = append(ids, p.RuntimeID)
		}
	default:
		return ""
	}
	rts := res.Client().KubernetesRuntimes()
	seen := map[string]bool{"": true}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		rt, err := rts.Get(ctx, id)
		if err != nil {
			continue
		}
		if c := disconnected(&rt.Status.Status); c != nil {
			flags := "--orphan"
			if cascade {
				flags = "--cascade --orphan"
			}
			return fmt.Sprintf("kubernetes_runtime %q does not answer (%s): %s %q's objects there cannot be deleted until it does.\n"+
				"To abandon them instead: qleet delete %s %s %s", rt.Name, c.Message, res.Kind(), obj.Name, args[0], args[1], flags)
		}
	}
	return ""
}

// disconnected returns a runtime's Connected condition when it is False.
func disconnected(st *api.Status) *api.Condition {
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == "Connected" && c.Status == api.ConditionFalse {
			return c
		}
	}
	return nil
}

func (q *cli) imageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Change a container's image in a workload definition (the CI hook)",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	set := &cobra.Command{
		Use:     "set DEFINITION CONTAINER IMAGE",
		Short:   "Set one container's image; every instance of the definition rolls it out",
		Example: `  qleet image set web web nginx:1.27`,
		Args:    exactArgs(3),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return q.completeNames(cmd.Context(), api.KindWorkloadDefinition, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := q.client()
			if err != nil {
				return err
			}
			def, err := cl.WorkloadDefinitions().GetByName(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := cl.SetImage(cmd.Context(), def.ID, api.ImageChange{Container: args[1], Image: args[2]})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workload_definition %q: container %q now runs %s\n", args[0], args[1], args[2])
			for _, r := range res.UpdatedInstances {
				fmt.Fprintf(cmd.OutOrStdout(), "  rolling out to workload_instance %q\n", r.Name)
			}
			return nil
		},
	}
	q.addConnFlags(set.Flags())
	cmd.AddCommand(set)
	return cmd
}

func (q *cli) reconcileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "reconcile KIND NAME",
		Short:             "Ask the controller to reconcile an object now",
		Args:              objectArgs(true),
		ValidArgsFunction: q.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, obj, err := q.object(cmd.Context(), args)
			if err != nil {
				return err
			}
			if err := res.RequestReconcile(cmd.Context(), obj.ID); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %q: reconcile requested\n", res.Kind(), args[1])
			return nil
		},
	}
	q.addConnFlags(cmd.Flags())
	return cmd
}
