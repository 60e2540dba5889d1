package main

// describe.go: `qleet describe` for people, in the manner of kubectl describe. A short header, then the
// spec and the status as aligned fields (nested structs as indented blocks, lists as indented items, lists
// of flat records as tables), the conditions, the root cause of a wait, what the object depends on and what
// uses it, and its recent events.
//
// It is generic over the kind registry: the fields, their order and their names come from the kind's Go
// types and their json tags (api.KindInfo.SpecType and StatusType), so a field added to a kind shows with
// no change here. Fields the CLI does not know yet (a newer server) still show, after the known ones.
// Write-only spec fields (api.KindInfo.WriteOnly) never show a value, whatever the caller may read.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
)

// describeEvents is how many of the latest events describe shows.
const describeEvents = 10

// description is what describe shows of one object, as read from the API.
type description struct {
	// Object is the object, its spec and status as the API returned them to the caller.
	Object *api.RawObject
	// Events are the object's events, oldest first.
	Events []api.Event
	// Graph is the part of the dependency graph connected to the object.
	Graph *api.Graph
	// RootCause is the chain from the object to what it ultimately waits on; empty when it does not wait.
	RootCause string
}

// describeObject reads the named object, its events and its neighbourhood in the dependency graph.
func describeObject(ctx context.Context, res *client.Resource[json.RawMessage, json.RawMessage], name string) (*description, error) {
	obj, err := res.GetByName(ctx, name)
	if err != nil {
		return nil, err
	}
	evs, err := res.Events(ctx, obj.ID)
	if err != nil {
		return nil, err
	}
	g, err := res.Client().Graph(ctx, res.Kind()+"/"+obj.ID)
	if err != nil {
		return nil, fmt.Errorf("the dependency graph of %s %q: %w", res.Kind(), obj.Name, err)
	}
	if obj.Kind == "" {
		obj.Kind = res.Kind()
	}
	d := &description{Object: obj, Events: evs, Graph: g}
	if !api.Reconciled(obj.Generation, client.CommonStatus(obj)) {
		if d.RootCause, err = waitChain(ctx, res.Client(), res.Kind(), obj.ID); err != nil {
			return nil, fmt.Errorf("the root cause of %s %q's wait: %w", res.Kind(), obj.Name, err)
		}
	}
	return d, nil
}

// describeSkip names nested lists that describe leaves out because another field lists the same
// records in full, by "<kind> <path>" (list items are "[]").
var describeSkip = map[string]bool{
	// status.objects lists every applied object, on every runtime, with a RUNTIME column.
	api.KindWorkloadInstance + " status.placements[].objects": true,
}

