package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
)

// buildQleet compiles this command once for the test.
func buildQleet(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "qleet")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func TestServerAndCLI(t *testing.T) {
	bin := buildQleet(t)
	dir := t.TempDir()
	srv := exec.Command(bin, "server", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn")
	stdout, err := srv.StdoutPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, "qleet server exits cleanly on SIGTERM")
		case <-time.After(30 * time.Second):
			_ = srv.Process.Kill()
			t.Error("qleet server did not stop on SIGTERM")
		}
	})
	endpoint := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "endpoint:" {
			endpoint = f[1]
			break
		}
	}
	require.NotEmpty(t, endpoint, "the server prints its endpoint")
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(discard{}) }()
	t.Logf("qleet server: start to ready in %s (goal 1s)", time.Since(start).Round(time.Millisecond))

	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	require.NoError(t, err)
	cl, err := client.New(endpoint, client.WithToken(strings.TrimSpace(string(token))))
	require.NoError(t, err)
	ctx := context.Background()
	def, err := cl.WorkloadDefinitions().Create(ctx, &client.WorkloadDefinition{Meta: client.Meta{Name: "web"},
		Spec: client.WorkloadDefinitionSpec{Containers: []client.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	_, err = cl.WorkloadDefinitions().WaitReconciled(ctx, def.ID)
	require.NoError(t, err)

	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "QLEET_ENDPOINT="+endpoint, "QLEET_DATA_DIR="+dir, "QLEET_TOKEN=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Run("get lists as a table", func(t *testing.T) {
		out, err := cli("get", "definitions")
		require.NoError(t, err, out)
		require.Contains(t, out, "NAME")
		require.Regexp(t, `web\s+Ready\s+1\s+1`, out)
	})
	t.Run("get one as JSON", func(t *testing.T) {
		out, err := cli("get", "workload_definition", "web", "-o", "json")
		require.NoError(t, err, out)
		var obj client.WorkloadDefinition
		require.NoError(t, json.Unmarshal([]byte(out), &obj))
		require.Equal(t, def.ID, obj.ID)
	})
	t.Run("describe shows conditions and events", func(t *testing.T) {
		out, err := cli("describe", "definition", "web")
		require.NoError(t, err, out)
		require.Contains(t, out, "Phase:       Ready")
		require.Contains(t, out, "Reconciled:  true")
		require.Contains(t, out, "Conditions:")
		require.Contains(t, out, "Reconciled") // the event reason
	})
	t.Run("describe --trace shows the hops of the last reconcile and how long each took", func(t *testing.T) {
		out, err := cli("describe", "definition", "web", "--trace")
		require.NoError(t, err, out)
		require.Contains(t, out, "Phase:       Ready", "the description comes first")
		require.Regexp(t, `Last reconcile: trace [0-9a-f]{32}, \d+ hops over `, out)
		require.Regexp(t, `(?m)^HOP\s+START\s+DURATION\s+NOTE$`, out)
		require.Regexp(t, `(?m)^\s*reconcile workload_definition\s+\+[0-9.]+m?s\s+[0-9.]+m?s\s+done$`, out, "the reconcile and its outcome")
		require.Regexp(t, `(?m)^\s{2,}GET /v1/\{plural\}/\{id\}\s+.*HTTP 200$`, out, "its read of the object, indented under it")
		out, err = cli("describe", "definition", "web", "--trace", "-o", "json")
		require.NoError(t, err, out)
		var tr client.Trace
		require.NoError(t, json.Unmarshal([]byte(out), &tr), out)
		require.Equal(t, def.ID, tr.ObjectID)
		require.NotEmpty(t, tr.Spans)
	})
	t.Run("errors are one line with a non-zero exit", func(t *testing.T) {
		out, err := cli("get", "widgets")
		require.Error(t, err)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, out)
		require.Contains(t, out, `unknown kind "widgets"`)
		out, err = cli("describe", "definition", "nope")
		require.Error(t, err)
		require.Contains(t, out, "not found")
	})
	t.Run("graph prints the dependency tree; describe follows a wait to its root cause", func(t *testing.T) {
		const dead = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
		rt, err := cl.KubernetesRuntimes().Create(ctx, &client.KubernetesRuntime{Meta: client.Meta{Name: "faraway"},
			Spec: client.KubernetesRuntimeSpec{Provider: client.ProviderKubeconfig, Kubeconfig: dead}})
		require.NoError(t, err)
		api, err := cl.WorkloadDefinitions().Create(ctx, &client.WorkloadDefinition{Meta: client.Meta{Name: "api"},
			Spec: client.WorkloadDefinitionSpec{Containers: []client.Container{{Name: "api", Image: "nginx:1.27"}}}})
		require.NoError(t, err)
		inst, err := cl.WorkloadInstances().Create(ctx, &client.WorkloadInstance{Meta: client.Meta{Name: "api"},
			Spec: client.WorkloadInstanceSpec{DefinitionID: api.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := cl.WorkloadInstances().Get(ctx, inst.ID)
			return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.Message != ""
		}, 30*time.Second, 50*time.Millisecond)

		out, err := cli("graph", "instance", "api")
		require.NoError(t, err, out)
		require.Regexp(t, `^workload_instance/api  Reconciling  waiting for kubernetes_runtime "faraway"`, out)
		require.Regexp(t, `├── workload_definition/api  \w+.*  \[spec.definition_id\]`, out)
		require.Regexp(t, `└── kubernetes_runtime/faraway  Reconciling  cannot reach the Kubernetes API at https://127.0.0.1:1.*\[spec.runtime_id\]`, out)
		out, err = cli("graph", "runtime", "faraway")
		require.NoError(t, err, out)
		require.Contains(t, out, "used by:")
		require.Contains(t, out, "└── workload_instance/api  Reconciling")
		out, err = cli("graph", "-o", "json")
		require.NoError(t, err, out)
		var g client.Graph
		require.NoError(t, json.Unmarshal([]byte(out), &g))
		require.Len(t, g.Edges, 2)

		out, err = cli("describe", "instance", "api")
		require.NoError(t, err, out)
		require.Regexp(t, `Root cause:  workload_instance "api" → kubernetes_runtime "faraway" \(Reconciling: cannot reach the Kubernetes API at https://127.0.0.1:1`, out)

		require.NoError(t, cl.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{Orphan: true, Wait: true}))
	})
	t.Run("delete", func(t *testing.T) {
		out, err := cli("delete", "definition", "web", "--wait")
		require.NoError(t, err, out)
		_, err = cl.WorkloadDefinitions().Get(ctx, def.ID)
		require.True(t, client.IsNotFound(err))
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// startServer runs `qleet server` with the given extra flags and returns its endpoint and a buffer that
// collects everything it logs.
func startServer(t *testing.T, bin, dir string, extra ...string) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv := exec.Command(bin, append([]string{"server", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "debug"}, extra...)...)
	srv.Stderr = logs
	stdout, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	})
	endpoint := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		_, _ = logs.Write(append(sc.Bytes(), '\n'))
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "endpoint:" {
			endpoint = f[1]
			break
		}
	}
	require.NotEmpty(t, endpoint, "the server prints its endpoint")
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(logs) }()
	return endpoint, logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTokensAndSecrets: tokens are made, listed and revoked through the CLI; and a write-only field
