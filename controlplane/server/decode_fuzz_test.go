package server

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// These fuzz targets call the request decoders themselves, with no router and no store, so that a
// campaign reaches millions of executions on a shared machine (docs/fuzzing.md). fuzz_test.go sends the
// same kinds of input through the whole handler. Beyond "never panics", each checks the API's contract
// for bad input: the error is a *api.Error with code invalid that names a field.

// requireInvalid fails unless err is nil or a validation error naming a field.
func requireInvalid(t *testing.T, err error, input any) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *api.Error
	require.True(t, errors.As(err, &ce), "input %q: error %v is not a *api.Error", input, err)
	require.Equal(t, api.CodeInvalid, ce.Code, "input %q: %v", input, err)
	require.NotEmpty(t, ce.Field, "input %q: %v names no field", input, err)
}

// requireClientError fails unless err is nil or a *api.Error, and a validation error names a field.
func requireClientError(t *testing.T, err error, input any) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *api.Error
	require.True(t, errors.As(err, &ce), "input %q: error %v is not a *api.Error", input, err)
	if ce.Code == api.CodeInvalid {
		require.NotEmpty(t, ce.Field, "input %q: %v names no field", input, err)
	}
}

// fuzzSpecs are a valid spec of every kind, by kind.
var fuzzSpecs = map[string]string{
	api.KindBucket:             `{"instance_id":"i1","size":"1Gi","retain":true}`,
	api.KindCloudAccount:       `{"provider":"aws","region":"us-east-1","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"k"}`,
	api.KindDatabase:           `{"instance_id":"i1","engine":"postgres","version":"16","size":"1Gi"}`,
	api.KindDomainName:         `{"zone":"example.com"}`,
	api.KindGateway:            `{"instance_id":"i1","hosts":["web.example.com"],"paths":["/"],"port":80,"tls":true,"redirect_http":false}`,
	api.KindKubernetesRuntime:  `{"provider":"local","region":"us-east","nodes":3,"zones":["a","b"],"min_nodes":1,"max_nodes":5}`,
	api.KindRuntimeProfile:     `{"provider":"local","regions":["eu-west"],"min_nodes":1,"max_nodes":3,"runtime_labels":{"a":"b"},"priority":1,"reclaim_after":"10m"}`,
	api.KindSecret:             `{"instance_ids":["i1"],"values":{"KEY":"v"},"mount_path":"/etc/s"}`,
	api.KindSupportService:     `{"runtime_id":"r1","type":"ingress","version":"4.11.3","values":"a: b"}`,
	api.KindWorkloadDefinition: `{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"container_port":80}],"env":[{"name":"A","value":"b"}],"resources":{"requests":{"cpu":"100m"}},"liveness_probe":{"tcp":true,"port":80}}],"replicas":2,"autoscaling":{"min_replicas":1,"max_replicas":3}}`,
	api.KindWorkloadInstance:   `{"definition_id":"d1","runtime_id":"r1","namespace":"web","images":{"web":"nginx:1.28"},"replicas":3}`,
}

// fuzzKindsFor returns every registered kind, and fails when one has no spec in fuzzSpecs.
func fuzzKindsFor(f *testing.F) []*api.KindInfo {
	kinds := api.Kinds()
	for _, ki := range kinds {
		_, ok := fuzzSpecs[ki.Kind]
		require.True(f, ok, "kind %s has no fuzz spec; add one to fuzzSpecs", ki.Kind)
	}
	return kinds
}

// decoderSeeds fit any body decoder. The last ones reach the input rules of issue 25: engine versions, the
// replica bound, local chart paths and uses.
var decoderSeeds = []string{
	`{"name":"v","spec":{"engine":"postgres","version":"9"}}`, `{"name":"v","spec":{"engine":"mysql","version":"16"}}`,
	`{"name":"r","spec":{"containers":[{"name":"web","image":"nginx"}],"replicas":2147483647}}`,
	`{"name":"r","spec":{"definition_id":"d","runtime_id":"r","replicas":1001}}`,
	`{"name":"h","spec":{"helm":{"chart":"../../etc"}}}`, `{"name":"h","spec":{"helm":{"chart":"/etc/passwd"}}}`,
	`{"name":"u","spec":{"definition_id":"d","runtime_id":"r","uses":[{"instance_id":"u","env_prefix":"U"}]}}`,
	``, `[]`, `null`, `"s"`, `{}`, `1e400`, `{"a":1} x`, `{"a":1,"a":2}`, `{"spec":null}`, "{\"name\":\"\xff\"}",
	`{"spec":{"x":` + strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64) + `}}`, `{"name":"a"`, `{"labels":{"a":1}}`,
}

