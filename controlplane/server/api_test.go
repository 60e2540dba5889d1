package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

func TestCRUD(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rts := e.dev.KubernetesRuntimes()

	created, err := rts.Create(ctx, localRuntime("us-east"))
	require.NoError(t, err)
	require.NotEmpty(t, created.ID)
	require.Equal(t, api.KindKubernetesRuntime, created.Kind)
	require.EqualValues(t, 1, created.Generation)
	require.EqualValues(t, 1, created.ResourceVersion)
	require.Equal(t, 3, created.Spec.Nodes, "local runtimes default to 3 nodes")
	require.Equal(t, api.PhasePending, created.Status.Phase)

	t.Run("get by id and by name return the same object", func(t *testing.T) {
		got, err := rts.Get(ctx, created.ID)
		require.NoError(t, err)
		byName, err := rts.GetByName(ctx, "us-east")
		require.NoError(t, err)
		require.Equal(t, got, byName)
		require.Equal(t, created.Spec, got.Spec)
	})
	t.Run("a taken name is a conflict", func(t *testing.T) {
		_, err := rts.Create(ctx, localRuntime("us-east"))
		require.True(t, api.IsConflict(err), "%v", err)
	})
	t.Run("update bumps generation when the spec changes", func(t *testing.T) {
		cur, err := rts.Get(ctx, created.ID)
		require.NoError(t, err)
		cur.Spec.Nodes = 5
		upd, err := rts.Update(ctx, cur)
		require.NoError(t, err)
		require.Equal(t, cur.Generation+1, upd.Generation)
		require.Equal(t, cur.ResourceVersion+1, upd.ResourceVersion)
		require.Equal(t, 5, upd.Spec.Nodes)

		upd.Labels = map[string]string{"env": "prod"}
		again, err := rts.Update(ctx, upd)
		require.NoError(t, err)
		require.Equal(t, upd.Generation, again.Generation, "a label change is not a spec change")
		require.Equal(t, "prod", again.Labels["env"])
	})
	t.Run("the name is immutable", func(t *testing.T) {
		cur, err := rts.Get(ctx, created.ID)
		require.NoError(t, err)
		cur.Name = "renamed"
		_, err = rts.Update(ctx, cur)
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Equal(t, "name", asAPIErr(t, err).Field)
	})
	t.Run("unknown ids and collections are not found", func(t *testing.T) {
		_, err := rts.Get(ctx, "nope")
		require.True(t, api.IsNotFound(err), "%v", err)
		_, err = e.dev.Raw("gizmo").Get(ctx, "x")
		require.True(t, api.IsNotFound(err), "%v", err)
	})
}

func TestListPagingAndSelector(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rts := e.dev.KubernetesRuntimes()
	for i := range 7 {
		rt := localRuntime(fmt.Sprintf("rt-%d", i))
		rt.Labels = map[string]string{"parity": []string{"even", "odd"}[i%2], "team": "a"}
		_, err := rts.Create(ctx, rt)
		require.NoError(t, err)
	}

	t.Run("pages follow continue tokens without gaps or repeats", func(t *testing.T) {
		page, err := rts.List(ctx, client.ListOptions{Limit: 3})
		require.NoError(t, err)
		require.Len(t, page.Items, 3)
		require.NotEmpty(t, page.Continue)
		seen := map[string]bool{}
		for obj, err := range rts.All(ctx, client.ListOptions{Limit: 3}) {
			require.NoError(t, err)
			require.False(t, seen[obj.Name])
			seen[obj.Name] = true
		}
		require.Len(t, seen, 7)
	})
	t.Run("label selector keeps objects carrying every pair", func(t *testing.T) {
		page, err := rts.List(ctx, client.ListOptions{LabelSelector: "parity=odd,team=a"})
		require.NoError(t, err)
		require.Len(t, page.Items, 3)
		for _, o := range page.Items {
			require.Equal(t, "odd", o.Labels["parity"])
		}
		page, err = rts.List(ctx, client.ListOptions{LabelSelector: "parity=odd,team=b"})
		require.NoError(t, err)
		require.Empty(t, page.Items)
	})
	t.Run("count counts what the pages list, without the pages", func(t *testing.T) {
		for sel, want := range map[string]int{"": 7, "parity=even": 4, "parity=odd,team=a": 3, "parity=odd,team=b": 0} {
			n, err := rts.Count(ctx, client.ListOptions{LabelSelector: sel, Limit: 2})
			require.NoError(t, err)
			require.Equal(t, want, n, sel)
			listed := 0
			for _, err := range rts.All(ctx, client.ListOptions{LabelSelector: sel, Limit: 2}) {
				require.NoError(t, err)
				listed++
			}
			require.Equal(t, listed, n, sel)
		}
		code, body := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/count?pending=maybe", "", nil)
		require.Equal(t, http.StatusBadRequest, code)
		require.Equal(t, "pending", apiErr(t, body).Field)
	})
	t.Run("bad paging parameters are 400s naming the parameter", func(t *testing.T) {
		for q, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "limit=5000": "limit", "continue=!!!": "continue", "label_selector=novalue": "label_selector", "pending=maybe": "pending", "owned=2": "owned"} {
			code, body := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes?"+q, "", nil)
			require.Equal(t, http.StatusBadRequest, code, q)
			require.Equal(t, field, apiErr(t, body).Field, q)
		}
	})
}

func TestIfMatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rts := e.dev.KubernetesRuntimes()
	rt, err := rts.Create(ctx, localRuntime("rt"))
	require.NoError(t, err)

	t.Run("a stale resource version is a conflict and writes nothing", func(t *testing.T) {
		first := *rt
		first.Spec.Nodes = 4
		_, err := rts.Update(ctx, &first)
		require.NoError(t, err)
		second := *rt // still carries the old resource version
		second.Spec.Nodes = 9
		_, err = rts.Update(ctx, &second)
		require.True(t, api.IsConflict(err), "%v", err)
		got, err := rts.Get(ctx, rt.ID)
		require.NoError(t, err)
		require.Equal(t, 4, got.Spec.Nodes)
	})
	t.Run("a non-integer If-Match is a 400", func(t *testing.T) {
		code, body := e.raw(t, server.RoleDeveloper, http.MethodPut, "/v1/kubernetes_runtimes/"+rt.ID,
			`{"name":"rt","spec":{"provider":"local"}}`, http.Header{"If-Match": {"W/\"abc\""}})
		require.Equal(t, http.StatusBadRequest, code)
		require.Equal(t, "If-Match", apiErr(t, body).Field)
	})
	t.Run("a stale status write is a conflict", func(t *testing.T) {
		_, err := e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, rt.ResourceVersion, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReady}})
		require.True(t, api.IsConflict(err), "%v", err)
	})
}

func TestMergePatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	defs := e.dev.WorkloadDefinitions()
	def := webDefinition("web")
	def.Labels = map[string]string{"a": "1", "b": "2"}
	def.Spec.Autoscaling = &api.Autoscaling{MinReplicas: 1, MaxReplicas: 3}
	def, err := defs.Create(ctx, def)
	require.NoError(t, err)

	t.Run("merges labels and spec, removing nulls", func(t *testing.T) {
		got, err := defs.Patch(ctx, def.ID, map[string]any{
			"labels": map[string]any{"b": nil, "c": "3"},
			"spec":   map[string]any{"replicas": 4, "autoscaling": nil},
		})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"a": "1", "c": "3"}, got.Labels)
		require.EqualValues(t, 4, *got.Spec.Replicas)
		require.Nil(t, got.Spec.Autoscaling)
		require.Equal(t, def.Spec.Containers, got.Spec.Containers, "arrays not in the patch are kept")
		require.Equal(t, def.Generation+1, got.Generation)
	})
	t.Run("a patch that breaks validation names the field and writes nothing", func(t *testing.T) {
		before, err := defs.Get(ctx, def.ID)
		require.NoError(t, err)
		_, err = defs.Patch(ctx, def.ID, map[string]any{"spec": map[string]any{"replicas": -1}})
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Equal(t, "spec.replicas", asAPIErr(t, err).Field)
		after, err := defs.Get(ctx, def.ID)
		require.NoError(t, err)
		require.Equal(t, before.ResourceVersion, after.ResourceVersion)
	})
	t.Run("only labels and spec may be patched", func(t *testing.T) {
		_, err := defs.Patch(ctx, def.ID, map[string]any{"name": "other"})
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Equal(t, "name", asAPIErr(t, err).Field)
	})
	t.Run("the content type must be merge-patch", func(t *testing.T) {
		code, body := e.raw(t, server.RoleDeveloper, http.MethodPatch, "/v1/workload_definitions/"+def.ID, `{"labels":{}}`, nil)
		require.Equal(t, http.StatusBadRequest, code)
		require.Equal(t, "Content-Type", apiErr(t, body).Field)
	})
	t.Run("patch keeps write-only fields the caller cannot see", func(t *testing.T) {
		rt, err := e.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "byo"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: testKubeconfig}})
		require.NoError(t, err)
		_, err = e.dev.KubernetesRuntimes().Patch(ctx, rt.ID, map[string]any{"spec": map[string]any{"region": "eu-west"}})
		require.NoError(t, err)
		got, err := e.ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
		require.NoError(t, err)
		require.Equal(t, testKubeconfig, got.Spec.Kubeconfig)
		require.Equal(t, "eu-west", got.Spec.Region)
	})
}