// write prints the description; ages are counted back from now.
func (d *description) write(w io.Writer, now time.Time) error {
	o := d.Object
	var buf bytes.Buffer
	p := &printer{tw: tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0), now: now, kind: o.Kind, nodes: map[string]api.GraphNode{}}
	if d.Graph != nil {
		for _, n := range d.Graph.Nodes {
			p.nodes[n.ID] = n
		}
	}
	ki, _ := api.LookupKind(o.Kind)
	st := client.CommonStatus(o)

	p.field(0, "Name", o.Name)
	p.field(0, "Kind", o.Kind)
	p.field(0, "ID", o.ID)
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		labels = append(labels, k+"="+o.Labels[k])
	}
	p.fieldLines(0, "Labels", labels)
	var owners []string
	for _, r := range o.Owners {
		owners = append(owners, r.String())
	}
	p.fieldLines(0, "Owners", owners)
	p.field(0, "Created", p.when(o.CreatedAt))
	p.field(0, "Updated", p.when(o.UpdatedAt))
	if o.DeletionRequestedAt != nil {
		del := "requested " + p.when(*o.DeletionRequestedAt)
		if o.DeletionOrphan {
			del += ", orphaning what it made in its cluster"
		}
		p.field(0, "Deleting", del)
	}
	p.field(0, "Phase", orDash(string(st.Phase)))
	if st.Message != "" {
		p.field(0, "Message", st.Message)
	}
	p.field(0, "Generation", fmt.Sprintf("%d (observed %d)", o.Generation, st.ObservedGeneration))
	reconciled := strconv.FormatBool(api.Reconciled(o.Generation, st))
	if st.LastReconciledAt != nil {
		reconciled += ", last reconcile " + ageAt(now, *st.LastReconciledAt) + " ago"
	}
	p.field(0, "Reconciled", reconciled)
	for _, c := range st.Conditions {
		if c.WaitingOn != "" && c.Status != api.ConditionTrue {
			p.field(0, "Waiting on", fmt.Sprintf("%s (for %s)", c.WaitingOn, ageAt(now, c.LastTransitionTime)))
		}
	}
	if d.RootCause != "" {
		p.field(0, "Root cause", d.RootCause)
	}

	var specType, statusType reflect.Type
	var writeOnly []string
	if ki != nil {
		specType, statusType, writeOnly = reflect.TypeOf(ki.SpecType), reflect.TypeOf(ki.StatusType), ki.WriteOnly
	}
	spec, err := decodeJSON(o.Spec)
	if err != nil {
		return fmt.Errorf("%s %q: spec: %w", o.Kind, o.Name, err)
	}
	status, err := decodeJSON(o.Status)
	if err != nil {
		return fmt.Errorf("%s %q: status: %w", o.Kind, o.Name, err)
	}
	p.section(0, "Spec", seal(spec, writeOnly), specType, "spec", nil)
	common := map[string]bool{}
	for _, f := range jsonFields(reflect.TypeOf(api.Status{})) {
		common[f.name] = true // shown in the header and under Conditions
	}
	p.section(0, "Status", status, statusType, "status", common)

	p.heading(0, "Conditions")
	var rows [][]string
	for _, c := range st.Conditions {
		rows = append(rows, []string{c.Type, string(c.Status), orDash(c.Reason), ageAt(now, c.LastTransitionTime), oneLine(c.Message)})
	}
	p.table(1, []string{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}, rows)

	if d.Graph != nil {
		// As qleet graph shows them: what the object needs, with the objects attached to it (a gateway
		// that exists for an instance); then what uses it.
		p.heading(0, "Dependencies")
		p.edges(o.ID, d.Graph.Needs(o.ID))
		p.heading(0, "Used by")
		var usedBy []api.GraphEdge
		for _, e := range d.Graph.Consumers(o.ID) {
			if !e.Attached {
				usedBy = append(usedBy, e)
			}
		}
		p.edges(o.ID, usedBy)
	}

	evs := slices.Clone(d.Events)
	sort.SliceStable(evs, func(i, j int) bool { return lastSeen(evs[i]).Before(lastSeen(evs[j])) })
	heading := "Events"
	if len(evs) > describeEvents {
		heading = fmt.Sprintf("Events (the last %d of %d; qleet events %s %s lists them all)", describeEvents, len(evs), o.Kind, o.Name)
		evs = evs[len(evs)-describeEvents:]
	}
	p.heading(0, heading)
	rows = nil
	for _, e := range evs {
		rows = append(rows, []string{e.Type, e.Reason, ageAt(now, lastSeen(e)), strconv.FormatInt(max(e.Count, 1), 10), oneLine(e.Message)})
	}
	p.table(1, []string{"TYPE", "REASON", "AGE", "COUNT", "MESSAGE"}, rows)
	if err := p.tw.Flush(); err != nil {
		return err
	}
	// An empty last cell leaves the tabwriter's padding at the end of its line.
	var out strings.Builder
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		out.WriteString(strings.TrimRight(l, " \n"))
		if strings.HasSuffix(l, "\n") {
			out.WriteString("\n")
		}
	}
	_, err = io.WriteString(w, out.String())
	return err
}

