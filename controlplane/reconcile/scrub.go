package reconcile

import (
	"reflect"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/internal/redact"
)

// scrub redacts the userinfo of every URL (redact.URLs) in what a reconcile leaves for viewers to read:
// every string of the status (phase message, conditions and the kind's own fields, such as a runtime's
// endpoint) and the outcome message, which becomes an event and the span's status. It is the runtime's
// defence in depth: a reconciler that puts a URL with credentials into a message or an error still
// leaks nothing.
func scrub(status any, out *outcome) {
	out.msg = redact.URLs(out.msg)
	scrubValue(reflect.ValueOf(status))
}

// scrubEvent redacts the userinfo of every URL in an event's message, before the event is recorded.
func scrubEvent(ev *api.Event) { ev.Message = redact.URLs(ev.Message) }

// scrubValue redacts the strings reachable from v that can be set: through pointers, interfaces,
// exported struct fields, slices, arrays and map values.
func scrubValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); v.CanSet() {
			if r := redact.URLs(s); r != s {
				v.SetString(r)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			scrubValue(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() || !v.CanSet() {
			return
		}
		cp := reflect.New(v.Elem().Type()).Elem()
		cp.Set(v.Elem())
		scrubValue(cp)
		v.Set(cp)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scrubValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scrubValue(v.Index(i))
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			cp := reflect.New(iter.Value().Type()).Elem()
			cp.Set(iter.Value())
			scrubValue(cp)
			v.SetMapIndex(iter.Key(), cp)
		}
	}
}
