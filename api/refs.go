package api

import (
	"fmt"
	"reflect"
	"strings"
)

// Reference fields are found in a kind's spec and status types, by construction: every field that names
// another object by id is an edge of the dependency graph, whether a spec or a status holds it, without a
// list to keep up by hand. A field is a reference field when
//   - its JSON name is <k>_id (a string) or <k>_ids (a list of strings), or a list of strings named for
//     the plural <k>s (an instance's spec.databases), where <k> is a kind or one of its short names
//     (spec.runtime_id names a kubernetes_runtime, spec.instance_ids workload instances);
//   - its type is ObjectRef (or a list of them, or a pointer to one), which names its kind;
//   - or its `ref` struct tag names the kind: `ref:"workload_instance"`.
//
// The `ref` tag also says which way the edge goes, after a comma: "usedby" when the named object uses
// this one (a secret's spec.instance_ids: the edge goes from the instance to the secret), "attached" when
// this one uses the named one and exists for it (a gateway's spec.instance_id: what the gateway needs
// counts among what its instance needs). `ref:"-"` says a field named like a reference names no QleetOS
// object (an AWS account id).

// RefTag is the struct tag that declares a reference field, its kind and its direction.
const RefTag = "ref"

// Directions of a reference field.
const (
	// RefUses: the object uses the one the field names; the edge goes from the object to it (default).
	RefUses = ""
	// RefUsedBy: the object the field names uses this one; the edge goes from it to this object.
	RefUsedBy = "usedby"
	// RefAttached: the object uses the one the field names and exists for it (a gateway routes traffic
	// to its instance); the edge goes from the object to it and is marked attached.
	RefAttached = "attached"
)

// RefField is one reference field of a kind's spec or status type.
type RefField struct {
	// Path is the field's JSON path, with [] for the elements of a list, e.g. "status.placements[].runtime_id".
	Path string
	// Kind is the kind it names; empty for an ObjectRef, which names its own kind.
	Kind string
	// Direction is RefUses, RefUsedBy or RefAttached.
	Direction string
}

// FieldRefDir is a reference an object makes through one of its reference fields, with the field's direction.
type FieldRefDir struct {
	FieldRef
	// Direction is the field's direction (RefUses, RefUsedBy or RefAttached).
	Direction string
}

var objectRefType = reflect.TypeOf(ObjectRef{})

// refKindByName maps the <k> of <k>_id, <k>_ids and <k>s to a kind: every kind's name and short names.
func refKindByName() map[string]string {
	out := map[string]string{}
	for _, ki := range Kinds() {
		out[ki.Kind] = ki.Kind
		for _, sn := range ki.ShortNames {
			if _, taken := out[sn]; !taken {
				out[sn] = ki.Kind
			}
		}
	}
	return out
}

// refOf says whether a struct field is a reference field, and to which kind, in which direction.
func refOf(f reflect.StructField, jsonName string, kinds map[string]string) (kind, dir string, ok bool) {
	if tag, has := f.Tag.Lookup(RefTag); has {
		if tag == "-" {
			return "", "", false
		}
		kind, dir, _ = strings.Cut(tag, ",")
		return kind, dir, true
	}
	t := f.Type
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t == objectRefType {
		return "", RefUses, true
	}
	isString := f.Type.Kind() == reflect.String
	isStrings := f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String
	switch {
	case isString && strings.HasSuffix(jsonName, "_id"):
		kind = kinds[strings.TrimSuffix(jsonName, "_id")]
	case isStrings && strings.HasSuffix(jsonName, "_ids"):
		kind = kinds[strings.TrimSuffix(jsonName, "_ids")]
	case isStrings && strings.HasSuffix(jsonName, "s"):
		kind = kinds[strings.TrimSuffix(jsonName, "s")]
	}
	return kind, RefUses, kind != ""
}

// jsonName is a struct field's JSON name, "" when it is not encoded, and whether it is embedded inline.
func jsonName(f reflect.StructField) (name string, inline bool) {
	tag := f.Tag.Get("json")
	if tag == "-" || !f.IsExported() {
		return "", false
	}
	name, _, _ = strings.Cut(tag, ",")
	if f.Anonymous && name == "" {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

// ReferenceFields lists the reference fields of a kind's spec and status types.
func (ki *KindInfo) ReferenceFields() []RefField {
	kinds := refKindByName()
	var out []RefField
	var walk func(t reflect.Type, path string, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, path string, seen map[reflect.Type]bool) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			if t.Kind() == reflect.Slice {
				path += "[]"
			}
			if t.Kind() == reflect.Map {
				path += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == objectRefType || seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			f := t.Field(i)
			name, inline := jsonName(f)
			if inline {
				walk(f.Type, path, seen)
				continue
			}
			if name == "" {
				continue
			}
			p := path + "." + name
			if kind, dir, ok := refOf(f, name, kinds); ok {
				if f.Type.Kind() == reflect.Slice {
					p += "[]"
				}
				out = append(out, RefField{Path: p, Kind: kind, Direction: dir})
				continue
			}
			walk(f.Type, p, seen)
		}
	}
	walk(reflect.TypeOf(ki.SpecType), "spec", map[reflect.Type]bool{})
	walk(reflect.TypeOf(ki.StatusType), "status", map[reflect.Type]bool{})
	return out
}

// References lists the objects a spec and a status (pointers to the kind's types, or nil) name through
// their reference fields, each with the concrete path of its field, e.g. "status.placements[1].runtime_id".
// Empty ids are left out.
func (ki *KindInfo) References(spec, status any) []FieldRefDir {
	kinds := refKindByName()
	var out []FieldRefDir
	var walk func(v reflect.Value, path string)
	add := func(kind, dir, path string, v reflect.Value) {
		switch {
		case v.Type() == objectRefType:
			r := v.Interface().(ObjectRef)
			if kind == "" {
				kind = r.Kind
			}
			if r.ID != "" {
				out = append(out, FieldRefDir{FieldRef{Field: path, Kind: kind, ID: r.ID}, dir})
			}
		case v.Kind() == reflect.String:
			if v.String() != "" {
				out = append(out, FieldRefDir{FieldRef{Field: path, Kind: kind, ID: v.String()}, dir})
			}
		}
	}
	walk = func(v reflect.Value, path string) {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
			return
		case reflect.Map:
			iter := v.MapRange()
			for iter.Next() {
				walk(iter.Value(), fmt.Sprintf("%s[%q]", path, iter.Key()))
			}
			return
		case reflect.Struct:
		default:
			return
		}
		if v.Type() == objectRefType {
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, inline := jsonName(f)
			if inline {
				walk(v.Field(i), path)
				continue
			}
			if name == "" {
				continue
			}
			fv, p := v.Field(i), path+"."+name
			kind, dir, ok := refOf(f, name, kinds)
			if !ok {
				walk(fv, p)
				continue
			}
			for fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					break
				}
				fv = fv.Elem()
			}
			switch fv.Kind() {
			case reflect.Slice:
				for j := range fv.Len() {
					add(kind, dir, fmt.Sprintf("%s[%d]", p, j), fv.Index(j))
				}
			case reflect.Pointer:
			default:
				add(kind, dir, p, fv)
			}
		}
	}
	if spec != nil {
		walk(reflect.ValueOf(spec), "spec")
	}
	if status != nil {
		walk(reflect.ValueOf(status), "status")
	}
	return out
}