// printer writes aligned "Label:  value" lines through a tabwriter, flushed around each table so that a
// table's columns and the fields' column are aligned apart.
type printer struct {
	tw    *tabwriter.Writer
	now   time.Time
	kind  string
	nodes map[string]api.GraphNode
	// bullet makes the next line start its item with "- ".
	bullet bool
}

// pad is the indentation of a level; the first line of a list item carries its "- " there.
func (p *printer) pad(indent int) string {
	s := strings.Repeat("  ", indent)
	if p.bullet && indent > 0 {
		p.bullet = false
		return s[:len(s)-2] + "- "
	}
	return s
}

func (p *printer) field(indent int, label, value string) {
	fmt.Fprintf(p.tw, "%s%s:\t%s\n", p.pad(indent), label, clean(value))
}

// fieldLines writes a field with one value per line, aligned, or <none>.
func (p *printer) fieldLines(indent int, label string, values []string) {
	if len(values) == 0 {
		p.field(indent, label, "<none>")
		return
	}
	p.field(indent, label, values[0])
	for _, v := range values[1:] {
		fmt.Fprintf(p.tw, "%s\t%s\n", strings.Repeat("  ", indent), clean(v))
	}
}

// heading starts a block: a label with no value on its line, which ends the column above it.
func (p *printer) heading(indent int, label string) {
	fmt.Fprintf(p.tw, "%s%s:\n", p.pad(indent), label)
}

func (p *printer) line(indent int, text string) {
	fmt.Fprintf(p.tw, "%s%s\n", p.pad(indent), clean(text))
}

// table writes rows under a header, aligned on their own; <none> when there are no rows.
func (p *printer) table(indent int, header []string, rows [][]string) {
	if len(rows) == 0 {
		p.line(indent, "<none>")
		return
	}
	p.endBlock()
	pad := strings.Repeat("  ", indent)
	fmt.Fprintf(p.tw, "%s%s\n", pad, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = clean(c)
		}
		fmt.Fprintf(p.tw, "%s%s\n", pad, strings.Join(cells, "\t"))
	}
	p.endBlock()
}

// edges writes a table of the objects at the other end of edges from or to id: Dependencies or Used by.
func (p *printer) edges(id string, es []api.GraphEdge) {
	var rows [][]string
	for _, e := range es {
		n, ok := p.nodes[e.Other(id)]
		if !ok {
			continue
		}
		phase := string(n.Phase)
		if phase == "" {
			phase = string(api.PhasePending)
		}
		if n.Deleting {
			phase += " (deleting)"
		}
		why := e.Why
		if e.Attached && e.To == id {
			why = "attached: " + n.Kind + " " + e.Why
		}
		rows = append(rows, []string{n.Kind, n.Name, phase, why})
	}
	p.table(1, []string{"KIND", "NAME", "PHASE", "VIA"}, rows)
}

// when is a time with how long ago it was.
func (p *printer) when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + ageAt(p.now, t) + " ago)"
}

// section writes a top-level block (Spec, Status) of an object value; skip names fields left out.
func (p *printer) section(indent int, label string, v any, t reflect.Type, path string, skip map[string]bool) {
	p.heading(indent, label)
	m, ok := v.(map[string]any)
	if !ok {
		p.value(indent+1, "Value", v, t, path)
		return
	}
	if !p.object(indent+1, m, t, path, skip) {
		p.line(indent+1, "<none>")
	}
}

