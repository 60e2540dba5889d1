package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// readBody reads the request body, bounded by MaxBodyBytes (413 beyond it).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, invalid("body", "cannot read request body: "+err.Error())
	}
	return data, nil
}

// parseJSON parses one JSON value (numbers kept as json.Number) and rejects trailing data. Errors name
// the byte offset.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, invalid("body", fmt.Sprintf("invalid JSON at byte offset %d: %s", se.Offset, se.Error()))
		case errors.Is(err, io.EOF):
			return nil, invalid("body", "request body is empty; a JSON object is required")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, invalid("body", fmt.Sprintf("invalid JSON at byte offset %d: unexpected end of input", len(data)))
		default:
			return nil, invalid("body", "invalid JSON: "+err.Error())
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("body", fmt.Sprintf("invalid JSON at byte offset %d: trailing data after the JSON value", dec.InputOffset()))
	}
	if path, ok := duplicateKey(data); ok {
		return nil, invalid(path, "appears more than once in its JSON object; each key may appear once")
	}
	return v, nil
}

// duplicateKey returns the JSON path of the first key that appears twice in one object of a valid
// JSON document. encoding/json keeps the last of them silently, so a client and the server could read
// one document two ways.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	path, ok, _ := dupWalk(dec, "")
	return path, ok
}

// dupWalk reads one value from dec and looks for a duplicate key in it, path naming the value.
func dupWalk(dec *json.Decoder, path string) (string, bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", false, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", false, err
			}
			key, _ := kt.(string)
			if seen[key] {
				return join(path, key), true, nil
			}
			seen[key] = true
			if p, ok, err := dupWalk(dec, join(path, key)); ok || err != nil {
				return p, ok, err
			}
		}
		_, err = dec.Token() // '}'
		return "", false, err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if p, ok, err := dupWalk(dec, fmt.Sprintf("%s[%d]", path, i)); ok || err != nil {
				return p, ok, err
			}
		}
		_, err = dec.Token() // ']'
		return "", false, err
	}
	return "", false, nil
}

// decodeStrict decodes data into the struct that into points to. It rejects syntax errors (with the byte
// offset), trailing data, unknown fields and wrong types, naming the field by its JSON path under path.
func decodeStrict(data []byte, into any, path string) error {
	v, err := parseJSON(data)
	if err != nil {
		return err
	}
	if fe := checkShape(v, reflect.TypeOf(into).Elem(), path); fe != nil {
		return api.Invalid(*fe)
	}
	return decodeChecked(data, into, path)
}

// decodeChecked decodes data, which parseJSON and checkShape have accepted for into's type, into the
// struct that into points to.
func decodeChecked(data []byte, into any, path string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		// checkShape accepted the document, so this is a value encoding/json refuses on its own.
		return invalid(orBody(path), "cannot decode: "+err.Error())
	}
	return nil
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage(nil))
)