// (a runtime's kubeconfig) reaches no one but the controller role: no response to any other role, no
// event, no CLI output and no log line holds it.
func TestTokensAndSecrets(t *testing.T) {
	bin := buildQleet(t)
	dir := t.TempDir()
	endpoint, logs := startServer(t, bin, dir)
	cli := func(token string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "QLEET_ENDPOINT="+endpoint, "QLEET_DATA_DIR="+dir, "QLEET_TOKEN="+token)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = append(out, ee.Stderr...)
		}
		return string(out), err
	}
	tokens := map[string]string{}
	t.Run("token create shows the token once and it works with its role", func(t *testing.T) {
		for _, role := range client.Roles {
			out, err := cli("", "token", "create", "--name", role+"-tok", "--role", role, "--ttl", "1h")
			require.NoError(t, err, out)
			tokens[role] = strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
			require.True(t, strings.HasPrefix(tokens[role], "qlt_"), out)
		}
		out, err := cli(tokens[client.RoleViewer], "get", "definitions")
		require.NoError(t, err, out)
		out, err = cli(tokens[client.RoleViewer], "token", "list")
		require.Error(t, err, "only admin manages tokens")
		require.Contains(t, out, "may not manage tokens")
	})
	t.Run("token list shows names, roles and expiry but never a token", func(t *testing.T) {
		out, err := cli("", "token", "list")
		require.NoError(t, err, out)
		require.Contains(t, out, "developer-tok")
		require.Regexp(t, `developer-tok\s+developer\s+\S+\s+20\d\d-`, out, "the expiry is shown")
		for _, tok := range tokens {
			require.NotContains(t, out, tok)
		}
	})
	t.Run("a revoked token is refused at once", func(t *testing.T) {
		out, err := cli("", "token", "list", "-o", "json")
		require.NoError(t, err, out)
		var list []client.TokenInfo
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		id := ""
		for _, tk := range list {
			if tk.Name == "developer-tok" {
				id = tk.ID
			}
		}
		require.NotEmpty(t, id)
		out, err = cli("", "token", "revoke", id)
		require.NoError(t, err, out)
		out, err = cli(tokens[client.RoleDeveloper], "get", "definitions")
		require.Error(t, err)
		require.Contains(t, out, "invalid bearer token")
	})

	t.Run("a write-only field reaches the controller role only", func(t *testing.T) {
		const marker = "qleet-secret-marker-7f3a9c"
		kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
			"users: [{name: u, user: {token: " + marker + "}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
		admin := client.RoleAdmin
		out, err := cli("", "get", "runtimes") // warm up: the admin token from the data dir
		require.NoError(t, err, out)
		var seen []string
		for _, role := range []string{admin, client.RoleViewer} {
			cl, err := client.New(endpoint, client.WithToken(tokens[role]))
			require.NoError(t, err)
			if role == admin {
				created, err := cl.KubernetesRuntimes().Create(context.Background(), &client.KubernetesRuntime{Meta: client.Meta{Name: "secret-rt"},
					Spec: client.KubernetesRuntimeSpec{Provider: client.ProviderKubeconfig, Kubeconfig: kubeconfig}})
				require.NoError(t, err)
				raw, _ := json.Marshal(created)
				seen = append(seen, string(raw))
				patched, err := cl.KubernetesRuntimes().Patch(context.Background(), created.ID, map[string]any{"labels": map[string]string{"a": "b"}})
				require.NoError(t, err)
				raw, _ = json.Marshal(patched)
				seen = append(seen, string(raw))
			}
		}
		// Let the controller try the unreachable cluster, so that events and logs are written.
		ctrl, err := client.New(endpoint, client.WithToken(tokens[client.RoleController]))
		require.NoError(t, err)
		rt, err := ctrl.KubernetesRuntimes().GetByName(context.Background(), "secret-rt")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			evs, err := ctrl.KubernetesRuntimes().Events(context.Background(), rt.ID)
			require.NoError(t, err)
			return len(evs) > 0 && evs[len(evs)-1].Type == client.EventWarning
		}, 30*time.Second, 100*time.Millisecond, "the controller reports the unreachable cluster")
		for _, args := range [][]string{{"get", "runtimes", "-o", "json"}, {"get", "runtime", "secret-rt", "-o", "json"}, {"describe", "runtime", "secret-rt"}, {"events", "runtime", "secret-rt", "-o", "json"}} {
			for _, role := range []string{"", tokens[client.RoleViewer]} {
				out, err := cli(role, args...)
				require.NoError(t, err, out)
				seen = append(seen, out)
			}
		}
		for i, s := range seen {
			require.NotContains(t, s, marker, "response %d holds the secret", i)
		}
		require.NotContains(t, logs.String(), marker, "a log line holds the secret")

		// The controller role does see it: the marker is there to be found.
		require.Contains(t, rt.Spec.Kubeconfig, marker)
	})
}

// The CLI trusts the CA certificate in QLEET_CA_CERT, like the provider does.
func TestCLIHonoursQLEETCACert(t *testing.T) {
	bin := buildQleet(t)
	dir := t.TempDir()
	endpoint, _ := startServer(t, bin, dir, "--listen", "0.0.0.0:0")
	require.True(t, strings.HasPrefix(endpoint, "https://"), endpoint)
	run := func(env ...string) (string, error) {
		cmd := exec.Command(bin, "get", "runtimes")
		cmd.Env = append(append(os.Environ(), "QLEET_ENDPOINT="+endpoint, "QLEET_DATA_DIR="+dir, "QLEET_TOKEN="), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	require.Error(t, err, "without the CA the self-signed certificate is refused: %s", out)
	require.Contains(t, out, "certificate")
	out, err = run("QLEET_CA_CERT=" + filepath.Join(dir, "tls.crt"))
	require.NoError(t, err, out)
	require.Contains(t, out, "NAME")
}