// checkWrite runs what a create or update does with a body short of the store: decode, default, validate
// the name, labels and spec, and list the references.
func checkWrite(t *testing.T, ki *api.KindInfo, data []byte) {
	_, err := decodeWrite(ki, data, new(updateBody))
	requireInvalid(t, err, data)
	var body writeBody
	spec, err := decodeWrite(ki, data, &body)
	requireInvalid(t, err, data)
	if err != nil {
		return
	}
	ki.Default(spec)
	for _, fe := range append(api.ValidateMeta(body.Name, body.Labels), ki.Validate(spec)...) {
		require.NotEmpty(t, fe.Field, "input %q: %+v names no field", data, fe)
	}
	_ = ki.Refs(spec)
	_ = ki.UsedBy(spec)
	_ = api.RequestedReplicas(spec)
}

// FuzzWriteDecoder decodes arbitrary create and update bodies of every kind (decodeWrite), then defaults
// and validates them: never a panic, and every error names a field.
func FuzzWriteDecoder(f *testing.F) {
	kinds := fuzzKindsFor(f)
	for i, ki := range kinds {
		spec := fuzzSpecs[ki.Kind]
		f.Add(uint8(i), []byte(`{"name":"a","labels":{"env":"x"},"spec":`+spec+`}`))
		f.Add(uint8(i), []byte(`{"name":"b","owners":[{"kind":"runtime_profile","id":"p"}],"spec":`+spec+`}`))
		f.Add(uint8(i), []byte(`{"name":"c","spec":`+strings.Replace(spec, "{", `{"unknown":1,`, 1)+`}`))
		// What GET returns, sent back by PUT (updateBody): the read-only envelope around the spec.
		f.Add(uint8(i), []byte(`{"id":"x","kind":"k","name":"d","generation":3,"resource_version":7,"created_at":"2024-01-01T00:00:00Z","updated_at":"2024-01-01T00:00:00Z","status":{"phase":"Ready","observed_generation":3},"spec":`+spec+`}`))
		f.Add(uint8(i), []byte(`{"name":"e","generation":"3","created_at":"yesterday","deletion_orphan":1,"spec":`+spec+`}`))

		for _, s := range decoderSeeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		checkWrite(t, kinds[int(kind)%len(kinds)], data)
	})
}

// FuzzPatchDecoder applies arbitrary merge patches to a valid object of every kind, the way the PATCH
// handler does (parse, check the patch's shape, merge, decode the result): never a panic, and every
// error names a field.
func FuzzPatchDecoder(f *testing.F) {
	kinds := fuzzKindsFor(f)
	for i := range kinds {
		for _, s := range append([]string{
			`{"labels":{"a":"b","c":null}}`, `{"spec":{"nodes":4}}`, `{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}`,
			`{"spec":{"replicas":null,"autoscaling":{"min_replicas":2,"max_replicas":1}}}`, `{"name":"x"}`,
			`{"spec":{"hosts":null,"port":70000}}`, `{"spec":{"values":{"KEY":null}}}`, `{"spec":{"regions":[]}}`,
		}, decoderSeeds...) {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		ki := kinds[int(kind)%len(kinds)]
		patch, err := parseJSON(data)
		requireInvalid(t, err, data)
		if err != nil {
			return
		}
		pm, ok := patch.(map[string]any)
		if !ok {
			return
		}
		if fe := checkShape(pm, reflect.TypeOf(patchBody{}), ""); fe != nil {
			require.NotEmpty(t, fe.Field, "input %q", data)
			return
		}
		target, err := parseJSON([]byte(`{"labels":{"env":"x"},"spec":` + fuzzSpecs[ki.Kind] + `}`))
		require.NoError(t, err)
		merged, err := json.Marshal(mergePatch(target, pm))
		require.NoError(t, err, "input %q", data)
		checkWrite(t, ki, merged)
	})
}

// FuzzStatusDecoder decodes arbitrary status bodies of every kind and checks them against generation 3:
// never a panic, and every error names a field.
func FuzzStatusDecoder(f *testing.F) {
	kinds := fuzzKindsFor(f)
	for i := range kinds {
		for _, s := range append([]string{
			`{"phase":"Ready","observed_generation":1,"nodes_ready":3,"nodes_total":3}`,
			`{"phase":"Reconciling","observed_generation":2,"conditions":[{"type":"Ready","status":"False","last_transition_time":"2024-01-01T00:00:00Z","waiting_on":"x"}]}`,
			`{"phase":"Bogus","observed_generation":9}`, `{"conditions":[{"status":"Maybe"}]}`, `{"last_reconciled_at":"not a time"}`,
			`{"runtimes":[{"runtime_id":"x","runtime":"a","port":70000,"phase":"Ready"}]}`, `{"placements":[{"runtime_id":"r"}]}`,
			`{"records":[{"name":"a","type":"A","targets":["1.2.3.4"],"gateway":"g"}]}`, `{"unused_since":"2024-01-01T00:00:00Z"}`,
		}, decoderSeeds...) {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		status := kinds[int(kind)%len(kinds)].NewStatus()
		err := decodeStrict(data, status, "status")
		if err == nil {
			err = checkStatus(status, 3)
		}
		requireInvalid(t, err, data)
	})
}

