package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// OpenAPIVersion is the OpenAPI version of the document served at /v1/openapi.json.
const OpenAPIVersion = "3.1.0"

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	s.openapiOnce.Do(func() { s.openapi, s.openapiErr = OpenAPI() })
	if s.openapiErr != nil {
		s.fail(w, r, s.openapiErr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.openapi)
}

// OpenAPI returns the OpenAPI 3.1 document of the v1 API, generated from the Go types of every
// registered kind.
func OpenAPI() ([]byte, error) {
	g := &openapiGen{schemas: map[string]any{}}
	doc := g.document()
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode OpenAPI document: %w", err)
	}
	return data, nil
}

type obj = map[string]any

type openapiGen struct {
	schemas map[string]any
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

// enums lists the allowed values of string fields, by "Type.json_name".
var enums = map[string][]string{
	"KubernetesRuntimeSpec.provider": {api.ProviderLocal, api.ProviderKubeconfig, api.ProviderEKS},
	"RuntimeProfileSpec.provider":    {api.ProviderLocal, api.ProviderEKS},
	"CloudAccountSpec.provider":      {api.CloudAWS},
	"ContainerPort.protocol":         {"TCP", "UDP", "SCTP"},
	"Event.type":                     {api.EventNormal, api.EventWarning},
}

var typeEnums = map[reflect.Type][]string{
	reflect.TypeOf(api.Phase("")): {string(api.PhasePending), string(api.PhaseReconciling), string(api.PhaseReady),
		string(api.PhaseFailed), string(api.PhaseDeleting)},
	reflect.TypeOf(api.ConditionStatus("")): {string(api.ConditionTrue), string(api.ConditionFalse), string(api.ConditionUnknown)},
}

// schema returns the JSON Schema of a Go type; named structs become components referenced by $ref.
func (g *openapiGen) schema(t reflect.Type) obj {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if vals, ok := typeEnums[t]; ok {
		return obj{"type": "string", "enum": vals}
	}
	switch {
	case t == timeType:
		return obj{"type": "string", "format": "date-time"}
	case t == rawType || t.Kind() == reflect.Interface:
		return obj{}
	}
	switch t.Kind() {
	case reflect.Struct:
		name := t.Name()
		if _, done := g.schemas[name]; !done {
			g.schemas[name] = obj{} // placeholder against recursion
			g.schemas[name] = g.structSchema(t, name, nil)
		}
		return ref(name)
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Slice, reflect.Array:
		return obj{"type": "array", "items": g.schema(t.Elem())}
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int32, reflect.Int16, reflect.Int8:
		return obj{"type": "integer", "format": "int32"}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{"type": "integer", "format": "int64"}
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number"}
	}
	return obj{}
}

// structSchema builds an object schema from json tags; override replaces the schemas of some properties.
func (g *openapiGen) structSchema(t reflect.Type, name string, override map[string]obj) obj {
	props := obj{}
	var required []string
	writeOnly := map[string]bool{}
	for _, ki := range api.Kinds() {
		if reflect.TypeOf(ki.SpecType) == t {
			for _, f := range ki.WriteOnly {
				writeOnly[f] = true
			}
		}
	}
	for _, f := range structFields(t) {
		var sch obj
		if o, ok := override[f.name]; ok {
			sch = o
		} else {
			sch = g.schema(f.typ)
		}
		doc := fieldDoc(t, f)
		if vals, ok := enums[name+"."+f.name]; ok {
			sch["enum"] = vals
		}
		if doc != "" || writeOnly[f.name] {
			if _, isRef := sch["$ref"]; isRef {
				// Siblings of $ref are allowed in 3.1; keep the reference and add the description.
				sch = obj{"$ref": sch["$ref"]}
			}
			if doc != "" {
				sch["description"] = doc
			}
			if writeOnly[f.name] {
				sch["writeOnly"] = true
			}
		}
		props[f.name] = sch
		opts := f.field.Tag.Get("json")
		if !strings.Contains(opts, ",omitempty") && !strings.Contains(opts, ",omitzero") && f.field.Type.Kind() != reflect.Pointer {
			required = append(required, f.name)
		}
	}
	out := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	if d := typeDocs[t.Name()]; d != "" {
		out["description"] = d
	}
	return out
}

// fieldDoc finds a field's description in the table mirrored from the Go doc comments. Promoted fields
// are documented on the embedded type.
func fieldDoc(t reflect.Type, f jsonField) string {
	owner := t
	for _, i := range f.index[:len(f.index)-1] {
		owner = owner.Field(i).Type
		for owner.Kind() == reflect.Pointer {
			owner = owner.Elem()
		}
	}
	return fieldDocs[owner.Name()+"."+f.field.Name]
}

func camel(kind string) string {
	var b strings.Builder
	for _, p := range strings.Split(kind, "_") {
		if p != "" {
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	return b.String()
}

func jsonContent(schema obj) obj {
	return obj{"application/json": obj{"schema": schema}}
}

func response(desc string, schema obj) obj {
	r := obj{"description": desc}
	if schema != nil {
		r["content"] = jsonContent(schema)
	}
	return r
}

func param(name, in, desc string, required bool, schema obj) obj {
	return obj{"name": name, "in": in, "description": desc, "required": required, "schema": schema}
}

func (g *openapiGen) document() obj {
	g.schema(reflect.TypeOf(api.Error{}))
	g.schemas["ErrorResponse"] = obj{
		"type": "object", "required": []string{"error"}, "additionalProperties": false,
		"properties": obj{"error": ref("Error")}, "description": "Every error answer has this shape.",
	}
	g.schemas["EventList"] = obj{
		"type": "object", "required": []string{"items"}, "additionalProperties": false,
		"properties": obj{"items": obj{"type": "array", "items": g.schema(reflect.TypeOf(api.Event{}))}},
	}
	g.schemas["Health"] = obj{"type": "object", "properties": obj{"status": obj{"type": "string"}}}
	errResp := response("Error: the code maps to the HTTP status (invalid 400, unauthorized 401, forbidden 403, not_found 404, conflict 409, too_large 413, unavailable 503, internal 500).", ref("ErrorResponse"))
	idParam := param("id", "path", "The object id.", true, obj{"type": "string"})
	ifMatch := param("If-Match", "header", "The resource_version the write expects; a stale one gets 409.", false, obj{"type": "integer", "format": "int64"})
	paths := obj{
		"/healthz": obj{"get": obj{"operationId": "healthz", "summary": "Liveness", "security": []any{}, "tags": []string{"health"},
			"responses": obj{"200": response("Alive", ref("Health"))}}},
		"/readyz": obj{"get": obj{"operationId": "readyz", "summary": "Readiness: the store answers and the app is ready", "security": []any{}, "tags": []string{"health"},
			"responses": obj{"200": response("Ready", ref("Health")), "503": errResp}}},
		"/metrics": obj{"get": obj{"operationId": "metrics", "summary": "Prometheus metrics", "security": []any{}, "tags": []string{"health"},
			"responses": obj{"200": obj{"description": "Prometheus text exposition", "content": obj{"text/plain": obj{"schema": obj{"type": "string"}}}}}}},
		"/v1/openapi.json": obj{"get": obj{"operationId": "openapi", "summary": "This document", "security": []any{}, "tags": []string{"health"},
			"responses": obj{"200": obj{"description": "The OpenAPI 3.1 document", "content": jsonContent(obj{"type": "object"})}}}},
	}
	var tags []any
	for _, ki := range api.Kinds() {
		tags = append(tags, obj{"name": ki.Plural, "description": ki.Description})
		g.kindPaths(ki, paths, errResp, idParam, ifMatch)
	}
	paths["/v1/graph"] = obj{"get": obj{"operationId": "graph", "summary": "The dependency graph: objects, and edges from consumers to providers naming the field that makes each", "tags": []string{"graph"},
		"parameters": []any{param("root", "query", "<kind>/<id or name>: only the objects connected to it (what it depends on and what depends on it, transitively).", false, obj{"type": "string"})},
		"responses":  obj{"200": response("The graph", g.schema(reflect.TypeOf(api.Graph{}))), "default": errResp}}}
	tags = append(tags, obj{"name": "graph", "description": "The dependency graph between objects."})
	paths["/v1/plans"] = obj{"post": obj{"operationId": "plan", "summary": "Preview creates, updates and deletes without writing anything: the runtimes provisioned (from which profile, in which region), support services installed or removed, dependencies created, instances rolled and deletes cascading, in order, each with its reason, and the graph they touch. A change the write would refuse fails the plan the same way (400 naming the field under changes[i]., 409 for a delete with dependents)", "tags": []string{"plans"},
		"requestBody": obj{"required": true, "content": jsonContent(g.schema(reflect.TypeOf(api.PlanRequest{})))},
		"responses":   obj{"200": response("What would happen", g.schema(reflect.TypeOf(api.PlanResult{}))), "default": errResp}}}
	tags = append(tags, obj{"name": "plans", "description": "Plan previews: what a change would make the controllers do."})
	paths["/v1/watch"] = obj{"get": obj{"operationId": "watch", "summary": "A Server-Sent Events stream of changes: a \"ready\" event once the stream sees every later write, then \"change\" events whose data is JSON {\"changed\": [{kind, id, name, resource_version}], \"deleted\": [ids]}. Send the token in the Authorization header (the web view reads the stream with fetch)", "tags": []string{"graph"},
		"responses": obj{"200": obj{"description": "The event stream", "content": obj{"text/event-stream": obj{"schema": obj{"type": "string"}}}}, "default": errResp}}}
	g.tokenPaths(paths, errResp)
	tags = append(tags, obj{"name": "tokens", "description": "API tokens (admin only): create one (its secret is shown once), list them, revoke one."})
	tags = append(tags, obj{"name": "health", "description": "Probes, metrics and this document; no token needed."})
	return obj{
		"openapi": OpenAPIVersion,
		"info": obj{
			"title":       "QleetOS API",
			"version":     "v1",
			"description": "The QleetOS control plane API. Every object shares one envelope; spec is desired state, status is observed state written by controllers. Send `Authorization: Bearer <token>`.",
		},
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"servers":           []any{obj{"url": "/"}},
		"security":          []any{obj{"bearer": []string{}}},
		"tags":              tags,
		"paths":             paths,
		"components": obj{
			"schemas":         g.schemas,
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer", "description": "An API token; its role (admin, developer, viewer, controller) decides what it may do."}},
		},
	}
}

func (g *openapiGen) kindPaths(ki *api.KindInfo, paths obj, errResp, idParam, ifMatch obj) {
	n := camel(ki.Kind)
	specT, statusT := reflect.TypeOf(ki.SpecType), reflect.TypeOf(ki.StatusType)
	spec, status := g.schema(specT), g.schema(statusT)
	meta := g.structSchema(reflect.TypeOf(api.Meta{}), "Meta", nil)
	props := meta["properties"].(obj)
	props["spec"] = spec
	props["status"] = status
	meta["required"] = append(meta["required"].([]string), "spec", "status")
	meta["description"] = ki.Description
	g.schemas[n] = meta
	g.schemas[n+"List"] = obj{"type": "object", "required": []string{"items"}, "additionalProperties": false, "properties": obj{
		"items":    obj{"type": "array", "items": ref(n)},
		"continue": obj{"type": "string", "description": "Token for the next page; absent on the last page."},
	}}
	g.schemas[n+"Write"] = g.structSchema(reflect.TypeOf(writeBody{}), "Write", map[string]obj{"spec": spec})
	update := g.structSchema(reflect.TypeOf(updateBody{}), "Update", map[string]obj{"spec": spec, "status": status})
	update["description"] = "The labels and spec to write. What GET returned may be sent back as it is: the read-only fields (id, kind, generation, timestamps, status) are ignored when unchanged and refused (400 naming the field) when changed; resource_version is a precondition like If-Match, and a write-only field left out keeps its stored value."
	g.schemas[n+"Update"] = update
	g.schemas[n+"Patch"] = obj{"type": "object", "additionalProperties": false, "description": "An RFC 7396 JSON merge patch over labels and spec.", "properties": obj{
		"labels": obj{"type": []string{"object", "null"}, "additionalProperties": obj{"type": []string{"string", "null"}}},
		"spec":   obj{"type": []string{"object", "null"}},
	}}
	tag := []string{ki.Plural}
	base := "/v1/" + ki.Plural
	one := response("The object", ref(n))
	with := func(extra obj) obj {
		out := obj{"default": errResp}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	filters := []any{
		param("label_selector", "query", "k=v,k2=v2: only objects carrying every pair.", false, obj{"type": "string"}),
		param("references", "query", "An object id: only objects that reference it, or that their spec attaches to it (the instances of a definition, the secrets that serve an instance).", false, obj{"type": "string"}),
		param("pending", "query", "true: only objects that are not reconciled (deletion requested, not Ready, or Ready at an older generation), from an index of them.", false, obj{"type": "boolean"}),
		param("owned", "query", "true: only objects that a controller created for owners.", false, obj{"type": "boolean"}),
	}
	paths[base] = obj{
		"get": obj{"operationId": "list_" + ki.Plural, "summary": "List " + ki.Plural, "tags": tag,
			"parameters": append(slices.Clone(filters),
				param("limit", "query", "Page size.", false, obj{"type": "integer", "minimum": 1, "maximum": maxListLimit, "default": defaultListLimit}),
				param("continue", "query", "Token from the previous page.", false, obj{"type": "string"}),
			),
			"responses": with(obj{"200": response("One page", ref(n+"List"))})},
		"post": obj{"operationId": "create_" + ki.Kind, "summary": "Create a " + ki.Kind, "tags": tag,
			"requestBody": obj{"required": true, "content": jsonContent(ref(n + "Write"))},
			"responses":   with(obj{"201": response("Created", ref(n))})},
	}
	paths[base+"/count"] = obj{"get": obj{"operationId": "count_" + ki.Plural, "summary": "Count the " + ki.Plural + " a list with the same filters returns, over all its pages", "tags": tag,
		"parameters": filters,
		"responses":  with(obj{"200": response("The count", g.schema(reflect.TypeOf(api.Count{})))})}}
	paths[base+"/by-name/{name}"] = obj{"get": obj{"operationId": "get_" + ki.Kind + "_by_name", "summary": "Get a " + ki.Kind + " by name", "tags": tag,
		"parameters": []any{param("name", "path", "The object name.", true, obj{"type": "string"})},
		"responses":  with(obj{"200": one})}}
	paths[base+"/{id}"] = obj{
		"parameters": []any{idParam},
		"get": obj{"operationId": "get_" + ki.Kind, "summary": "Get a " + ki.Kind + ", optionally waiting until it is reconciled or gone", "tags": tag,
			"parameters": []any{
				param("wait", "query", "reconciled: answer once phase is Ready or Failed at the current generation; gone: answer 404 once deleted.", false, obj{"type": "string", "enum": []string{"reconciled", "gone"}}),
				param("timeout", "query", "How long to wait (Go duration, at most 5m); the current object is returned at the timeout.", false, obj{"type": "string", "examples": []string{"60s"}}),
			},
			"responses": with(obj{"200": one})},
		"put": obj{"operationId": "update_" + ki.Kind, "summary": "Replace the labels and spec of a " + ki.Kind, "tags": tag,
			"parameters":  []any{ifMatch},
			"requestBody": obj{"required": true, "content": jsonContent(ref(n + "Update"))},
			"responses":   with(obj{"200": one})},
		"patch": obj{"operationId": "patch_" + ki.Kind, "summary": "Merge-patch the labels and spec of a " + ki.Kind, "tags": tag,
			"parameters":  []any{ifMatch},
			"requestBody": obj{"required": true, "content": obj{"application/merge-patch+json": obj{"schema": ref(n + "Patch")}}},
			"responses":   with(obj{"200": one})},
		"delete": obj{"operationId": "delete_" + ki.Kind, "summary": "Request deletion of a " + ki.Kind, "tags": tag,
			"parameters": []any{
				param("cascade", "query", "Delete dependents first and wait for them to be gone, instead of answering 409.", false, obj{"type": "boolean"}),
				param("orphan", "query", "Abandon what the object made in the compute space (e.g. a workload's objects in a cluster that is gone) instead of cleaning it up; with cascade, for the dependents too. May be given for an object already being deleted.", false, obj{"type": "boolean"}),
				param("detach", "query", "Delete a database or bucket even though the instance its own spec.instance_id names still uses it (the instance loses it); without it that delete answers 409.", false, obj{"type": "boolean"}),
			},
			"responses": with(obj{"202": response("Deletion requested", ref(n))})},
	}
	paths[base+"/{id}/status"] = obj{"parameters": []any{idParam}, "put": obj{
		"operationId": "update_" + ki.Kind + "_status", "summary": "Write the status (controller or admin role)", "tags": tag,
		"parameters":  []any{ifMatch},
		"requestBody": obj{"required": true, "content": jsonContent(status)},
		"responses":   with(obj{"200": one})}}
	paths[base+"/{id}/finalize"] = obj{"parameters": []any{idParam}, "post": obj{
		"operationId": "finalize_" + ki.Kind, "summary": "Remove an object whose deletion was requested (controller or admin role)", "tags": tag,
		"responses": with(obj{"204": obj{"description": "Removed"}})}}
	eventSchema := ref("Event")
	paths[base+"/{id}/events"] = obj{"parameters": []any{idParam},
		"get": obj{"operationId": "list_" + ki.Kind + "_events", "summary": "List the object's events, oldest first", "tags": tag,
			"responses": with(obj{"200": response("Events", ref("EventList"))})},
		"post": obj{"operationId": "record_" + ki.Kind + "_event", "summary": "Append an event (controller or admin role)", "tags": tag,
			"requestBody": obj{"required": true, "content": jsonContent(eventSchema)},
			"responses":   with(obj{"201": response("Recorded", eventSchema)})},
	}
	paths[base+"/{id}/trace"] = obj{"parameters": []any{idParam},
		"get": obj{"operationId": "get_" + ki.Kind + "_trace", "summary": "The hops of the object's most recent reconcile, from this server's recent-span buffer (404 when none is held)", "tags": tag,
			"responses": with(obj{"200": response("Trace", g.schema(reflect.TypeOf(api.Trace{})))})},
	}
	paths[base+"/{id}/reconcile"] = obj{"parameters": []any{idParam}, "post": obj{
		"operationId": "reconcile_" + ki.Kind, "summary": "Ask the object's controller to reconcile it now, without changing it (developer, admin or controller role)", "tags": tag,
		"responses": with(obj{"202": obj{"description": "Reconcile requested"}})}}
	if ki.Kind == api.KindWorkloadDefinition {
		g.schemas["ImageRequest"] = g.structSchema(reflect.TypeOf(imageRequest{}), "ImageRequest", nil)
		g.schemas["ImageResponse"] = g.structSchema(reflect.TypeOf(imageResponse{}), "ImageResponse", map[string]obj{"definition": ref(n)})
		paths[base+"/{id}/image"] = obj{"parameters": []any{idParam}, "post": obj{
			"operationId": "set_" + ki.Kind + "_image", "summary": "CI hook: set one container's image", "tags": tag,
			"parameters":  []any{ifMatch},
			"requestBody": obj{"required": true, "content": jsonContent(ref("ImageRequest"))},
			"responses":   with(obj{"200": response("Updated", ref("ImageResponse"))})}}
	}
}

// tokenPaths documents /v1/tokens (tokens.go).
func (g *openapiGen) tokenPaths(paths obj, errResp obj) {
	info := g.schema(reflect.TypeOf(api.TokenInfo{}))
	g.schemas["TokenList"] = obj{"type": "object", "required": []string{"items"}, "additionalProperties": false,
		"properties": obj{"items": obj{"type": "array", "items": info}}}
	tag := []string{"tokens"}
	paths["/v1/tokens"] = obj{
		"get": obj{"operationId": "list_tokens", "summary": "List the API tokens (never their secrets)", "tags": tag,
			"responses": obj{"200": response("The tokens", ref("TokenList")), "default": errResp}},
		"post": obj{"operationId": "create_token", "summary": "Create an API token; its secret is in this answer only (only its hash is stored)", "tags": tag,
			"requestBody": obj{"required": true, "content": jsonContent(g.schema(reflect.TypeOf(api.TokenRequest{})))},
			"responses":   obj{"201": response("Created, with the secret", g.schema(reflect.TypeOf(api.NewToken{}))), "default": errResp}},
	}
	paths["/v1/tokens/{id}"] = obj{
		"parameters": []any{param("id", "path", "The token id.", true, obj{"type": "string"})},
		"delete": obj{"operationId": "revoke_token", "summary": "Revoke an API token", "tags": tag,
			"responses": obj{"204": obj{"description": "Revoked"}, "default": errResp}},
	}
}
