package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// The fuzz targets below send arbitrary input through every request decoder of the API (each kind's
// create, update, merge-patch and status bodies, events, the image hook, tokens, plans, and the query
// parameters and headers the handlers parse), straight to the handler with no network, and require
// that the server never panics and never answers 5xx: bad input is the client's error. The seeds in
// testdata/fuzz/<FuzzName> run in every plain `go test`; docs/fuzzing.md records the long runs.

// serve sends one request straight to the handler (no network) and returns the status.
func (e *env) serve(method, path, contentType string, body []byte) int {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	return e.serveRequest(req)
}

// serveRequest sends req, with the admin token, straight to the handler and returns the status.
func (e *env) serveRequest(req *http.Request) int {
	req.Header.Set("Authorization", "Bearer "+e.tokens[server.RoleAdmin])
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	return rec.Code
}

// serveQuery sends a bodiless request whose raw query string is q, which may be anything.
func (e *env) serveQuery(method, path, q string) int {
	req := httptest.NewRequest(method, path, nil)
	req.URL.RawQuery = q
	return e.serveRequest(req)
}

// fuzzWorld is an API server on SQLite holding one object of every registered kind, for the targets that
// address an existing object.
type fuzzWorld struct {
	*env
	kinds  []*api.KindInfo // every registered kind, sorted by name
	paths  []string        // paths[i] is /v1/<plural>/<id> of the object of kinds[i]
	bodies []string        // bodies[i] is a valid create body for kinds[i], with the name "fz-new"
	defID  string          // the workload definition
}

// kind picks a kind index from a fuzzed byte.
func (w *fuzzWorld) kind(b uint8) int { return int(b) % len(w.kinds) }

func newFuzzWorld(f testing.TB) *fuzzWorld {
	f.Helper()
	e := setup(f)
	rt, def, inst := e.world(f, "fz")
	valid := map[string]string{
		api.KindBucket:             `{"name":"%s","spec":{"instance_id":"` + inst.ID + `","size":"1Gi"}}`,
		api.KindCloudAccount:       `{"name":"%s","spec":{"provider":"aws","region":"us-east-1","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"wJalrXUtnFEMI"}}`,
		api.KindDatabase:           `{"name":"%s","spec":{"instance_id":"` + inst.ID + `","engine":"postgres"}}`,
		api.KindDomainName:         `{"name":"%s","spec":{"zone":"%s.example.com"}}`,
		api.KindGateway:            `{"name":"%s","spec":{"instance_id":"` + inst.ID + `","hosts":["%s.example.com"],"paths":["/"],"port":80,"tls":true}}`,
		api.KindKubernetesRuntime:  `{"name":"%s","labels":{"env":"fz"},"spec":{"provider":"local","region":"us-east","nodes":3,"zones":["a"]}}`,
		api.KindRuntimeProfile:     `{"name":"%s","spec":{"provider":"local","regions":["%s"],"min_nodes":1,"max_nodes":3,"reclaim_after":"10m"}}`,
		api.KindSecret:             `{"name":"%s","spec":{"instance_ids":["` + inst.ID + `"],"values":{"KEY":"v"},"mount_path":"/etc/s"}}`,
		api.KindSupportService:     `{"name":"%s","spec":{"runtime_id":"` + rt.ID + `","type":"ingress"}}`,
		api.KindWorkloadDefinition: `{"name":"%s","spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"container_port":80}]}],"replicas":2}}`,
		api.KindWorkloadInstance:   `{"name":"%s","spec":{"definition_id":"` + def.ID + `","runtime_id":"` + rt.ID + `","images":{"web":"nginx:1.28"}}}`,
	}
	existing := map[string]string{api.KindKubernetesRuntime: rt.ID, api.KindWorkloadDefinition: def.ID, api.KindWorkloadInstance: inst.ID}
	w := &fuzzWorld{env: e, kinds: api.Kinds(), defID: def.ID}
	for _, ki := range w.kinds {
		tmpl, ok := valid[ki.Kind]
		require.True(f, ok, "kind %s has no valid fuzz body; add one to newFuzzWorld", ki.Kind)
		body := func(name string) string { return strings.ReplaceAll(tmpl, "%s", name) }
		w.bodies = append(w.bodies, body("fz-new"))
		id := existing[ki.Kind]
		if id == "" {
			code, data := e.raw(f, server.RoleAdmin, http.MethodPost, "/v1/"+ki.Plural, body("fz-"+strings.ReplaceAll(ki.Kind, "_", "-")), nil)
			require.Equal(f, http.StatusCreated, code, "%s: %s", ki.Kind, data)
			var obj api.RawObject
			require.NoError(f, json.Unmarshal(data, &obj))
			id = obj.ID
		}
		w.paths = append(w.paths, "/v1/"+ki.Plural+"/"+id)
	}
	return w
}

