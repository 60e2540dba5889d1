package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is one API server on a real store, with a client per role.
type env struct {
	store  store.Store
	srv    *server.Server
	hs     *httptest.Server
	tokens map[string]string
	admin  *client.Client
	dev    *client.Client
	viewer *client.Client
	ctrl   *client.Client
	anon   *client.Client
}

type setupOpts struct {
	cfg func(*server.Config)
	st  store.Store // share a store between two servers (API replicas)
}

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: filepath.Join(t.TempDir(), "qleet.db"), Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openPostgres(t testing.TB) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: pgtest.URL(t), Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func setup(t testing.TB, o ...setupOpts) *env {
	t.Helper()
	var opts setupOpts
	if len(o) > 0 {
		opts = o[0]
	}
	st := opts.st
	if st == nil {
		st = openSQLite(t)
	}
	cfg := server.Config{Store: st, Logger: quietLogger(), Registry: prometheus.NewRegistry()}
	if opts.cfg != nil {
		opts.cfg(&cfg)
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &env{store: st, srv: srv, hs: hs, tokens: map[string]string{}}
	for _, role := range []string{server.RoleAdmin, server.RoleDeveloper, server.RoleViewer, server.RoleController} {
		tok, err := server.NewToken()
		require.NoError(t, err)
		err = st.CreateToken(context.Background(), &store.Token{Hash: server.HashToken(tok), Name: role + "-" + tok[4:10], Role: role})
		require.NoError(t, err)
		e.tokens[role] = tok
	}
	mk := func(tok string) *client.Client {
		opts := []client.Option{}
		if tok != "" {
			opts = append(opts, client.WithToken(tok))
		}
		c, err := client.New(hs.URL, opts...)
		require.NoError(t, err)
		return c
	}
	e.admin, e.dev, e.viewer, e.ctrl, e.anon = mk(e.tokens[server.RoleAdmin]), mk(e.tokens[server.RoleDeveloper]),
		mk(e.tokens[server.RoleViewer]), mk(e.tokens[server.RoleController]), mk("")
	return e
}

const testKubeconfig = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
contexts:
- name: dev
  context:
    cluster: dev
    user: dev
users:
- name: dev
  user:
    token: abc
`

func localRuntime(name string) *api.KubernetesRuntime {
	return &api.KubernetesRuntime{Meta: api.Meta{Name: name, Labels: map[string]string{"env": "test"}},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: "us-east"}}
}

func webDefinition(name string) *api.WorkloadDefinition {
	return &api.WorkloadDefinition{Meta: api.Meta{Name: name}, Spec: api.WorkloadDefinitionSpec{
		Containers: []api.Container{{Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}},
	}}
}

// world creates a runtime, a definition and an instance of it on the runtime.
func (e *env) world(t testing.TB, prefix string) (*api.KubernetesRuntime, *api.WorkloadDefinition, *api.WorkloadInstance) {
	t.Helper()
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime(prefix+"-rt"))
	require.NoError(t, err)
	def, err := e.dev.WorkloadDefinitions().Create(ctx, webDefinition(prefix+"-def"))
	require.NoError(t, err)
	inst, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: prefix + "-inst"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	return rt, def, inst
}

// raw sends a request with the role's token and returns status and body.
func (e *env) raw(t testing.TB, role, method, path string, body string, header http.Header) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.hs.URL+path, rd)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" && body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := e.tokens[role]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := e.hs.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// apiErr decodes an error body.
func apiErr(t testing.TB, data []byte) *api.Error {
	t.Helper()
	var env struct {
		Error *api.Error `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &env), string(data))
	require.NotNil(t, env.Error, string(data))
	return env.Error
}
