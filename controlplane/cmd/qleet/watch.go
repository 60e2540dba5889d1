package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// The API has no watch endpoint, so --watch polls: each poll prints the objects whose resource_version
// changed since the last one, and the ones that went away. It runs until ctx ends (Ctrl-C), which is not
// an error.

// watchObjects lists the objects, then prints each one again when it changes.
func watchObjects(ctx context.Context, w io.Writer, res *client.Resource[json.RawMessage, json.RawMessage], name, selector, output string, interval time.Duration) error {
	seen := map[string]*api.RawObject{}
	first := true
	table := &streamTable{w: w}
	for {
		objs, err := listObjects(ctx, res, name, selector)
		if name != "" && api.IsNotFound(err) {
			objs, err = nil, nil
			if first {
				return fmt.Errorf("%s %q not found", res.Kind(), name)
			}
		}
		if ctx.Err() != nil {
			return nil //nolint:nilerr // interrupted: the end of a watch, not a failure
		}
		if err != nil {
			return err
		}
		var changed, gone []*api.RawObject
		now := map[string]*api.RawObject{}
		for _, o := range objs {
			now[o.ID] = o
			if prev, ok := seen[o.ID]; !ok || prev.ResourceVersion != o.ResourceVersion {
				changed = append(changed, o)
			}
		}
		for id, o := range seen {
			if _, ok := now[id]; !ok {
				gone = append(gone, o)
			}
		}
		seen = now
		if err := printWatchBatch(w, table, changed, gone, output, first); err != nil {
			return err
		}
		first = false
		if !sleepCtx(ctx, interval) {
			return nil
		}
	}
}

// printWatchBatch writes one poll's changes: table rows (a header the first time; "Deleted" for objects
// gone), or one JSON or YAML document per object.
func printWatchBatch(w io.Writer, table *streamTable, changed, gone []*api.RawObject, output string, header bool) error {
	if structured(output) {
		for _, o := range changed {
			if output == outYAML {
				fmt.Fprintln(w, "---")
			}
			if err := printStructured(w, output, o); err != nil {
				return err
			}
		}
		return nil
	}
	if len(changed)+len(gone) == 0 && !header {
		return nil
	}
	var b strings.Builder
	if header {
		printObjectHeader(&b, output)
	}
	for _, o := range changed {
		printObjectRow(&b, o, output, "")
	}
	for _, o := range gone {
		printObjectRow(&b, o, output, "Deleted")
	}
	return table.write(b.String())
}

// watchEvents lists an object's events, then prints new ones as they are recorded.
func watchEvents(ctx context.Context, w io.Writer, res *client.Resource[json.RawMessage, json.RawMessage], id, output string, interval time.Duration) error {
	seen := map[int64]int64{} // event id: count printed
	first := true
	table := &streamTable{w: w}
	for {
		evs, err := res.Events(ctx, id)
		if api.IsNotFound(err) && !first {
			fmt.Fprintf(w, "  %s deleted\n", res.Kind())
			return nil
		}
		if ctx.Err() != nil {
			return nil //nolint:nilerr // interrupted: the end of a watch, not a failure
		}
		if err != nil {
			return err
		}
		var fresh []api.Event
		now := make(map[int64]int64, len(evs)) // the listed ones only: trimmed events are forgotten
		for _, e := range evs {
			// A new event, or a repeat counted on one printed before (shown again with its count).
			if n, ok := seen[e.ID]; !ok || e.Count > n {
				fresh = append(fresh, e)
			}
			now[e.ID] = e.Count
		}
		seen = now
		switch {
		case structured(output):
			for _, e := range fresh {
				if output == outYAML {
					fmt.Fprintln(w, "---")
				}
				if err := printStructured(w, output, e); err != nil {
					return err
				}
			}
		case first || len(fresh) > 0:
			var b strings.Builder
			if first {
				printEventHeader(&b, output)
			}
			printEventRows(&b, fresh, output)
			if err := table.write(b.String()); err != nil {
				return err
			}
		}
		first = false
		if !sleepCtx(ctx, interval) {
			return nil
		}
	}
}

// streamTable aligns tab-separated rows like a tabwriter, but across writes: a column only ever widens,
// so that the rows a watch prints later line up with the header it printed first.
type streamTable struct {
	w      io.Writer
	widths []int
}

// write prints lines of tab-separated cells, each cell but the last padded to its column's width.
func (s *streamTable) write(text string) error {
	if text == "" {
		return nil
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		cells := strings.Split(line, "\t")
		rows = append(rows, cells)
		for i, c := range cells[:len(cells)-1] {
			if i == len(s.widths) {
				s.widths = append(s.widths, 0)
			}
			s.widths[i] = max(s.widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, cells := range rows {
		for i, c := range cells {
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", s.widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(s.w, b.String())
	return err
}

// sleepCtx waits d, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