// object writes the fields of a JSON object: a struct's in declaration order, then any the CLI does not
// know, by name; a map's by key. The one-line fields come first, aligned together, then the blocks
// (nested objects, lists, text of several lines). It reports whether it wrote any.
func (p *printer) object(indent int, m map[string]any, t reflect.Type, path string, skip map[string]bool) bool {
	t = deref(t)
	type entry struct {
		name, label string
		typ         reflect.Type
	}
	var lines, blocks []entry
	add := func(name, label string, ft reflect.Type) {
		v, ok := m[name]
		if !ok || v == nil || skip[name] {
			return
		}
		e := entry{name: name, label: label, typ: ft}
		switch v := v.(type) {
		case map[string]any, []any:
			if absent(v) {
				lines = append(lines, e) // <none>
			} else {
				blocks = append(blocks, e)
			}
		case string:
			if strings.Contains(v, "\n") {
				blocks = append(blocks, e)
			} else {
				lines = append(lines, e)
			}
		default:
			lines = append(lines, e)
		}
	}
	known := map[string]bool{}
	if t != nil && t.Kind() == reflect.Struct {
		for _, f := range jsonFields(t) {
			known[f.name] = true
			add(f.name, humanise(f.name), f.typ)
		}
	}
	var elem reflect.Type
	isMap := t != nil && t.Kind() == reflect.Map
	if isMap {
		elem = t.Elem()
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if known[k] {
			continue
		}
		label := humanise(k)
		if isMap {
			label = k // a map's keys are data, shown as they are
		}
		add(k, label, elem)
	}
	for _, e := range append(lines, blocks...) {
		p.value(indent, e.label, m[e.name], e.typ, path+"."+e.name)
	}
	return len(lines)+len(blocks) > 0
}

// value writes one field: a scalar on its line, an object as an indented block, a list as indented items
// or, when its items are flat records, as a table.
func (p *printer) value(indent int, label string, v any, t reflect.Type, path string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			p.field(indent, label, "<none>")
			return
		}
		p.heading(indent, label)
		p.object(indent+1, v, t, path, nil)
		p.endBlock()
	case []any:
		if len(v) == 0 {
			p.field(indent, label, "<none>")
			return
		}
		et := elemType(t)
		p.heading(indent, label)
		switch {
		case allScalars(v):
			for _, x := range v {
				p.line(indent+1, "- "+p.scalar(x, et))
			}
		case flatRecords(v, et):
			p.records(indent+1, v, et, path+"[]")
		default:
			p.items(indent+1, v, et, path+"[]")
		}
	default:
		s := p.scalar(v, t)
		if !strings.Contains(s, "\n") {
			p.field(indent, label, s)
			return
		}
		p.heading(indent, label)
		for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			p.line(indent+1, l)
		}
	}
}

// items writes list items as blocks: under the item's name when it has one (as kubectl shows
// containers), else marked with "- ".
func (p *printer) items(indent int, items []any, et reflect.Type, path string) {
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			p.line(indent, "- "+p.scalar(it, et))
			continue
		}
		if name, ok := m["name"].(string); ok && name != "" && len(m) > 1 {
			p.heading(indent, name)
			p.object(indent+1, m, et, path, map[string]bool{"name": true})
			p.endBlock()
			continue
		}
		p.bullet = true
		if !p.object(indent+1, m, et, path, nil) {
			p.line(indent+1, "{}")
		}
		p.bullet = false
		p.endBlock()
	}
}

// endBlock ends the alignment of the lines above, so that the fields after a nested block (the next
// item's, say) line up among themselves and not with the block's.
func (p *printer) endBlock() { _ = p.tw.Flush() }

// column is one column of a table of records.
type column struct {
	name   string
	header string
	typ    reflect.Type
	nested bool // a list of records, shown as a table of its own after this one
}