func TestAuthRoles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rt, def, inst := e.world(t, "w")
	_ = rt
	_ = inst

	type call struct {
		name   string
		method string
		path   string
		body   string
	}
	calls := []call{
		{"list", http.MethodGet, "/v1/workload_definitions", ""},
		{"get", http.MethodGet, "/v1/workload_definitions/" + def.ID, ""},
		{"events", http.MethodGet, "/v1/workload_definitions/" + def.ID + "/events", ""},
		{"create", http.MethodPost, "/v1/kubernetes_runtimes", `{"name":"x","spec":{"provider":"nope"}}`},
		{"update", http.MethodPut, "/v1/workload_definitions/" + def.ID, `{"name":"w-def","spec":{}}`},
		{"delete", http.MethodDelete, "/v1/workload_definitions/does-not-exist", ""},
		{"status", http.MethodPut, "/v1/workload_definitions/" + def.ID + "/status", `{"phase":"Bogus"}`},
		{"finalize", http.MethodPost, "/v1/workload_definitions/does-not-exist/finalize", ""},
		{"record event", http.MethodPost, "/v1/workload_definitions/" + def.ID + "/events", `{"type":"Bogus"}`},
		{"reconcile", http.MethodPost, "/v1/workload_definitions/does-not-exist/reconcile", ""},
	}
	// allowed: the call passes auth (and then fails validation or lookup, so nothing is written).
	allowed := map[string][]string{
		server.RoleAdmin:      {"list", "get", "events", "create", "update", "delete", "status", "finalize", "record event", "reconcile"},
		server.RoleDeveloper:  {"list", "get", "events", "create", "update", "delete", "reconcile"},
		server.RoleViewer:     {"list", "get", "events"},
		server.RoleController: {"list", "get", "events", "create", "update", "delete", "status", "finalize", "record event", "reconcile"},
	}
	for role, ok := range allowed {
		for _, c := range calls {
			t.Run(role+" "+c.name, func(t *testing.T) {
				t.Parallel()
				code, _ := e.raw(t, role, c.method, c.path, c.body, nil)
				if contains(ok, c.name) {
					require.NotEqual(t, http.StatusForbidden, code)
					require.NotEqual(t, http.StatusUnauthorized, code)
					require.Less(t, code, 500)
				} else {
					require.Equal(t, http.StatusForbidden, code)
				}
			})
		}
	}
	t.Run("no token is 401", func(t *testing.T) {
		_, err := e.anon.WorkloadDefinitions().List(ctx, client.ListOptions{})
		require.True(t, api.IsUnauthorized(err), "%v", err)
	})
	t.Run("a wrong token is 401", func(t *testing.T) {
		c, err := client.New(e.hs.URL, client.WithToken("qlt_wrong"))
		require.NoError(t, err)
		_, err = c.WorkloadDefinitions().List(ctx, client.ListOptions{})
		require.True(t, api.IsUnauthorized(err), "%v", err)
	})
	t.Run("probes, metrics and the OpenAPI document need no token", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/openapi.json"} {
			resp, err := http.Get(e.hs.URL + p)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, p)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestWriteOnlyFields(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "byo"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: testKubeconfig}})
	require.NoError(t, err)
	require.Empty(t, rt.Spec.Kubeconfig, "the developer who wrote it does not get it back")

	for _, tc := range []struct {
		role string
		c    *client.Client
		sees bool
	}{{"admin", e.admin, false}, {"controller", e.ctrl, true}, {"developer", e.dev, false}, {"viewer", e.viewer, false}} {
		t.Run(tc.role, func(t *testing.T) {
			got, err := tc.c.KubernetesRuntimes().Get(ctx, rt.ID)
			require.NoError(t, err)
			page, err := tc.c.KubernetesRuntimes().List(ctx, client.ListOptions{})
			require.NoError(t, err)
			require.Len(t, page.Items, 1)
			if tc.sees {
				require.Equal(t, testKubeconfig, got.Spec.Kubeconfig)
				require.Equal(t, testKubeconfig, page.Items[0].Spec.Kubeconfig)
			} else {
				require.Empty(t, got.Spec.Kubeconfig)
				require.Empty(t, page.Items[0].Spec.Kubeconfig)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := e.dev.KubernetesRuntimes().Create(context.Background(), localRuntime("m"))
	require.NoError(t, err)
	code, body := e.raw(t, "", http.MethodGet, "/metrics", "", nil)
	require.Equal(t, http.StatusOK, code)
	text := string(body)
	require.Contains(t, text, `qleet_api_request_duration_seconds_count{code="201",method="POST",route="/v1/{plural}"}`)
	require.Contains(t, text, "qleet_outbox_pending 1")
	require.Contains(t, text, "qleet_outbox_oldest_age_seconds")
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req, err := http.NewRequest(http.MethodGet, e.hs.URL+"/healthz", nil)
	require.NoError(t, err)
	req.Header.Set("X-Request-Id", "abc-123")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "abc-123", resp.Header.Get("X-Request-Id"))

	resp, err = http.Get(e.hs.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, resp.Header.Get("X-Request-Id"), 36, "a fresh uuid")
}

// panicStore is a real store whose Get panics, to exercise panic recovery.
type panicStore struct{ store.Store }

func (panicStore) Get(context.Context, string, string) (*store.Object, error) { panic("boom") }

func TestPanicRecovery(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	e := setup(t, setupOpts{st: panicStore{openSQLite(t)}, cfg: func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	}})
	code, body := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/x", "", nil)
	require.Equal(t, http.StatusInternalServerError, code)
	require.Equal(t, api.CodeInternal, apiErr(t, body).Code)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logs.String(), `"msg":"panic serving request"`)
	require.Contains(t, logs.String(), "runtime/debug.Stack")
	require.Contains(t, logs.String(), `"msg":"http request"`, "the access log still records the request")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestOnCommit(t *testing.T) {
	t.Parallel()
	var commits atomic.Int64
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.OnCommit = func() { commits.Add(1) } }})
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("oc"))
	require.NoError(t, err)
	require.EqualValues(t, 1, commits.Load())
	_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{})
	require.NoError(t, err)
	require.EqualValues(t, 2, commits.Load())
	_, err = e.dev.KubernetesRuntimes().Create(ctx, localRuntime("Bad"))
	require.Error(t, err)
	require.EqualValues(t, 2, commits.Load(), "failed writes do not wake the relay")
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{cfg: func(c *server.Config) {
		c.Ready = func(context.Context) error { return fmt.Errorf("broker not connected") }
	}})
	code, body := e.raw(t, "", http.MethodGet, "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, apiErr(t, body).Message, "broker not connected")
}

func TestEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("ev"))
	require.NoError(t, err)
	for i := range 3 {
		err := e.ctrl.KubernetesRuntimes().RecordEvent(ctx, rt.ID, api.Event{Type: api.EventNormal, Reason: "Reconciled", Message: fmt.Sprintf("pass %d", i), DurationMS: 12, Source: "controller/kubernetes_runtime"})
		require.NoError(t, err)
	}
	evs, err := e.viewer.KubernetesRuntimes().Events(ctx, rt.ID)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, "pass 0", evs[0].Message, "oldest first")
	require.Equal(t, rt.ID, evs[2].ObjectID)
	require.EqualValues(t, 1, evs[2].Generation, "defaults to the object's generation")

	t.Run("a bad event names the field", func(t *testing.T) {
		err := e.ctrl.KubernetesRuntimes().RecordEvent(ctx, rt.ID, api.Event{Type: "Loud", Reason: "X"})
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Equal(t, "type", asAPIErr(t, err).Field)
		err = e.ctrl.KubernetesRuntimes().RecordEvent(ctx, rt.ID, api.Event{Type: "Normal"})
		require.Equal(t, "reason", asAPIErr(t, err).Field)
	})
	t.Run("a repeated event is one record with its count and its first and last time", func(t *testing.T) {
		waits, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("ev-repeat"))
		require.NoError(t, err)
		for range 4 {
			err := e.ctrl.KubernetesRuntimes().RecordEvent(ctx, waits.ID, api.Event{Type: api.EventNormal, Reason: "Waiting",
				Message: `waiting for cloud_account "aws" (Pending)`, Source: "controller/kubernetes_runtime"})
			require.NoError(t, err)
		}
		evs, err := e.viewer.KubernetesRuntimes().Events(ctx, waits.ID)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.EqualValues(t, 4, evs[0].Count)
		require.NotNil(t, evs[0].FirstTimestamp)
		require.NotNil(t, evs[0].LastTimestamp)
		require.True(t, evs[0].FirstTimestamp.Equal(evs[0].CreatedAt))
		require.False(t, evs[0].LastTimestamp.Before(*evs[0].FirstTimestamp))
	})
	t.Run("events of an unknown object are not found", func(t *testing.T) {
		_, err := e.viewer.KubernetesRuntimes().Events(ctx, "nope")
		require.True(t, api.IsNotFound(err), "%v", err)
		err = e.ctrl.KubernetesRuntimes().RecordEvent(ctx, "nope", api.Event{Reason: "X"})
		require.True(t, api.IsNotFound(err), "%v", err)
	})
}

