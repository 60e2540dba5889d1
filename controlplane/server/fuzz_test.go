package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// serve sends one request straight to the handler (no network) and returns the status.
func (e *env) serve(method, path, contentType string, body []byte) int {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.tokens[server.RoleAdmin])
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	return rec.Code
}

var fuzzKinds = []string{"kubernetes_runtimes", "workload_definitions", "workload_instances"}

// FuzzDecodeCreate posts arbitrary bodies to every collection: never a panic, never a 5xx.
func FuzzDecodeCreate(f *testing.F) {
	e := setup(f)
	_, def, _ := e.world(f, "fz")
	for _, seed := range []string{
		`{"name":"a","spec":{"provider":"local","nodes":3,"zones":["a"]}}`,
		`{"name":"b","labels":{"x/y":"z"},"spec":{"provider":"kubeconfig","kubeconfig":"apiVersion: v1\nkind: Config\n"}}`,
		`{"name":"c","spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"container_port":80}],"resources":{"requests":{"cpu":"1"}},"liveness_probe":{"tcp":true,"port":80}}]}}`,
		`{"name":"d","spec":{"manifests":"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n- x"}}`,
		`{"name":"e","spec":{"helm":{"chart":"x","values":"a: b"},"autoscaling":{"min_replicas":1,"max_replicas":2}}}`,
		`{"name":"f","spec":{"definition_id":"` + def.ID + `","runtime_id":"x","images":{"web":"a"}}}`,
		`{"name":"g","spec":{"nodes":1e400}}`, `[]`, `null`, `{"spec":null}`, `{"name":"h","spec":{"replicas":-1}} x`,
	} {
		for i := range fuzzKinds {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		code := e.serve(http.MethodPost, "/v1/"+fuzzKinds[int(kind)%len(fuzzKinds)], "application/json", body)
		require.Less(t, code, 500, "body %q", body)
	})
}

// FuzzDecodePatch applies arbitrary merge patches: never a panic, never a 5xx.
func FuzzDecodePatch(f *testing.F) {
	e := setup(f)
	rt, def, inst := e.world(f, "fz")
	paths := []string{"/v1/kubernetes_runtimes/" + rt.ID, "/v1/workload_definitions/" + def.ID, "/v1/workload_instances/" + inst.ID}
	for _, seed := range []string{
		`{"labels":{"a":"b","c":null}}`, `{"spec":{"nodes":4}}`, `{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}`,
		`{"spec":{"replicas":null,"autoscaling":{"min_replicas":2,"max_replicas":1}}}`, `{"spec":null}`, `{"name":"x"}`,
		`{"spec":{"images":{"web":"nginx:3"},"runtime_id":"nope"}}`, `"str"`, `{"spec":{"helm":{"chart":"c"}}}`,
	} {
		for i := range paths {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		code := e.serve(http.MethodPatch, paths[int(which)%len(paths)], "application/merge-patch+json", body)
		require.Less(t, code, 500, "body %q", body)
	})
}

// FuzzDecodeStatus writes arbitrary status bodies: never a panic, never a 5xx.
func FuzzDecodeStatus(f *testing.F) {
	e := setup(f)
	rt, def, inst := e.world(f, "fz")
	paths := []string{"/v1/kubernetes_runtimes/" + rt.ID, "/v1/workload_definitions/" + def.ID, "/v1/workload_instances/" + inst.ID}
	for _, seed := range []string{
		`{"phase":"Ready","observed_generation":1,"nodes_ready":3,"nodes_total":3}`,
		`{"phase":"Failed","observed_generation":2,"message":"x"}`,
		`{"phase":"Reconciling","observed_generation":1,"conditions":[{"type":"Ready","status":"False","last_transition_time":"2024-01-01T00:00:00Z","waiting_on":"kubernetes_runtime \"a\""}]}`,
		`{"instances":2,"observed_generation":1}`, `{"objects":[{"api_version":"v1","kind":"Service","name":"web","ready":true}]}`,
		`{"last_reconciled_at":"not a time"}`, `{}`, `null`,
	} {
		for i := range paths {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		code := e.serve(http.MethodPut, paths[int(which)%len(paths)]+"/status", "application/json", body)
		require.Less(t, code, 500, "body %q", body)
	})
}

// TestFuzzTargetsAcceptGoodInput guards the fuzz seeds: a valid request through serve succeeds.
func TestFuzzTargetsAcceptGoodInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code := e.serve(http.MethodPost, "/v1/kubernetes_runtimes", "application/json", []byte(`{"name":"ok","spec":{"provider":"local"}}`))
	require.Equal(t, http.StatusCreated, code)
	_, err := e.admin.KubernetesRuntimes().GetByName(context.Background(), "ok")
	require.NoError(t, err)
	require.False(t, client.IsNotFound(err))
}
