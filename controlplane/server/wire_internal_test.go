package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// wireCases are objects as the store returns them: canonical JSON (SQLite), jsonb's spaced text
// (PostgreSQL), strings json.Marshal would escape, an empty status, and every optional member of Meta
// both set and unset.
func wireCases() []*api.RawObject {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	return []*api.RawObject{
		{Meta: api.Meta{ID: "a", Kind: api.KindWorkloadInstance, Name: "web", Generation: 3, ResourceVersion: 7, CreatedAt: at, UpdatedAt: at},
			Spec: json.RawMessage(`{"definition_id":"d","replicas":2}`), Status: json.RawMessage(`{"phase":"Ready","observed_generation":3}`)},
		{Meta: api.Meta{ID: "b", Kind: api.KindSecret, Name: "db <&> \"pass\"", Labels: map[string]string{"app": "x", "b": "é"},
			Owners: []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: "a", Name: "web"}}, DeletionRequestedAt: &at, DeletionOrphan: true},
			Spec: json.RawMessage(`{"a": [1, 2, {"b": "<script>"}], "c": null}`), Status: json.RawMessage(`{}`)},
		{Meta: api.Meta{ID: "c", Kind: "k", Name: "tab\there \u2028 \x7f \xff", Generation: -1,
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 2*3600)), UpdatedAt: at.Add(time.Millisecond * 100),
			Labels: map[string]string{"z": "1", "a": "quote\"back\\slash"}, Owners: []api.ObjectRef{{Kind: "k", ID: "1"}, {Kind: "k<", ID: "2&", Name: "n>"}}},
			Spec: json.RawMessage(`{}`), Status: json.RawMessage(`{"conditions":[]}`)},
		{Meta: api.Meta{Name: ""}, Spec: nil, Status: nil},
	}
}

// TestWireCasesCoverEveryMetaField: each field of api.Meta is set in at least one wire case, so that a
// field added to Meta and not to appendMeta fails TestAppendWireIsTheObjectsJSON.
func TestWireCasesCoverEveryMetaField(t *testing.T) {
	mt := reflect.TypeFor[api.Meta]()
	for i := range mt.NumField() {
		set := false
		for _, wo := range wireCases() {
			set = set || !reflect.ValueOf(wo.Meta).Field(i).IsZero()
		}
		require.True(t, set, "no wire case sets api.Meta.%s", mt.Field(i).Name)
	}
}

// TestAppendWireIsTheObjectsJSON: appendWire writes valid JSON that decodes to the same object, and to
// the same value, as json.Marshal's encoding of it.
func TestAppendWireIsTheObjectsJSON(t *testing.T) {
	for _, wo := range wireCases() {
		got := appendWire(nil, wo)
		require.True(t, json.Valid(got), "%s", got)
		want, err := json.Marshal(wo)
		require.NoError(t, err)
		var gotAny, wantAny any
		require.NoError(t, json.Unmarshal(got, &gotAny))
		require.NoError(t, json.Unmarshal(want, &wantAny))
		require.Equal(t, wantAny, gotAny, "appendWire: %s\njson.Marshal: %s", got, want)

		if compact(t, wo.Spec) && compact(t, wo.Status) {
			require.Equal(t, string(want), string(got), "byte for byte, when the stored JSON is compact")
		}

		var back api.RawObject
		require.NoError(t, json.Unmarshal(got, &back))
		require.Equal(t, wo.ID, back.ID)
		require.Equal(t, wo.Labels, back.Labels)
		require.Equal(t, wo.Owners, back.Owners)
	}
}

// compact says whether raw is empty or compact JSON with nothing json.Marshal would escape.
func compact(t *testing.T, raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true
	}
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, raw))
	return b.String() == string(raw) && !bytes.ContainsAny(raw, "<>&")
}

// BenchmarkWireEncode compares a page of 1,000 objects written by appendWire with json.Marshal of the
// same page, as the list handler wrote it before.
func BenchmarkWireEncode(b *testing.B) {
	page := make([]*api.RawObject, 0, 1000)
	for len(page) < cap(page) {
		page = append(page, wireCases()[:2]...)
	}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(struct {
				Items []*api.RawObject `json:"items"`
			}{page}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendWire", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = append(buf[:0], `{"items":[`...)
			for i, wo := range page {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendWire(buf, wo)
			}
			buf = append(buf, "]}"...)
		}
	})
}
