package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// pendingRefDeclarations are reference-like fields that have no edge yet, because the declaration they
// need is in a file another change owns. TODO(issue 26): the lead adds these tags, then empties this list
// (the test fails on an entry that is no longer needed, so that the list only shrinks).
var pendingRefDeclarations = map[string]string{}

// refNouns are JSON names that name other objects without the <kind>_id convention: a field so named
// must declare itself with a ref tag (its kind, or "-").
var refNouns = []string{"consumers", "users", "owners", "dependencies", "providers"}

// TestEveryReferenceFieldIsAnEdge is generated from the kind registry: for every kind, every field of its
// spec and status that names another object (by the <kind>_id convention, a ref tag, an ObjectRef, a name
// such as "consumers", or because the kind's Refs, UsedBy or StatusRefs name it) is filled in, and the
// object's edges in the graph must include one for it. A field named like a reference that names no
// QleetOS object says so with `ref:"-"`.
func TestEveryReferenceFieldIsAnEdge(t *testing.T) {
	t.Parallel()
	kinds := map[string]bool{}
	for _, ki := range api.Kinds() {
		kinds[ki.Kind] = true
		for _, sn := range ki.ShortNames {
			kinds[sn] = true
		}
	}
	stillPending := map[string]bool{}
	for k := range pendingRefDeclarations {
		stillPending[k] = false
	}
	for _, ki := range api.Kinds() {
		t.Run(ki.Kind, func(t *testing.T) {
			spec, status := ki.NewSpec(), ki.NewStatus()
			var want []string // concrete paths of the reference-like fields
			fill(reflect.ValueOf(spec).Elem(), "spec", kinds, &want)
			fill(reflect.ValueOf(status).Elem(), "status", kinds, &want)
			// What the kind's own functions name is a reference field too.
			for _, fr := range append(ki.Refs(spec), ki.UsedBy(spec)...) {
				want = append(want, fr.Field)
			}
			if ki.StatusRefs != nil {
				for _, fr := range ki.StatusRefs(status) {
					want = append(want, fr.Field)
				}
			}
			sort.Strings(want)
			want = slices.Compact(want)
			o := &store.Object{Kind: ki.Kind, ID: "self", Name: "self", Spec: mustJSON(t, spec), Status: mustJSON(t, status)}
			edges := objectEdges(ki, o)
			var missing []string
			for _, path := range want {
				id := sampleID(path)
				found := slices.ContainsFunc(edges, func(e api.GraphEdge) bool {
					return (e.From == "self" && e.To == id && e.Why == path) || (e.To == "self" && e.From == id && e.Why == ki.Kind+" "+path)
				})
				key := ki.Kind + " " + path
				if _, pending := pendingRefDeclarations[key]; pending {
					stillPending[key] = !found
					continue
				}
				if !found {
					missing = append(missing, path)
				}
			}
			require.Empty(t, missing, "%s: reference fields with no edge; tag each ref:\"<kind>[,usedby|attached]\", or ref:\"-\" when it names no QleetOS object (edges: %v)", ki.Kind, edges)
		})
	}
	for k, still := range stillPending {
		require.True(t, still, "%s is no longer a reference-like field without an edge: remove it from pendingRefDeclarations", k)
	}
}

// sampleID is the id fill puts in the field at path.
func sampleID(path string) string { return "id:" + path }

// fill sets every string of v to its sampleID, gives every list one element, every map one entry and
// every pointer a value, and appends to want the paths of the fields that look like references and do not
// say `ref:"-"`.
func fill(v reflect.Value, path string, kinds map[string]bool, want *[]string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(sampleID(path))
	case reflect.Pointer:
		if v.Type().Elem() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(&time.Time{}))
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path, kinds, want)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), path+"[0]", kinds, want)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, fmt.Sprintf("%s[%q]", path, "k"), kinds, want)
		m.SetMapIndex(reflect.ValueOf("k"), e)
		v.Set(m)
	case reflect.Struct:
		t := v.Type()
		if t == reflect.TypeOf(time.Time{}) {
			return
		}
		if t == reflect.TypeOf(api.ObjectRef{}) {
			v.Set(reflect.ValueOf(api.ObjectRef{Kind: api.KindKubernetesRuntime, ID: sampleID(path), Name: "n"}))
			*want = append(*want, path)
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				fill(v.Field(i), path, kinds, want)
				continue
			}
			p := path + "." + name
			fill(v.Field(i), p, kinds, want)
			if !refLike(f, name, kinds) {
				continue
			}
			if f.Type.Kind() == reflect.Slice {
				p += "[0]"
			}
			*want = append(*want, p)
		}
	}
}

// refLike says whether a field looks like a reference and does not say `ref:"-"`: a ref tag, a string
// named *_id or strings named *_ids (whatever the prefix: one that is not a kind must say ref:"-"), strings
// named for a kind's plural, or a reference noun.
func refLike(f reflect.StructField, name string, kinds map[string]bool) bool {
	if tag, ok := f.Tag.Lookup(api.RefTag); ok {
		return tag != "-"
	}
	str := f.Type.Kind() == reflect.String
	strs := f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String
	switch {
	case str && strings.HasSuffix(name, "_id"), strs && strings.HasSuffix(name, "_ids"):
		return true
	case strs && (kinds[strings.TrimSuffix(name, "s")] || slices.Contains(refNouns, name)):
		return true
	}
	return false
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