// records writes flat records as a table: a column per field that any record sets (a name's ID column
// dropped when the name is there, the message last), then each list of records they hold as a table of
// its own, each row led by the record it belongs to.
func (p *printer) records(indent int, items []any, et reflect.Type, path string) {
	cols := recordColumns(items, et)
	var flat, nested []column
	for _, c := range cols {
		if c.nested {
			nested = append(nested, c)
		} else {
			flat = append(flat, c)
		}
	}
	p.table(indent, headers(flat), p.rows(items, flat))
	if len(flat) == 0 {
		return
	}
	lead := flat[0]
	for _, name := range []string{"name", "runtime"} {
		if i := slices.IndexFunc(flat, func(c column) bool { return c.name == name }); i >= 0 {
			lead = flat[i]
			break
		}
	}
	for _, n := range nested {
		sub := path + "." + n.name
		if describeSkip[p.kind+" "+sub] {
			continue
		}
		var children []any
		var leads []string
		for _, it := range items {
			m, _ := it.(map[string]any)
			list, _ := m[n.name].([]any)
			for _, c := range list {
				children = append(children, c)
				leads = append(leads, p.cell(m[lead.name], lead.typ))
			}
		}
		if len(children) == 0 {
			continue
		}
		et := elemType(n.typ)
		subCols := recordColumns(children, et)
		var subFlat []column
		for _, c := range subCols {
			if !c.nested {
				subFlat = append(subFlat, c)
			}
		}
		rows := p.rows(children, subFlat)
		for i := range rows {
			rows[i] = append([]string{leads[i]}, rows[i]...)
		}
		p.heading(indent, humanise(n.name))
		p.table(indent+1, append([]string{lead.header}, headers(subFlat)...), rows)
	}
}

func headers(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.header
	}
	return out
}

func (p *printer) rows(items []any, cols []column) [][]string {
	var rows [][]string
	for _, it := range items {
		m, _ := it.(map[string]any)
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = p.cell(m[c.name], c.typ)
		}
		rows = append(rows, row)
	}
	return rows
}