// FuzzBodyDecoders decodes arbitrary event, image-hook and token bodies (which picks the decoder): never
// a panic, and every error names a field.
func FuzzBodyDecoders(f *testing.F) {
	for which, seeds := range [][]string{
		{`{"type":"Normal","reason":"Applied","message":"m","generation":1,"duration_ms":12,"source":"workload"}`, `{"type":"Warning","reason":"X","created_at":"2024-01-01T00:00:00Z"}`},
		{`{"container":"web","image":"nginx:1.28"}`, `{"container":"web","image":"a.example.com:5000/b@sha256:` + strings.Repeat("a", 64) + `"}`},
		{`{"name":"ci","role":"developer","expires_at":"2999-01-01T00:00:00Z"}`, `{"name":"x","role":"controller","expires_at":"tomorrow"}`},
	} {
		for _, s := range append(seeds, decoderSeeds...) {
			f.Add(uint8(which), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		var err error
		switch which % 3 {
		case 0:
			err = decodeStrict(data, &api.Event{}, "")
		case 1:
			var req imageRequest
			if err = decodeStrict(data, &req, ""); err == nil {
				_ = api.ValidateImage(req.Image)
			}
		case 2:
			err = decodeStrict(data, &api.TokenRequest{}, "")
		}
		requireInvalid(t, err, data)
	})
}

// FuzzQueryDecoders parses arbitrary label selectors (list) and If-Match headers (update, patch, status,
// image): never a panic, and every error names the parameter.
func FuzzQueryDecoders(f *testing.F) {
	for _, s := range []string{"env=prod", "a=b,c==d", "=x", "a/b/c=d", ",", "k=" + strings.Repeat("v", 70), " a = b ", "x\x00=y"} {
		f.Add(uint8(0), s)
	}
	for _, s := range []string{"1", `"2"`, "0", "-1", "9223372036854775808", `""5""`, "*", " 3 ", `W/"3"`} {
		f.Add(uint8(1), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, s string) {
		if which%2 == 0 {
			labels, err := parseSelector(s)
			requireInvalid(t, err, s)
			if err == nil {
				require.Empty(t, api.ValidateMeta("x", labels), "input %q: the selector's labels must be valid", s)
			}
			return
		}
		r := httptest.NewRequest("PUT", "/", nil)
		r.Header["If-Match"] = []string{s}
		rv, err := ifMatch(r)
		requireInvalid(t, err, s)
		require.GreaterOrEqual(t, rv, int64(0), "input %q", s)
	})
}

// FuzzPlanDecoder decodes arbitrary plan requests (POST /v1/plans) and each of their changes, against an
// empty store: never a panic, and every error is an API error, naming the field when the input is invalid.
func FuzzPlanDecoder(f *testing.F) {
	for _, s := range append([]string{
		`{"changes":[{"op":"create","kind":"kubernetes_runtime","name":"a","spec":` + fuzzSpecs[api.KindKubernetesRuntime] + `}]}`,
		`{"changes":[{"op":"create","kind":"workload_definition","id":"def","name":"d","spec":` + fuzzSpecs[api.KindWorkloadDefinition] + `},` +
			`{"op":"create","kind":"workload_instance","name":"i","spec":{"definition_id":"def","placement":{"regions":["eu"]}}}]}`,
		`{"changes":[{"op":"update","kind":"gateway","id":"nope","spec":{}}]}`, `{"changes":[{"op":"delete","kind":"secret","id":"x","cascade":true}]}`,
		`{"changes":[{"op":"rename","kind":"bucket"}]}`, `{"changes":[{"op":"create","kind":"nokind","name":"a"}]}`,
		`{"changes":[{"op":"create","kind":"workload_instance","name":"i","spec":{"definition_id":"unknown:def","runtime_id":"unknown:rt"}}]}`,
		`{"changes":null}`, `{"changes":[null]}`,
	}, decoderSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req api.PlanRequest
		err := decodeStrict(data, &req, "")
		requireInvalid(t, err, data)
		if err != nil || len(req.Changes)+len(req.Assume) > maxPlanChanges {
			return
		}
		view := &planView{objs: map[string]*store.Object{}, deleted: map[string]bool{}, planned: map[string]bool{}, changed: map[string]bool{}}
		p := &planner{view: view, placed: map[string][]api.PlacementStatus{}, uses: map[string][]string{}}
		_, err = p.decode(req.Changes, req.Assume)
		requireClientError(t, err, data)
	})
}