// join names key under path: "spec.image", or spec[""] for an empty key, so that a path is never empty.
func join(path, key string) string {
	if key == "" {
		return path + `[""]`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkShape walks a parsed JSON value along a Go type and returns the first unknown field (compared
// exactly, unlike encoding/json) or wrong type, with its JSON path, e.g. spec.containers[0].image.
func checkShape(v any, t reflect.Type, path string) *api.FieldError {
	if v == nil {
		return nil // null decodes to the zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(want string) *api.FieldError {
		return &api.FieldError{Field: orBody(path), Message: fmt.Sprintf("must be %s, not %s", want, jsonTypeName(v))}
	}
	switch {
	case t == rawType || t.Kind() == reflect.Interface:
		return nil
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			return bad("an RFC 3339 timestamp string")
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return &api.FieldError{Field: orBody(path), Message: fmt.Sprintf("must be an RFC 3339 timestamp: %q", s)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		fields := jsonFields(t)
		for _, k := range sortedAnyKeys(obj) {
			ft, ok := fields[k]
			if !ok {
				return &api.FieldError{Field: join(path, k), Message: "unknown field"}
			}
			if fe := checkShape(obj[k], ft, join(path, k)); fe != nil {
				return fe
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, k := range sortedAnyKeys(obj) {
			if fe := checkShape(obj[k], t.Elem(), fmt.Sprintf("%s[%q]", path, k)); fe != nil {
				return fe
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return bad("an array")
		}
		for i, e := range arr {
			if fe := checkShape(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); fe != nil {
				return fe
			}
		}
	case reflect.String:
		str, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		if isRef(path) && strings.ContainsRune(str, 0) {
			return &api.FieldError{Field: orBody(path), Message: "must not contain a NUL character"}
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return bad("a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("an integer")
		}
		i, err := n.Int64()
		if err != nil || reflect.Zero(t).OverflowInt(i) {
			return &api.FieldError{Field: orBody(path), Message: fmt.Sprintf("must be an integer that fits in %d bits, not %s", t.Bits(), n)}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("a non-negative integer")
		}
		var u uint64
		if _, err := fmt.Sscan(n.String(), &u); err != nil || strings.ContainsAny(n.String(), ".eE-") || reflect.Zero(t).OverflowUint(u) {
			return &api.FieldError{Field: orBody(path), Message: fmt.Sprintf("must be a non-negative integer that fits in %d bits, not %s", t.Bits(), n)}
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("a number")
		}
		if _, err := n.Float64(); err != nil {
			return &api.FieldError{Field: orBody(path), Message: fmt.Sprintf("must be a number, not %s", n)}
		}
	default:
		return &api.FieldError{Field: orBody(path), Message: "cannot be set"}
	}
	return nil
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	default:
		return "null"
	}
}

func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonField is one JSON-visible field of a struct, with embedded structs flattened.
type jsonField struct {
	name  string
	index []int
	typ   reflect.Type
	field reflect.StructField
}

// fieldsCache holds structFields' and jsonFields' answers by type: types are few, and their fields
// were worked out again for every request (about 7% of an API create's CPU).
var fieldsCache sync.Map // reflect.Type -> *typeFields

type typeFields struct {
	list   []jsonField
	byName map[string]reflect.Type
}

func fieldsOf(t reflect.Type) *typeFields {
	if tf, ok := fieldsCache.Load(t); ok {
		return tf.(*typeFields)
	}
	list := listFields(t)
	byName := make(map[string]reflect.Type, len(list))
	for _, f := range list {
		byName[f.name] = f.typ
	}
	tf, _ := fieldsCache.LoadOrStore(t, &typeFields{list: list, byName: byName})
	return tf.(*typeFields)
}

// structFields lists the JSON fields of a struct type the way encoding/json sees them (tags, embedded
// structs without a tag promoted, "-" skipped). The answer is shared: callers must not modify it.
func structFields(t reflect.Type) []jsonField {
	return fieldsOf(t).list
}

func listFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for _, sub := range structFields(ft) {
					sub.index = append([]int{i}, sub.index...)
					out = append(out, sub)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, index: []int{i}, typ: f.Type, field: f})
	}
	return out
}

// jsonFields maps the JSON names of a struct type's fields to their types. The answer is shared:
// callers must not modify it.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	return fieldsOf(t).byName
}

// mergePatch applies an RFC 7396 JSON merge patch to a parsed document.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// isRef reports whether path names a reference to another object (id, runtime_id, instance_ids[0]): the
// strings the store looks up, which may not hold a NUL byte (bun cannot put one in a query).
func isRef(path string) bool {
	name := path[strings.LastIndex(path, ".")+1:]
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return name == "id" || strings.HasSuffix(name, "_id") || strings.HasSuffix(name, "_ids")
}

// rejectNUL answers 400 to a request whose path or query holds a NUL byte, naming where: ids, names and
// query values reach the store, which cannot put a NUL in a query (it answered 500).
func (s *Server) rejectNUL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.ContainsRune(r.URL.Path, 0) {
			s.fail(w, r, invalid("path", "must not contain a NUL character"))
			return
		}
		q := r.URL.Query()
		for _, k := range slices.Sorted(maps.Keys(q)) {
			if strings.ContainsRune(k, 0) || slices.ContainsFunc(q[k], func(v string) bool { return strings.ContainsRune(v, 0) }) {
				s.fail(w, r, invalid(cmp.Or(strings.ReplaceAll(k, "\x00", ""), "query"), "must not contain a NUL character"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