// recordColumns are the columns of a table of records: the fields of the element type in order, then
// unknown ones by name; only those some record sets; "x_id" left out when "x" (its name) is there; a
// message last.
func recordColumns(items []any, et reflect.Type) []column {
	var names []string
	types := map[string]reflect.Type{}
	if t := deref(et); t != nil && t.Kind() == reflect.Struct {
		for _, f := range jsonFields(t) {
			names = append(names, f.name)
			types[f.name] = f.typ
		}
	}
	var extra []string
	set := map[string]bool{}
	for _, it := range items {
		m, _ := it.(map[string]any)
		for k, v := range m {
			if !absent(v) {
				set[k] = true
			}
			if _, ok := types[k]; !ok && !slices.Contains(extra, k) {
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	names = append(names, extra...)
	var cols, last []column
	for _, n := range names {
		if !set[n] {
			continue
		}
		if base, ok := strings.CutSuffix(n, "_id"); ok && set[base] {
			continue
		}
		c := column{name: n, typ: types[n], header: strings.ToUpper(humanise(n))}
		if isTime(c.typ) {
			for _, suffix := range []string{" TIME", " AT"} {
				c.header = strings.TrimSuffix(c.header, suffix)
			}
		}
		for _, it := range items {
			m, _ := it.(map[string]any)
			if l, ok := m[n].([]any); ok && len(l) > 0 && !allScalars(l) {
				c.nested = true
			}
		}
		if n == "message" {
			last = append(last, c)
			continue
		}
		cols = append(cols, c)
	}
	return append(cols, last...)
}

// flatRecords reports whether a list is best shown as a table: its items are objects whose fields are
// scalars, lists of scalars or lists of such flat objects. The element type decides when it is known, so
// that a kind's lists keep one shape whatever their values.
func flatRecords(items []any, et reflect.Type) bool {
	if t := deref(et); t != nil && t.Kind() == reflect.Struct {
		return flatType(t, true)
	}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return false
		}
		for _, v := range m {
			switch v := v.(type) {
			case map[string]any:
				return false
			case []any:
				if !allScalars(v) {
					return false
				}
			}
		}
	}
	return true
}

// flatType reports whether a struct's fields are all scalars or lists of scalars, or (when nest is set)
// lists of such structs.
func flatType(t reflect.Type, nest bool) bool {
	for _, f := range jsonFields(t) {
		ft := deref(f.typ)
		switch {
		case isTime(ft), scalarKind(ft.Kind()):
		case ft.Kind() == reflect.Slice:
			e := deref(ft.Elem())
			if scalarKind(e.Kind()) {
				continue
			}
			if !nest || e.Kind() != reflect.Struct || !flatType(e, false) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func scalarKind(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// sealedValue stands in for a write-only field's value, which describe never shows.
type sealedValue string

const (
	// sealedSet: the API returned a value to this caller (a role that may read write-only fields).
	sealedSet sealedValue = "<set>"
	// sealedHidden: the API returns write-only fields to no role but the controller's.
	sealedHidden sealedValue = "<sealed>"
)

// seal replaces the spec's write-only fields by <set>, or by <sealed> when the API left them out.
func seal(spec any, writeOnly []string) any {
	m, ok := spec.(map[string]any)
	if !ok || len(writeOnly) == 0 {
		return spec
	}
	out := maps.Clone(m)
	for _, name := range writeOnly {
		if absent(m[name]) {
			out[name] = sealedHidden
		} else {
			out[name] = sealedSet
		}
	}
	return out
}

// scalar formats a scalar field value: a time with its age, an object id with the object's kind and name.
func (p *printer) scalar(v any, t reflect.Type) string {
	switch v := v.(type) {
	case nil:
		return "<none>"
	case sealedValue:
		return string(v)
	case string:
		if isTime(t) {
			if ts, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return p.when(ts)
			}
		}
		if n, ok := p.nodes[v]; ok {
			return fmt.Sprintf("%s (%s %q)", v, n.Kind, n.Name)
		}
		if v == "" {
			return `""`
		}
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = p.scalar(x, elemType(t))
		}
		return strings.Join(parts, ", ")
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// cell formats a table cell: a time as its age, a list joined with commas, nothing as "-".
func (p *printer) cell(v any, t reflect.Type) string {
	if absent(v) {
		return "-"
	}
	if s, ok := v.(string); ok && isTime(t) {
		if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return ageAt(p.now, ts)
		}
	}
	return oneLine(p.scalar(v, t))
}

// absent reports whether a JSON value says nothing: missing, null, "", or an empty list or object. (The
// API leaves out the zero values of optional fields; a false or a 0 it sends is meant.)
func absent(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func allScalars(l []any) bool {
	for _, x := range l {
		switch x.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

// jsonField is a field as encoding/json sees it: its JSON name and its Go type.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists a struct type's JSON fields in declaration order, an embedded struct's in its place.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if ft := deref(f.Type); ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// elemType is the element type of a slice or map type; nil when unknown.
func elemType(t reflect.Type) reflect.Type {
	t = deref(t)
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
		return t.Elem()
	}
	return nil
}

var timeType = reflect.TypeOf(time.Time{})

func isTime(t reflect.Type) bool { return deref(t) == timeType }

// acronyms are the words of JSON names written in capitals.
var acronyms = map[string]string{
	"id": "ID", "ids": "IDs", "url": "URL", "urls": "URLs", "api": "API", "cpu": "CPU", "http": "HTTP",
	"https": "HTTPS", "tcp": "TCP", "udp": "UDP", "dns": "DNS", "ip": "IP", "ips": "IPs", "tls": "TLS",
	"eks": "EKS", "aws": "AWS", "s3": "S3", "oci": "OCI", "ttl": "TTL", "uid": "UID", "cidr": "CIDR",
	"rds": "RDS", "vpc": "VPC", "ms": "ms",
}

// humanise turns a JSON name into a label: "definition_id" → "Definition ID".
func humanise(name string) string {
	words := strings.Split(name, "_")
	for i, w := range words {
		if a, ok := acronyms[w]; ok {
			words[i] = a
		} else if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

// decodeJSON decodes a spec or status, keeping numbers as written.
func decodeJSON(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// clean keeps a value from breaking the tabwriter's columns.
func clean(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

// oneLine puts a message on one line, for a table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