// requireNo5xx fails the fuzz input when the server answered with a server error.
func requireNo5xx(t *testing.T, code int, input any) {
	t.Helper()
	require.Less(t, code, 500, "input %q", input)
}

// bodySeeds fit any decoder: malformed JSON, wrong top-level types, trailing data, duplicate keys, huge
// numbers and deep nesting.
var bodySeeds = []string{
	``, `[]`, `null`, `"str"`, `1e400`, `{}`, `{"spec":null}`, `{"name":"h","spec":{"replicas":-1}} x`,
	`{"name":"a","name":"b"}`, `{"labels":{"a":"b","a":"c"}}`, `{"spec":{"nodes":1e400}}`, `{"spec":{"nodes":9223372036854775808}}`,
	`{"spec":{"x":` + strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64) + `}}`, "{\"name\":\"\xff\xfe\"}", `{"name":"a"`,
}

// FuzzDecodeCreate posts arbitrary bodies to every collection: never a panic, never a 5xx.
func FuzzDecodeCreate(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		f.Add(uint8(i), []byte(w.bodies[i]))
		for _, seed := range bodySeeds {
			f.Add(uint8(i), []byte(seed))
		}
	}
	for _, seed := range []string{
		`{"name":"b","labels":{"x/y":"z"},"spec":{"provider":"kubeconfig","kubeconfig":"apiVersion: v1\nkind: Config\n"}}`,
		`{"name":"c","spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"container_port":80}],"resources":{"requests":{"cpu":"1"}},"liveness_probe":{"tcp":true,"port":80}}]}}`,
		`{"name":"d","spec":{"manifests":"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n- x"}}`,
		`{"name":"e","spec":{"helm":{"chart":"x","values":"a: b"},"autoscaling":{"min_replicas":1,"max_replicas":2}}}`,
		`{"name":"o","owners":[{"kind":"runtime_profile","id":"nope"}],"spec":{}}`,
	} {
		for i := range w.kinds {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		code := w.serve(http.MethodPost, "/v1/"+w.kinds[w.kind(kind)].Plural, "application/json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodeUpdate replaces an object of every kind with arbitrary bodies: never a panic, never a 5xx.
func FuzzDecodeUpdate(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		f.Add(uint8(i), []byte(w.bodies[i]))
		f.Add(uint8(i), []byte(strings.Replace(w.bodies[i], `"spec":{`, `"spec":{"unknown":1,`, 1)))
		for _, seed := range bodySeeds {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		code := w.serve(http.MethodPut, w.paths[w.kind(kind)], "application/json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodePatch applies arbitrary merge patches to an object of every kind: never a panic, never a 5xx.
func FuzzDecodePatch(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		for _, seed := range append([]string{
			`{"labels":{"a":"b","c":null}}`, `{"spec":{"nodes":4}}`, `{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}`,
			`{"spec":{"replicas":null,"autoscaling":{"min_replicas":2,"max_replicas":1}}}`, `{"name":"x"}`,
			`{"spec":{"images":{"web":"nginx:3"},"runtime_id":"nope"}}`, `{"spec":{"helm":{"chart":"c"}}}`,
			`{"spec":{"hosts":["a.example.com"],"port":0}}`, `{"spec":{"values":{"K":null}}}`, `{"spec":{"regions":null}}`,
		}, bodySeeds...) {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		code := w.serve(http.MethodPatch, w.paths[w.kind(kind)], "application/merge-patch+json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodeStatus writes arbitrary status bodies to an object of every kind: never a panic, never a 5xx.
func FuzzDecodeStatus(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		for _, seed := range append([]string{
			`{"phase":"Ready","observed_generation":1,"nodes_ready":3,"nodes_total":3}`,
			`{"phase":"Failed","observed_generation":2,"message":"x"}`,
			`{"phase":"Reconciling","observed_generation":1,"conditions":[{"type":"Ready","status":"False","last_transition_time":"2024-01-01T00:00:00Z","waiting_on":"kubernetes_runtime \"a\""}]}`,
			`{"instances":2,"observed_generation":1}`, `{"objects":[{"api_version":"v1","kind":"Service","name":"web","ready":true}]}`,
			`{"last_reconciled_at":"not a time"}`, `{"phase":"Bogus"}`, `{"observed_generation":-1}`,
			`{"runtimes":[{"runtime_id":"x","runtime":"a","port":70000,"phase":"Ready"}]}`,
			`{"placements":[{"runtime_id":"nope","runtime":"a"}]}`, `{"records":[{"name":"a","type":"A","targets":["1.2.3.4"],"gateway":"g"}]}`,
			`{"unused_since":"2024-01-01T00:00:00Z","consumers":1}`, `{"keys":["K"],"instances":1}`,
		}, bodySeeds...) {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		code := w.serve(http.MethodPut, w.paths[w.kind(kind)]+"/status", "application/json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodeEvent records arbitrary events on an object of every kind: never a panic, never a 5xx.
func FuzzDecodeEvent(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		for _, seed := range append([]string{
			`{"type":"Normal","reason":"Applied","message":"applied 3 objects","generation":1,"duration_ms":12,"source":"workload"}`,
			`{"type":"Warning","reason":"Bad Reason","duration_ms":-1}`, `{"type":"Info","reason":"X"}`,
			`{"reason":"` + strings.Repeat("R", 200) + `"}`, `{"reason":"X","created_at":"2024-01-01T00:00:00Z","id":"x"}`,
		}, bodySeeds...) {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		code := w.serve(http.MethodPost, w.paths[w.kind(kind)]+"/events", "application/json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodeImage calls the CI image hook with arbitrary bodies: never a panic, never a 5xx.
func FuzzDecodeImage(f *testing.F) {
	w := newFuzzWorld(f)
	for _, seed := range append([]string{
		`{"container":"web","image":"nginx:1.28"}`, `{"container":"nope","image":"nginx:1.28"}`,
		`{"container":"web","image":"registry.example.com:5000/a/b@sha256:` + strings.Repeat("a", 64) + `"}`,
		`{"container":"web","image":"UPPER CASE"}`, `{"container":"","image":""}`, `{"container":1}`,
	}, bodySeeds...) {
		f.Add([]byte(seed))
	}
	path := "/v1/workload_definitions/" + w.defID + "/image"
	f.Fuzz(func(t *testing.T, body []byte) {
		code := w.serve(http.MethodPost, path, "application/json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodeToken creates tokens from arbitrary bodies: never a panic, never a 5xx.
func FuzzDecodeToken(f *testing.F) {
	e := setup(f)
	for _, seed := range append([]string{
		`{"name":"ci","role":"developer"}`, `{"name":"ci2","role":"viewer","expires_at":"2999-01-01T00:00:00Z"}`,
		`{"name":"old","role":"admin","expires_at":"2000-01-01T00:00:00Z"}`, `{"name":"Bad_Name","role":"root"}`,
		`{"name":"x","role":"controller","expires_at":"tomorrow"}`, `{"name":"x","role":"controller","hash":"h"}`,
	}, bodySeeds...) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		code := e.serve(http.MethodPost, "/v1/tokens", "application/json", body)
		requireNo5xx(t, code, body)
	})
}

// FuzzDecodePlan previews arbitrary plans (POST /v1/plans) against a store holding one object of every
// kind: never a panic, never a 5xx.
func FuzzDecodePlan(f *testing.F) {
	w := newFuzzWorld(f)
	for i, ki := range w.kinds {
		f.Add([]byte(`{"changes":[{"op":"create","kind":"` + ki.Kind + `","name":"fz-plan","spec":` + specOf(f, w.bodies[i]) + `}]}`))
		f.Add([]byte(`{"changes":[{"op":"update","kind":"` + ki.Kind + `","id":"` + strings.TrimPrefix(w.paths[i], "/v1/"+ki.Plural+"/") + `","spec":` + specOf(f, w.bodies[i]) + `}]}`))
		f.Add([]byte(`{"changes":[{"op":"delete","kind":"` + ki.Kind + `","id":"` + strings.TrimPrefix(w.paths[i], "/v1/"+ki.Plural+"/") + `","cascade":true}]}`))
	}
	for _, seed := range append([]string{
		`{"changes":[{"op":"create","kind":"workload_instance","name":"i","spec":{"definition_id":"unknown:def","runtime_id":"unknown:rt"}}]}`,
		`{"changes":[{"op":"rename","kind":"bucket"}]}`, `{"changes":[{"op":"create","kind":"nokind","name":"a"}]}`, `{"changes":[null]}`,
	}, bodySeeds...) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		requireNo5xx(t, w.serve(http.MethodPost, "/v1/plans", "application/json", body), body)
	})
}

// specOf returns the spec of a write body.
func specOf(f *testing.F, body string) string {
	var b struct {
		Spec json.RawMessage `json:"spec"`
	}
	require.NoError(f, json.Unmarshal([]byte(body), &b))
	return string(b.Spec)
}

// querySeeds fit any query decoder: bad escapes, repeated and empty parameters.
var querySeeds = []string{"", "%", "%zz", "a=1&a=2", "&&=&", ";", "x=%00", "=%ff"}

// FuzzGraphQuery reads the dependency graph with arbitrary query strings: never a panic, never a 5xx.
func FuzzGraphQuery(f *testing.F) {
	w := newFuzzWorld(f)
	for _, seed := range append([]string{
		"root=workload_instance/fz-inst", "root=workload_instances/fz-inst", "root=" + strings.TrimPrefix(w.paths[0], "/v1/"),
		"root=kubernetes_runtime/", "root=/x", "root=nokind/x", "root=workload_instance%2Fnope", "root=a/b/c",
	}, querySeeds...) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		requireNo5xx(t, w.serveQuery(http.MethodGet, "/v1/graph", q), q)
	})
}

// FuzzListQuery lists and counts every collection with arbitrary query strings (limit, continue,
// label_selector, references, pending, owned): never a panic, never a 5xx.
func FuzzListQuery(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		for _, seed := range append([]string{
			"limit=1", "limit=0", "limit=-1", "limit=99999999999999999999", "limit=1&continue=Zno", "continue=!!",
			"continue=" + "eyJ4IjoxfQ", "label_selector=env%3Dfz", "label_selector=env%3D%3Dfz,a%3Db", "label_selector=%3Dx",
			"label_selector=a/b/c%3Dd", "references=" + strings.TrimPrefix(w.paths[0], "/v1/"), "references=x&limit=2", "pending=true", "owned=1&pending=0", "pending=yes",
		}, querySeeds...) {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, q string) {
		requireNo5xx(t, w.serveQuery(http.MethodGet, "/v1/"+w.kinds[w.kind(kind)].Plural, q), q)
		requireNo5xx(t, w.serveQuery(http.MethodGet, "/v1/"+w.kinds[w.kind(kind)].Plural+"/count", q), q)
	})
}

// FuzzDeleteQuery deletes a missing object of every kind with arbitrary query strings (cascade,
// orphan): never a panic, never a 5xx. The object is missing so that the world stays whole.
func FuzzDeleteQuery(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		for _, seed := range append([]string{
			"cascade=true", "cascade=1&orphan=false", "orphan=T", "cascade=yes", "orphan=", "cascade=true&cascade=maybe",
		}, querySeeds...) {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, q string) {
		requireNo5xx(t, w.serveQuery(http.MethodDelete, "/v1/"+w.kinds[w.kind(kind)].Plural+"/fz-missing", q), q)
	})
}

// FuzzIfMatch patches an object of every kind under an arbitrary If-Match header: never a panic, never a
// 5xx.
func FuzzIfMatch(f *testing.F) {
	w := newFuzzWorld(f)
	for i := range w.kinds {
		for _, seed := range []string{"", "1", `"1"`, "0", "-1", "9223372036854775808", `""5""`, "*", " 2 ", "W/\"3\"", "1,2"} {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, ifMatch string) {
		req := httptest.NewRequest(http.MethodPatch, w.paths[w.kind(kind)], strings.NewReader(`{"labels":{"fz":"1"}}`))
		req.Header.Set("Content-Type", "application/merge-patch+json")
		req.Header.Set("If-Match", ifMatch)
		requireNo5xx(t, w.serveRequest(req), ifMatch)
	})
}

// TestFuzzTargetsAcceptGoodInput guards the fuzz harness: valid requests through serve and serveQuery
// succeed and bad ones get 400, so a harness that only ever reached an error path would not pass
// unnoticed. (newFuzzWorld itself requires every kind's valid body to create.)
func TestFuzzTargetsAcceptGoodInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code := e.serve(http.MethodPost, "/v1/kubernetes_runtimes", "application/json", []byte(`{"name":"ok","spec":{"provider":"local"}}`))
	require.Equal(t, http.StatusCreated, code)
	_, err := e.admin.KubernetesRuntimes().GetByName(context.Background(), "ok")
	require.NoError(t, err)
	require.False(t, api.IsNotFound(err))
	require.Equal(t, http.StatusBadRequest, e.serveQuery(http.MethodGet, "/v1/kubernetes_runtimes", "limit=0"))
	require.Equal(t, http.StatusOK, e.serveQuery(http.MethodGet, "/v1/kubernetes_runtimes", "limit=1&label_selector=a%3Db"))

	plan := `{"changes":[{"op":"create","kind":"kubernetes_runtime","name":"p","spec":{"provider":"local"}}]}`
	require.Equal(t, http.StatusOK, e.serve(http.MethodPost, "/v1/plans", "application/json", []byte(plan)))
	require.Equal(t, http.StatusBadRequest, e.serve(http.MethodPost, "/v1/plans", "application/json", []byte(`{"changes":[{"op":"x"}]}`)))

	// Found by FuzzGraphQuery and FuzzListQuery: a NUL byte in an id, a name or a reference reached the
	// store, which cannot put one in a query, and the API answered 500.
	rt, _, _ := e.world(t, "nul")
	for _, c := range []struct{ method, path, body, field string }{
		{http.MethodGet, "/v1/graph?root=bucket/%00", "", "root"},
		{http.MethodGet, "/v1/buckets?references=a%00", "", "references"},
		{http.MethodGet, "/v1/buckets/%00", "", "path"},
		{http.MethodGet, "/v1/buckets?continue=AA", "", "continue"}, // base64 of a NUL
		{http.MethodGet, "/v1/buckets/by-name/x%00", "", "path"},
		{http.MethodPost, "/v1/workload_instances", `{"name":"n","spec":{"definition_id":"\u0000","runtime_id":"` + rt.ID + `"}}`, "spec.definition_id"},
		{http.MethodPost, "/v1/kubernetes_runtimes", `{"name":"n","owners":[{"kind":"runtime_profile","id":"\u0000"}],"spec":{"provider":"local"}}`, "owners[0].id"},
	} {
		code, data := e.raw(t, server.RoleAdmin, c.method, c.path, c.body, nil)
		require.Equal(t, http.StatusBadRequest, code, "%s %s: %s", c.method, c.path, data)
		require.Equal(t, c.field, apiErr(t, data).Field, c.path)
	}

	// Found by FuzzBodyDecoders: an empty key was refused with an empty field name.
	for body, field := range map[string]string{`{"":{}}`: `[""]`, `{"name":"x","spec":{"":1}}`: `spec[""]`, `{"":1,"":2}`: `[""]`} {
		code, data := e.raw(t, server.RoleAdmin, http.MethodPost, "/v1/kubernetes_runtimes", body, nil)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Equal(t, field, apiErr(t, data).Field, body)
	}
}
