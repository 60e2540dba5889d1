package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
)

var kindAliases = map[string]string{
	"runtime": client.KindKubernetesRuntime, "runtimes": client.KindKubernetesRuntime,
	"definition": client.KindWorkloadDefinition, "definitions": client.KindWorkloadDefinition,
	"instance": client.KindWorkloadInstance, "instances": client.KindWorkloadInstance,
	"profile": client.KindRuntimeProfile, "profiles": client.KindRuntimeProfile,
	"gateway": client.KindGateway, "gateways": client.KindGateway,
	"domain": client.KindDomainName, "domains": client.KindDomainName,
	"support": client.KindSupportService, "supports": client.KindSupportService,
}

var knownKinds = []string{client.KindKubernetesRuntime, client.KindRuntimeProfile, client.KindWorkloadDefinition, client.KindWorkloadInstance,
	client.KindGateway, client.KindDomainName, client.KindSupportService, client.KindSecret}

func resolveKind(s string) (string, error) {
	if k, ok := kindAliases[s]; ok {
		return k, nil
	}
	for _, k := range knownKinds {
		if s == k || s == client.Plural(k) {
			return k, nil
		}
	}
	return "", usageError{fmt.Sprintf("unknown kind %q (kinds: %s)", s, strings.Join(knownKinds, ", "))}
}

// newClient builds a client from QLEET_ENDPOINT and QLEET_TOKEN, falling back to the local data dir's
// admin token, trusting QLEET_CA_CERT (a PEM file) for a TLS endpoint, as the provider does.
func newClient() (*client.Client, error) {
	endpoint := envDefault("endpoint", "http://127.0.0.1:8080")
	token := os.Getenv("QLEET_TOKEN")
	if token == "" {
		path := filepath.Join(envDefault("data-dir", ".qleet"), "admin.token")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("no token: set QLEET_TOKEN, or run where %s exists (%w)", path, err)
		}
		token = strings.TrimSpace(string(data))
	}
	opts := []client.Option{client.WithToken(token), client.WithUserAgent("qleet-cli")}
	if ca := os.Getenv("QLEET_CA_CERT"); ca != "" {
		pemData, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("QLEET_CA_CERT: %w", err)
		}
		opts = append(opts, client.WithCACert(pemData))
	}
	return client.New(endpoint, opts...)
}