func TestImageHook(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, def, inst := e.world(t, "ci")
	hook := func(body string, h http.Header) (int, []byte) {
		return e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_definitions/"+def.ID+"/image", body, h)
	}

	code, body := hook(`{"container":"web","image":"nginx:1.27.3"}`, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var out struct {
		Definition       api.WorkloadDefinition `json:"definition"`
		UpdatedInstances []api.ObjectRef        `json:"updated_instances"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	require.Equal(t, "nginx:1.27.3", out.Definition.Spec.Containers[0].Image)
	require.Equal(t, def.Generation+1, out.Definition.Generation)
	require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: inst.Name}}, out.UpdatedInstances)

	for _, tc := range []struct {
		name, body, field string
		header            http.Header
		code              int
	}{
		{"unknown container", `{"container":"db","image":"nginx:1"}`, "container", nil, http.StatusBadRequest},
		{"bad image", `{"container":"web","image":"UPPER/Case"}`, "image", nil, http.StatusBadRequest},
		{"unknown field", `{"container":"web","image":"nginx:1","tag":"x"}`, "tag", nil, http.StatusBadRequest},
		{"stale If-Match", `{"container":"web","image":"nginx:2"}`, "", http.Header{"If-Match": {"1"}}, http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := hook(tc.body, tc.header)
			require.Equal(t, tc.code, code, string(body))
			require.Equal(t, tc.field, apiErr(t, body).Field)
			got, err := e.dev.WorkloadDefinitions().Get(ctx, def.ID)
			require.NoError(t, err)
			require.Equal(t, "nginx:1.27.3", got.Spec.Containers[0].Image, "nothing written")
		})
	}
	t.Run("only workload definitions have the hook", func(t *testing.T) {
		code, _ := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_instances/"+inst.ID+"/image", `{"container":"web","image":"nginx:1"}`, nil)
		require.Equal(t, http.StatusNotFound, code)
	})
}

func TestOversizedBody(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.MaxBodyBytes = 1024 }})
	big := `{"name":"big","spec":{"provider":"local","region":"` + strings.Repeat("a", 2000) + `"}}`
	code, body := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/kubernetes_runtimes", big, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, api.CodeTooLarge, apiErr(t, body).Code)
	_, err := e.dev.KubernetesRuntimes().GetByName(context.Background(), "big")
	require.True(t, api.IsNotFound(err))
}

// asAPIErr returns the *api.Error in err's chain.
func asAPIErr(t *testing.T, err error) *api.Error {
	t.Helper()
	var e *api.Error
	require.ErrorAs(t, err, &e)
	return e
}
