package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// cmdTrace prints the object's description followed by its last reconcile's trace as a hop table.
func cmdTrace(ctx context.Context, w io.Writer, res *client.Resource[json.RawMessage, json.RawMessage], name, output string) error {
	obj, err := res.GetByName(ctx, name)
	if err != nil {
		return err
	}
	t, err := res.Client().LastTrace(ctx, res.Kind(), obj.ID)
	if err != nil {
		return err
	}
	if structured(output) {
		return printStructured(w, output, t)
	}
	if err := cmdDescribe(ctx, w, res, name, output); err != nil {
		return err
	}
	fmt.Fprintln(w)
	printTrace(w, t)
	return nil
}

// printTrace writes a trace as a table of hops: each span indented under its parent, with when it
// started after the trace began and how long it took.
func printTrace(w io.Writer, t *api.Trace) {
	var end float64
	for _, s := range t.Spans {
		end = max(end, s.OffsetMS+s.DurationMS)
	}
	fmt.Fprintf(w, "Last reconcile: trace %s, %d hops over %s (started %s)\n", t.TraceID, len(t.Spans), msString(end), t.Start.Format("15:04:05.000"))
	children := map[string][]api.TraceSpan{}
	ids := map[string]bool{}
	for _, s := range t.Spans {
		ids[s.SpanID] = true
	}
	var roots []api.TraceSpan
	for _, s := range t.Spans {
		if s.ParentID == "" || !ids[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOP\tSTART\tDURATION\tNOTE")
	var walk func(s api.TraceSpan, depth int)
	walk = func(s api.TraceSpan, depth int) {
		note := s.Error
		if note == "" {
			note = spanNote(s)
		}
		fmt.Fprintf(tw, "%s%s\t+%s\t%s\t%s\n", strings.Repeat("  ", depth), s.Name, msString(s.OffsetMS), msString(s.DurationMS), note)
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	_ = tw.Flush()
}

// spanNote picks the attribute that says most about a hop.
func spanNote(s api.TraceSpan) string {
	for _, k := range []string{"qleet.outcome", "http.response.status_code", "qleet.outbox.age_ms", "qleet.lock.contended"} {
		if v, ok := s.Attributes[k]; ok {
			switch k {
			case "http.response.status_code":
				return "HTTP " + v
			case "qleet.outbox.age_ms":
				return "waited " + v + " ms in the outbox"
			case "qleet.lock.contended":
				return "locked by another worker"
			default:
				return v
			}
		}
	}
	if len(s.Links) > 0 {
		return "linked to " + s.Links[0]
	}
	return ""
}

func msString(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return fmt.Sprintf("%.1fms", ms)
}