func runCLI(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	output := fs.String("o", "table", "output format: table or json")
	cascade := fs.Bool("cascade", false, "delete: delete dependents first")
	orphan := fs.Bool("orphan", false, "delete: abandon what the object made in its cluster (when the cluster is gone or unreachable)")
	wait := fs.Bool("wait", false, "delete: wait until the object is gone")
	selector := fs.String("l", "", "get: label selector k=v,k2=v2")
	withTrace := fs.Bool("trace", false, "describe: show the hops of the object's last reconcile and how long each took")
	// Allow flags after positional arguments.
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if len(pos) == 0 {
		return usageError{verb + ": missing kind"}
	}
	kind, err := resolveKind(pos[0])
	if err != nil {
		return err
	}
	name := ""
	if len(pos) > 1 {
		name = pos[1]
	}
	if name == "" && verb != "get" {
		return usageError{verb + ": missing name"}
	}
	if *output != "table" && *output != "json" {
		return usageError{"-o must be table or json"}
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	res := cl.Raw(kind)
	switch verb {
	case "get":
		return cmdGet(ctx, res, name, *selector, *output)
	case "describe":
		if *withTrace {
			return cmdTrace(ctx, res, name, *output)
		}
		return cmdDescribe(ctx, res, name, *output)
	case "events":
		obj, err := res.GetByName(ctx, name)
		if err != nil {
			return err
		}
		evs, err := res.Events(ctx, obj.ID)
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(evs)
		}
		printEvents(evs)
		return nil
	case "delete":
		obj, err := res.GetByName(ctx, name)
		if err != nil {
			return err
		}
		if err := res.Delete(ctx, obj.ID, client.DeleteOptions{Cascade: *cascade, Orphan: *orphan, Wait: *wait}); err != nil {
			return err
		}
		fmt.Printf("%s %q deletion requested\n", kind, name)
		return nil
	}
	return nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdGet(ctx context.Context, res *client.Resource[json.RawMessage, json.RawMessage], name, selector, output string) error {
	var objs []*client.RawObject
	if name != "" {
		obj, err := res.GetByName(ctx, name)
		if err != nil {
			return err
		}
		objs = append(objs, obj)
	} else {
		for obj, err := range res.All(ctx, client.ListOptions{LabelSelector: selector}) {
			if err != nil {
				return err
			}
			objs = append(objs, obj)
		}
	}
	if output == "json" {
		if name != "" {
			return printJSON(objs[0])
		}
		return printJSON(objs)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tGEN\tOBSERVED\tAGE\tMESSAGE")
	for _, o := range objs {
		st := client.CommonStatus(o)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", o.Name, orDash(string(st.Phase)), o.Generation, st.ObservedGeneration,
			age(o.CreatedAt), truncate(st.Message, 80))
	}
	return tw.Flush()
}

func cmdDescribe(ctx context.Context, res *client.Resource[json.RawMessage, json.RawMessage], name, output string) error {
	obj, err := res.GetByName(ctx, name)
	if err != nil {
		return err
	}
	evs, err := res.Events(ctx, obj.ID)
	if err != nil {
		return err
	}
	if output == "json" {
		return printJSON(map[string]any{"object": obj, "events": evs})
	}
	st := client.CommonStatus(obj)
	fmt.Printf("Kind:        %s\nName:        %s\nID:          %s\n", res.Kind(), obj.Name, obj.ID)
	if len(obj.Labels) > 0 {
		fmt.Printf("Labels:      %v\n", obj.Labels)
	}
	fmt.Printf("Generation:  %d (observed %d)\nPhase:       %s\n", obj.Generation, st.ObservedGeneration, orDash(string(st.Phase)))
	reconciled := client.Reconciled(obj.Generation, st)
	fmt.Printf("Reconciled:  %v\n", reconciled)
	if st.Message != "" {
		fmt.Printf("Message:     %s\n", st.Message)
	}
	if obj.DeletionRequestedAt != nil {
		fmt.Printf("Deleting:    since %s\n", obj.DeletionRequestedAt.Format(time.RFC3339))
	}
	for _, c := range st.Conditions {
		if c.WaitingOn != "" && c.Status != client.ConditionTrue {
			fmt.Printf("Waiting on:  %s (for %s)\n", c.WaitingOn, age(c.LastTransitionTime))
		}
	}
	if !reconciled {
		if chain, err := waitChain(ctx, res.Client(), res.Kind(), obj.ID); err == nil && chain != "" {
			fmt.Printf("Root cause:  %s\n", chain)
		}
	}
	fmt.Println("Spec:")
	printIndented(obj.Spec)
	fmt.Println("Status:")
	printIndented(obj.Status)
	if len(st.Conditions) > 0 {
		fmt.Println("Conditions:")
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range st.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason), age(c.LastTransitionTime), c.Message)
		}
		_ = tw.Flush()
	}
	fmt.Println("Events:")
	if len(evs) > 10 {
		evs = evs[len(evs)-10:]
	}
	printEvents(evs)
	return nil
}

func printIndented(raw json.RawMessage) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		fmt.Printf("  %s\n", raw)
		return
	}
	out, _ := json.MarshalIndent(v, "  ", "  ")
	fmt.Printf("  %s\n", out)
}

func printEvents(evs []client.Event) {
	if len(evs) == 0 {
		fmt.Println("  <none>")
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tGEN\tDURATION\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%dms\t%s\n", age(e.CreatedAt), e.Type, e.Reason, e.Generation, e.DurationMS, truncate(e.Message, 100))
	}
	_ = tw.Flush()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func runImage(ctx context.Context, args []string) error {
	if len(args) != 4 || args[0] != "set" {
		return usageError{"usage: qleet image set <definition> <container> <image>"}
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	def, err := cl.WorkloadDefinitions().GetByName(ctx, args[1])
	if err != nil {
		return err
	}
	var out struct {
		UpdatedInstances []client.ObjectRef `json:"updated_instances"`
	}
	body := map[string]string{"container": args[2], "image": args[3]}
	if err := cl.Do(ctx, "POST", "/v1/workload_definitions/"+def.ID+"/image", nil, nil, body, &out); err != nil {
		return err
	}
	fmt.Printf("workload_definition %q: container %q now runs %s\n", args[1], args[2], args[3])
	for _, r := range out.UpdatedInstances {
		fmt.Printf("  rolling out to workload_instance %q\n", r.Name)
	}
	return nil
}

func runReconcile(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return usageError{"usage: qleet reconcile <kind> <name>"}
	}
	kind, err := resolveKind(args[0])
	if err != nil {
		return err
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	obj, err := cl.Raw(kind).GetByName(ctx, args[1])
	if err != nil {
		return err
	}
	if err := cl.Raw(kind).RequestReconcile(ctx, obj.ID); err != nil {
		return err
	}
	fmt.Printf("%s %q: reconcile requested\n", kind, args[1])
	return nil
}
