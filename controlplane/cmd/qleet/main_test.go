package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// qleetBin is the binary the tests that run qleet as a process share: built once per test run.
var qleetBin struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

// buildQleet compiles this command, once for all the tests.
func buildQleet(t *testing.T) string {
	t.Helper()
	qleetBin.once.Do(func() {
		if qleetBin.dir, qleetBin.err = os.MkdirTemp("", "qleet-test-"); qleetBin.err != nil {
			return
		}
		qleetBin.out, qleetBin.err = exec.Command("go", "build", "-o", filepath.Join(qleetBin.dir, "qleet"), ".").CombinedOutput()
	})
	require.NoError(t, qleetBin.err, "go build: %s", qleetBin.out)
	return filepath.Join(qleetBin.dir, "qleet")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if qleetBin.dir != "" {
		_ = os.RemoveAll(qleetBin.dir)
	}
	os.Exit(code)
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
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
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
		var obj api.WorkloadDefinition
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
		// Its API reads, indented under it: the object's GET, or only its dependents' count (GET .../count)
		// when a resync pass handed the reconcile the object it had listed.
		require.Regexp(t, `(?m)^\s{2,}GET /v1/\{plural\}(/\{id\}|/count)?\s+.*HTTP 200$`, out, "its API reads, indented under it")
		out, err = cli("describe", "definition", "web", "--trace", "-o", "json")
		require.NoError(t, err, out)
		var tr api.Trace
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
		rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "faraway"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: dead}})
		require.NoError(t, err)
		svc, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "api"},
			Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "api", Image: "nginx:1.27"}}}})
		require.NoError(t, err)
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "api"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: svc.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		await.True(t, 30*time.Second, func() bool {
			got, err := cl.WorkloadInstances().Get(ctx, inst.ID)
			return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.Message != ""
		}, "the instance reconciled with a message")

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
		var g api.Graph
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
		require.True(t, api.IsNotFound(err))
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
		for _, role := range api.Roles {
			out, err := cli("", "token", "create", "--name", role+"-tok", "--role", role, "--ttl", "1h")
			require.NoError(t, err, out)
			tokens[role] = strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
			require.True(t, strings.HasPrefix(tokens[role], "qlt_"), out)
		}
		out, err := cli(tokens[api.RoleViewer], "get", "definitions")
		require.NoError(t, err, out)
		out, err = cli(tokens[api.RoleViewer], "token", "list")
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
		var list []api.TokenInfo
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
		out, err = cli(tokens[api.RoleDeveloper], "get", "definitions")
		require.Error(t, err)
		require.Contains(t, out, "invalid bearer token")
	})

	t.Run("a write-only field reaches the controller role only", func(t *testing.T) {
		const marker = "qleet-secret-marker-7f3a9c"
		kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
			"users: [{name: u, user: {token: " + marker + "}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
		admin := api.RoleAdmin
		out, err := cli("", "get", "runtimes") // warm up: the admin token from the data dir
		require.NoError(t, err, out)
		var seen []string
		for _, role := range []string{admin, api.RoleViewer} {
			cl, err := client.New(endpoint, client.WithToken(tokens[role]))
			require.NoError(t, err)
			if role == admin {
				created, err := cl.KubernetesRuntimes().Create(context.Background(), &api.KubernetesRuntime{Meta: api.Meta{Name: "secret-rt"},
					Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: kubeconfig}})
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
		ctrl, err := client.New(endpoint, client.WithToken(tokens[api.RoleController]))
		require.NoError(t, err)
		rt, err := ctrl.KubernetesRuntimes().GetByName(context.Background(), "secret-rt")
		require.NoError(t, err)
		await.True(t, 30*time.Second, func() bool {
			evs, err := ctrl.KubernetesRuntimes().Events(context.Background(), rt.ID)
			require.NoError(t, err)
			return len(evs) > 0 && evs[len(evs)-1].Type == api.EventWarning
		}, "the controller reports the unreachable cluster")
		for _, args := range [][]string{{"get", "runtimes", "-o", "json"}, {"get", "runtime", "secret-rt", "-o", "json"}, {"describe", "runtime", "secret-rt"}, {"events", "runtime", "secret-rt", "-o", "json"}} {
			for _, role := range []string{"", tokens[api.RoleViewer]} {
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
	require.Contains(t, out, "certificate signed by unknown authority: trust the API's CA certificate with --ca-cert")
	out, err = run("QLEET_CA_CERT=" + filepath.Join(dir, "tls.crt"))
	require.NoError(t, err, out)
	require.Contains(t, out, "NAME")
}

// The tests below run qleet's commands in-process (run, with an environment of their own) against a
// control plane started in the test.

// result is what one in-process command line printed, and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// qleetIn runs a command line in-process with exactly env as its environment.
func qleetIn(ctx context.Context, env map[string]string, args ...string) result {
	var out, errb strings.Builder
	code := run(ctx, args, func(k string) string { return env[k] }, &out, &errb)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// cliEnv is an environment with its own HOME (so no config file of the machine is read) and the given
// variables.
func cliEnv(t *testing.T, kv ...string) map[string]string {
	env := map[string]string{"HOME": t.TempDir()}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func TestHelpUsageAndVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := cliEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "qleet [command]"},
		{[]string{"--help"}, "Running the control plane:"},
		{[]string{"-h"}, "Objects:"},
		{[]string{"help", "get"}, "qleet get KIND [NAME] [flags]"},
		{[]string{"get", "--help"}, "-o, --output string"},
		{[]string{"describe", "-h"}, "--trace"},
		{[]string{"server", "--help"}, "--support-chart-dir"},
		{[]string{"server", "-help"}, "--data-dir"},
		{[]string{"agent", "install", "--help"}, "--runtime"},
		{[]string{"token", "create", "--help"}, "--role"},
		{[]string{"config", "--help"}, "use-context"},
		{[]string{"login", "--help"}, "--ca-cert"},
		{[]string{"--version"}, "qleet "},
	} {
		t.Run(fmt.Sprintf("%q prints help to stdout and exits 0", tc.args), func(t *testing.T) {
			r := qleetIn(ctx, env, tc.args...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, tc.want)
			require.Empty(t, r.stderr)
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `qleet: unknown command "bogus" for "qleet" (see 'qleet --help')`},
		{[]string{"gett", "runtimes"}, `did you mean get`},
		{[]string{"get", "--bogus"}, `qleet: unknown flag: --bogus (see 'qleet get --help')`},
		{[]string{"get"}, `get: missing kind`},
		{[]string{"describe", "runtime"}, `describe: missing name`},
		{[]string{"get", "widgets"}, `unknown kind "widgets" (kinds: bucket,`},
		{[]string{"get", "runtimes", "-o", "xml"}, `-o "xml": must be one of table, wide, json, yaml`},
		{[]string{"token"}, `missing command: one of create, list, revoke`},
		{[]string{"token", "frobnicate"}, `unknown command "frobnicate" for "qleet token"`},
		{[]string{"image", "set", "web"}, `usage: qleet image set DEFINITION CONTAINER IMAGE`},
		{[]string{"server", "--listen"}, `flag needs an argument: --listen`},
		{[]string{"server", "--workers", "many"}, `invalid argument "many" for "--workers"`},
	} {
		t.Run(fmt.Sprintf("%q is a usage error: one line on stderr, exit 2", tc.args), func(t *testing.T) {
			r := qleetIn(ctx, env, tc.args...)
			require.Equal(t, 2, r.code, r.stdout)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, tc.want)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		})
	}
	t.Run("a bad QLEET_<FLAG> of the server is a usage error naming the variable", func(t *testing.T) {
		r := qleetIn(ctx, cliEnv(t, "QLEET_WORKERS", "many"), "server", "--data-dir", t.TempDir())
		require.Equal(t, 2, r.code, r.stdout)
		require.Contains(t, r.stderr, "QLEET_WORKERS")
	})
	t.Run("version prints the version and the Go that built it, also as JSON", func(t *testing.T) {
		r := qleetIn(ctx, env, "version")
		require.Equal(t, 0, r.code, r.stderr)
		require.Regexp(t, `(?m)^qleet \S+\n(  commit: .*\n)?  go:       go1\.`, r.stdout)
		r = qleetIn(ctx, env, "version", "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)
		var v versionInfo
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
		require.Equal(t, runtime.Version(), v.GoVersion)
		require.NotEmpty(t, v.Version)
	})
}

func TestCompatArgsKeepsTheFlagPackageForms(t *testing.T) {
	t.Parallel()
	root := (&cli{getenv: func(string) string { return "" }}).rootCmd()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"server", "-data-dir", "d", "-listen=:0", "--log-level", "warn"}, []string{"server", "--data-dir", "d", "--listen=:0", "--log-level", "warn"}},
		{[]string{"server", "-help"}, []string{"server", "--help"}},
		{[]string{"get", "runtimes", "--o", "json", "--o=yaml", "-ojson"}, []string{"get", "runtimes", "-o", "json", "-o=yaml", "-ojson"}},
		{[]string{"agent", "install", "-runtime", "x", "-endpoint=http://h"}, []string{"agent", "install", "--runtime", "x", "--endpoint=http://h"}},
		{[]string{"get", "runtimes", "--", "-data-dir"}, []string{"get", "runtimes", "--", "-data-dir"}},
		{[]string{"describe", "instance", "-trace"}, []string{"describe", "instance", "--trace"}},
		{[]string{"server", "-unknown"}, []string{"server", "-unknown"}},
	} {
		require.Equal(t, tc.want, compatArgs(root, tc.in), "%q", tc.in)
	}
}

func TestConfigPathAndDefaults(t *testing.T) {
	t.Parallel()
	q := func(env map[string]string) *cli { return &cli{getenv: func(k string) string { return env[k] }} }
	t.Run("QLEET_CONFIG, then XDG_CONFIG_HOME, then ~/.config", func(t *testing.T) {
		p, err := q(map[string]string{"QLEET_CONFIG": "/a/c.yaml", "XDG_CONFIG_HOME": "/x", "HOME": "/h"}).configPath()
		require.NoError(t, err)
		require.Equal(t, "/a/c.yaml", p)
		p, err = q(map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}).configPath()
		require.NoError(t, err)
		require.Equal(t, "/x/qleet/config.yaml", p)
		p, err = q(map[string]string{"HOME": "/h"}).configPath()
		require.NoError(t, err)
		require.Equal(t, "/h/.config/qleet/config.yaml", p)
	})
	t.Run("with nothing set: the default endpoint and the admin token of the data dir", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "admin.token"), []byte("qlt_admin\n"), 0o600))
		c, err := q(map[string]string{"HOME": t.TempDir(), "QLEET_DATA_DIR": dir}).resolveConn()
		require.NoError(t, err)
		require.Equal(t, connection{Endpoint: "http://127.0.0.1:8080", EndpointFrom: "the default", Token: "qlt_admin",
			TokenFrom: filepath.Join(dir, "admin.token")}, c)
		_, err = q(map[string]string{"HOME": t.TempDir(), "QLEET_DATA_DIR": t.TempDir()}).resolveConn()
		require.ErrorContains(t, err, "no token: run qleet login, set QLEET_TOKEN")
	})
	t.Run("a broken config file is named", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte("contexts: [{name: a, endpoint: x, colour: red}]\n"), 0o600))
		_, err := q(map[string]string{"QLEET_CONFIG": p}).resolveConn()
		require.ErrorContains(t, err, p)
		require.ErrorContains(t, err, "colour")
	})
}

// cliServer starts a control plane with one Ready workload definition, "web", and returns it with an
// environment that reaches it through QLEET_ENDPOINT and QLEET_TOKEN.
func cliServer(t *testing.T) (*app.App, *client.Client, *api.WorkloadDefinition, map[string]string) {
	t.Helper()
	a, cl := cptest.Start(t, cptest.Config())
	ctx := context.Background()
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web", Labels: map[string]string{"tier": "front"}},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	def, err = cl.WorkloadDefinitions().WaitReconciled(cptest.Wait(t, 30*time.Second), def.ID)
	require.NoError(t, err)
	return a, cl, def, cliEnv(t, "QLEET_ENDPOINT", a.Endpoint, "QLEET_TOKEN", a.AdminToken)
}

func TestOutputFormatsParseBack(t *testing.T) {
	t.Parallel()
	_, cl, def, env := cliServer(t)
	ctx := context.Background()
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		r := qleetIn(ctx, env, args...)
		require.Equal(t, 0, r.code, r.stderr)
		return r.stdout
	}
	t.Run("get -o yaml and -o json", func(t *testing.T) {
		var list []api.WorkloadDefinition
		require.NoError(t, yaml.Unmarshal([]byte(ok(t, "get", "definitions", "-o", "yaml")), &list))
		require.Len(t, list, 1)
		require.Equal(t, def.ID, list[0].ID)
		require.Equal(t, "nginx:1.27", list[0].Spec.Containers[0].Image)
		var one api.WorkloadDefinition
		require.NoError(t, yaml.Unmarshal([]byte(ok(t, "get", "definition", "web", "-o", "yaml")), &one))
		require.Equal(t, def.ID, one.ID)
		require.NoError(t, json.Unmarshal([]byte(ok(t, "get", "definition", "web", "-o", "json")), &one))
		require.Equal(t, def.ID, one.ID)
	})
	t.Run("get -o wide adds the id and labels", func(t *testing.T) {
		out := ok(t, "get", "definitions", "-o", "wide")
		require.Regexp(t, `(?m)^NAME\s+PHASE\s+GEN\s+OBSERVED\s+AGE\s+ID\s+LABELS\s+MESSAGE$`, out)
		require.Regexp(t, `(?m)^web\s+Ready\s+1\s+1\s+\S+\s+`+def.ID+`\s+tier=front`, out)
	})
	t.Run("describe -o yaml", func(t *testing.T) {
		var d struct {
			Object api.WorkloadDefinition `json:"object"`
			Events []api.Event            `json:"events"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(ok(t, "describe", "definition", "web", "-o", "yaml")), &d))
		require.Equal(t, def.ID, d.Object.ID)
		require.NotEmpty(t, d.Events)
	})
	t.Run("events -o json, -o yaml and -o wide", func(t *testing.T) {
		var evs []api.Event
		require.NoError(t, json.Unmarshal([]byte(ok(t, "events", "definition", "web", "-o", "json")), &evs))
		require.NotEmpty(t, evs)
		require.Equal(t, def.ID, evs[0].ObjectID)
		var evs2 []api.Event
		require.NoError(t, yaml.Unmarshal([]byte(ok(t, "events", "definition", "web", "-o", "yaml")), &evs2))
		require.Equal(t, evs[0].ID, evs2[0].ID)
		require.Regexp(t, `(?m)^\s+AGE\s+TYPE\s+REASON\s+GEN\s+DURATION\s+SOURCE\s+TIME\s+MESSAGE$`, ok(t, "events", "definition", "web", "-o", "wide"))
	})
	t.Run("graph -o yaml", func(t *testing.T) {
		var g api.Graph
		require.NoError(t, yaml.Unmarshal([]byte(ok(t, "graph", "definition", "web", "-o", "yaml")), &g))
		require.NotNil(t, g.Node(def.ID), "%+v", g)
	})
	t.Run("image set goes through the typed client and names the definition", func(t *testing.T) {
		out := ok(t, "image", "set", "web", "web", "nginx:1.28")
		require.Contains(t, out, `workload_definition "web": container "web" now runs nginx:1.28`)
		got, err := cl.WorkloadDefinitions().Get(ctx, def.ID)
		require.NoError(t, err)
		require.Equal(t, "nginx:1.28", got.Spec.Containers[0].Image)
		r := qleetIn(ctx, env, "image", "set", "web", "nope", "nginx:1.28")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "container")
	})
}

func TestWatchPrintsChanges(t *testing.T) {
	t.Parallel()
	_, cl, def, env := cliServer(t)
	ctx := context.Background()
	// watch runs a command until stop is called, collecting its output.
	watch := func(t *testing.T, args ...string) (*syncBuffer, func() int) {
		out := &syncBuffer{}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan int, 1)
		go func() { done <- run(wctx, args, func(k string) string { return env[k] }, out, out) }()
		return out, func() int {
			cancel()
			select {
			case code := <-done:
				return code
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not end with its context")
				return -1
			}
		}
	}
	t.Run("get --watch prints a new object, then its deletion", func(t *testing.T) {
		out, stop := watch(t, "get", "definitions", "--watch", "--watch-interval", "50ms")
		await.True(t, 10*time.Second, func() bool { return regexp.MustCompile(`(?m)^web\s+Ready`).MatchString(out.String()) }, "the first list")
		added, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "watched"},
			Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "w", Image: "nginx:1.27"}}}})
		require.NoError(t, err)
		await.True(t, 30*time.Second, func() bool { return regexp.MustCompile(`(?m)^watched\s+Ready\s+1\s+1`).MatchString(out.String()) }, "the new object, once Ready: %s", out)
		require.NoError(t, cl.WorkloadDefinitions().Delete(ctx, added.ID, client.DeleteOptions{}))
		await.True(t, 30*time.Second, func() bool { return regexp.MustCompile(`(?m)^watched\s+Deleted`).MatchString(out.String()) }, "its deletion: %s", out)
		require.Equal(t, 0, stop(), "Ctrl-C ends a watch without an error")
		require.Equal(t, 1, strings.Count(out.String(), "NAME"), "one header: %s", out)
	})
	t.Run("events --watch prints the events of a new generation", func(t *testing.T) {
		out, stop := watch(t, "events", "definition", "web", "--watch", "--watch-interval", "50ms")
		await.True(t, 10*time.Second, func() bool { return strings.Contains(out.String(), "REASON") }, "the events header")
		require.NotRegexp(t, `(?m)^\s+\S+\s+Normal\s+\w+\s+2\s`, out.String())
		_, err := cl.SetImage(ctx, def.ID, api.ImageChange{Container: "web", Image: "nginx:1.29"})
		require.NoError(t, err)
		await.True(t, 30*time.Second, func() bool { return regexp.MustCompile(`(?m)^\s+\S+\s+Normal\s+\w+\s+2\s`).MatchString(out.String()) }, "an event of generation 2: %s", out)
		require.Equal(t, 0, stop())
	})
}

func TestContextsAndPrecedence(t *testing.T) {
	t.Parallel()
	a, cl, _, _ := cliServer(t)
	ctx := context.Background()
	home := t.TempDir()
	emptyData := t.TempDir()
	base := func(kv ...string) map[string]string {
		env := map[string]string{"HOME": home, "QLEET_DATA_DIR": emptyData}
		for i := 0; i+1 < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	viewer, err := cl.Tokens().Create(ctx, api.TokenRequest{Name: "viewer", Role: api.RoleViewer})
	require.NoError(t, err)
	cfgPath := filepath.Join(home, ".config", "qleet", "config.yaml")

	t.Run("login refuses a bad token and writes nothing", func(t *testing.T) {
		r := qleetIn(ctx, base(), "login", a.Endpoint, "--token", "qlt_wrong")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "invalid bearer token")
		require.NoFileExists(t, cfgPath)
	})
	t.Run("login writes a context, mode 0600, and makes it current", func(t *testing.T) {
		r := qleetIn(ctx, base(), "login", a.Endpoint, "--token", a.AdminToken, "--name", "local")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, `context "local" is current`)
		info, err := os.Stat(cfgPath)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		r = qleetIn(ctx, base(), "login", a.Endpoint, "--name", "viewer", "--token", viewer.Token)
		require.Equal(t, 0, r.code, r.stderr)
		r = qleetIn(ctx, base(), "config", "current-context")
		require.Equal(t, "viewer\n", r.stdout)
		r = qleetIn(ctx, base(), "config", "use-context", "local")
		require.Equal(t, 0, r.code, r.stderr)
		r = qleetIn(ctx, base(), "config", "current-context")
		require.Equal(t, "local\n", r.stdout)
		r = qleetIn(ctx, base(), "config", "get-contexts")
		require.Regexp(t, `(?m)^\*\s+local\s+`+regexp.QuoteMeta(a.Endpoint), r.stdout)
		require.Regexp(t, `(?m)^\s+viewer\s+`, r.stdout)
		require.NotContains(t, r.stdout, a.AdminToken, "tokens are not shown")
		r = qleetIn(ctx, base(), "config", "use-context", "nope")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, `no context "nope"`)
	})
	// An admin-only verb tells the admin context from the viewer's.
	admin := func(t *testing.T, env map[string]string, args ...string) result {
		t.Helper()
		return qleetIn(ctx, env, append([]string{"token", "list"}, args...)...)
	}
	t.Run("the current context needs no flags or environment", func(t *testing.T) {
		r := admin(t, base())
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "viewer")
	})
	t.Run("--context picks another context", func(t *testing.T) {
		r := admin(t, base(), "--context", "viewer")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "may not manage tokens")
		r = admin(t, base("QLEET_CONTEXT", "viewer"))
		require.Equal(t, 1, r.code, "QLEET_CONTEXT too")
		r = admin(t, base(), "--context", "nope")
		require.Equal(t, 2, r.code)
		require.Contains(t, r.stderr, `no context "nope"`)
	})
	t.Run("the environment beats the context", func(t *testing.T) {
		r := admin(t, base("QLEET_ENDPOINT", "http://127.0.0.1:1", "QLEET_TOKEN", "x"))
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "cannot reach the QleetOS API at http://127.0.0.1:1: is `qleet server` running? (connection refused, from QLEET_ENDPOINT)")
		r = admin(t, base("QLEET_TOKEN", viewer.Token))
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "may not manage tokens")
	})
	t.Run("flags beat the environment", func(t *testing.T) {
		r := admin(t, base("QLEET_ENDPOINT", "http://127.0.0.1:1"), "--endpoint", a.Endpoint)
		require.Equal(t, 0, r.code, r.stderr)
		r = admin(t, base("QLEET_TOKEN", viewer.Token), "--token", a.AdminToken)
		require.Equal(t, 0, r.code, r.stderr)
		r = admin(t, base(), "--token", viewer.Token)
		require.Equal(t, 1, r.code)
	})
	t.Run("a context's token goes only to the context's endpoint", func(t *testing.T) {
		other := strings.Replace(a.Endpoint, "127.0.0.1", "localhost", 1)
		r := admin(t, base("QLEET_ENDPOINT", other))
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "no token")
		r = admin(t, base("QLEET_ENDPOINT", other, "QLEET_DATA_DIR", a.DataDir()))
		require.Equal(t, 0, r.code, "the data dir's admin token is the last default: %s", r.stderr)
	})
	t.Run("delete-context forgets it", func(t *testing.T) {
		r := qleetIn(ctx, base(), "config", "delete-context", "viewer")
		require.Equal(t, 0, r.code, r.stderr)
		data, err := os.ReadFile(cfgPath)
		require.NoError(t, err)
		require.NotContains(t, string(data), viewer.Token)
	})
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	_, _, _, env := cliServer(t)
	ctx := context.Background()
	for shell, want := range map[string]string{"bash": "__start_qleet", "zsh": "#compdef qleet", "fish": "complete -c qleet"} {
		r := qleetIn(ctx, env, "completion", shell)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, want, shell)
	}
	complete := func(args ...string) []string {
		r := qleetIn(ctx, env, append([]string{"__complete"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		return strings.Split(strings.TrimSpace(r.stdout), "\n")
	}
	kinds := complete("get", "")
	require.Contains(t, kinds, "workload_instance")
	require.Contains(t, kinds, "kubernetes_runtime")
	require.Equal(t, ":4", kinds[len(kinds)-1], "no file completion")
	require.Equal(t, []string{"workload_definition", "workload_instance", ":4"}, complete("describe", "work"))
	require.Equal(t, []string{"web", ":4"}, complete("get", "definition", "w"), "names come from the API")
	require.Equal(t, []string{":4"}, complete("get", "instance", ""), "no instances")
	require.Contains(t, complete("get", "runtimes", "-o", ""), "yaml")
	require.Equal(t, []string{"web", ":4"}, complete("image", "set", ""))
}

func TestWrongEndpointSaysTheServerMayNotBeRunning(t *testing.T) {
	t.Parallel()
	r := qleetIn(context.Background(), cliEnv(t), "get", "runtimes", "--endpoint", "http://127.0.0.1:1", "--token", "x")
	require.Equal(t, 1, r.code)
	require.Equal(t, "qleet: cannot reach the QleetOS API at http://127.0.0.1:1: is `qleet server` running? (connection refused, from --endpoint)\n", r.stderr)
}

func TestPodsShowImageAndNode(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t, kubesimtest.WithName("pods"))
	a, cl := cptest.Start(t, cptest.Config())
	ctx := context.Background()
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "pods"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: cptest.Kubeconfig(t, cluster.Kubeconfig)}})
	require.NoError(t, err)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 90*time.Second), inst.ID)
	require.NoError(t, err)

	ctrlToken, err := os.ReadFile(filepath.Join(a.DataDir(), "controller.token"))
	require.NoError(t, err)
	env := cliEnv(t, "QLEET_ENDPOINT", a.Endpoint, "QLEET_TOKEN", strings.TrimSpace(string(ctrlToken)))
	r := qleetIn(ctx, env, "pods", "web")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^RUNTIME\s+NAMESPACE\s+NAME\s+PHASE\s+READY\s+IMAGE\s+NODE$`, r.stdout)
	require.Regexp(t, `(?m)^pods\s+\S+\s+web-\S+\s+Running\s+1/1\s+nginx:1\.27\s+\S+$`, r.stdout)
	r = qleetIn(ctx, env, "pods", "web", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var rows []podRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, []string{"nginx:1.27"}, rows[0].Images)
	require.NotEmpty(t, rows[0].Node, "the pod was scheduled on a node")

	r = qleetIn(ctx, cliEnv(t, "QLEET_ENDPOINT", a.Endpoint, "QLEET_TOKEN", a.AdminToken), "pods", "web")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "returned to the controller role only", "the admin role reads no kubeconfig")
}

func TestPlanPrintsWhatAChangeWouldDo(t *testing.T) {
	t.Parallel()
	_, cl, def, env := cliServer(t)
	ctx := context.Background()
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}}})
	require.NoError(t, err)
	dir := t.TempDir()
	file := filepath.Join(dir, "objects.yaml")
	// Objects as `qleet get -o yaml` prints them: a new instance in two regions with a gateway that names
	// it by a placeholder id, and an existing definition with a new image.
	require.NoError(t, os.WriteFile(file, []byte(`- kind: workload_instance
  id: new-hello
  name: hello
  spec: {definition_id: `+def.ID+`, placement: {regions: [eu-west, us-east]}}
- kind: gateway
  name: hello
  spec: {instance_id: new-hello, hosts: [hello.example.test]}
- kind: definition
  name: web
  spec: {containers: [{name: web, image: "nginx:1.28"}]}
`), 0o600))

	r := qleetIn(ctx, env, "plan", "-f", file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^ACTION\s+KIND\s+NAME\s+DETAIL\s+REASON$`, r.stdout)
	require.Regexp(t, `(?m)^create\s+workload_instance\s+hello\s+`, r.stdout)
	require.Regexp(t, `(?m)^update\s+workload_definition\s+web\s+`, r.stdout, "an object that exists is an update")
	require.Regexp(t, `(?m)^provision\s+kubernetes_runtime\s+default-eu-west\s+in eu-west from runtime_profile "default"`, r.stdout)
	require.Regexp(t, `(?m)^provision\s+kubernetes_runtime\s+default-us-east\s+in us-east from runtime_profile "default"`, r.stdout)
	require.Contains(t, r.stdout, "Beyond the requested changes:\n")
	require.Contains(t, r.stdout, `  will install support_service ingress, cert-manager on kubernetes_runtime "default-eu-west"`)

	r = qleetIn(ctx, env, "plan", "-f", file, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var res api.PlanResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	var provisioned []string
	for _, a := range res.Actions {
		if a.Action == api.ActionProvision {
			provisioned = append(provisioned, a.Region)
		}
	}
	require.ElementsMatch(t, []string{"eu-west", "us-east"}, provisioned)

	insts, err := cl.WorkloadInstances().List(ctx, client.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, insts.Items, "a plan writes nothing")
	got, err := cl.WorkloadDefinitions().Get(ctx, def.ID)
	require.NoError(t, err)
	require.Equal(t, "nginx:1.27", got.Spec.Containers[0].Image)

	t.Run("deletes, from the command line", func(t *testing.T) {
		r := qleetIn(ctx, env, "plan", "--delete", "definition/web")
		require.Equal(t, 0, r.code, r.stderr)
		require.Regexp(t, `(?m)^delete\s+workload_definition\s+web\s+`, r.stdout)
	})
	t.Run("a change the write would refuse fails the plan, naming the field", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(bad, []byte(`{"kind": "workload_definition", "name": "broken", "spec": {"containers": [{"name": "x", "image": ""}]}}`), 0o600))
		r := qleetIn(ctx, env, "plan", "-f", bad)
		require.Equal(t, 1, r.code, r.stdout)
		require.Contains(t, r.stderr, "changes[0].spec.containers[0].image")
	})
	t.Run("a plan request is sent as it is; stdin works", func(t *testing.T) {
		var out, errb strings.Builder
		root := (&cli{getenv: func(k string) string { return env[k] }}).rootCmd()
		root.SetArgs([]string{"plan", "-f", "-"})
		root.SetIn(strings.NewReader(`{"changes": [{"op": "create", "kind": "workload_instance", "name": "solo", "spec": {"definition_id": "` + def.ID + `", "placement": {"regions": ["us-east"]}}}]}`))
		root.SetOut(&out)
		root.SetErr(&errb)
		require.NoError(t, root.ExecuteContext(ctx), errb.String())
		require.Regexp(t, `(?m)^provision\s+kubernetes_runtime\s+default-us-east\s+`, out.String())
	})
	t.Run("no changes is a usage error", func(t *testing.T) {
		r := qleetIn(ctx, env, "plan")
		require.Equal(t, 2, r.code)
		require.Contains(t, r.stderr, "give the changes with -f FILE or --delete KIND/NAME")
	})
}

// `qleet server` keeps the flag package's forms (one dash, -flag=value) and the QLEET_<FLAG> variables,
// prints its endpoint, and stops cleanly when its context ends (SIGTERM in main).
func TestServerCommandInProcess(t *testing.T) {
	dir := t.TempDir()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	env := map[string]string{"HOME": t.TempDir(), "QLEET_LOG_LEVEL": "error", "QLEET_TRACE_BUFFER": "0"}
	go func() {
		done <- run(ctx, []string{"server", "-data-dir", dir, "-listen=127.0.0.1:0"}, func(k string) string { return env[k] }, out, io.Discard)
	}()
	endpoint := regexp.MustCompile(`endpoint:\s+(\S+)`)
	await.True(t, 60*time.Second, func() bool { return endpoint.MatchString(out.String()) }, "the server prints its endpoint")
	require.FileExists(t, filepath.Join(dir, "admin.token"), "-data-dir was taken")
	r := qleetIn(context.Background(), cliEnv(t, "QLEET_ENDPOINT", endpoint.FindStringSubmatch(out.String())[1], "QLEET_DATA_DIR", dir), "get", "runtimes")
	require.Equal(t, 0, r.code, r.stderr)
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code)
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
}

func TestStreamTableKeepsLaterRowsAligned(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	st := &streamTable{w: &b}
	require.NoError(t, st.write("NAME\tPHASE\tMESSAGE\nweb\tReady\t\n"))
	require.NoError(t, st.write("a\tReconciling\twaiting…\n"))
	require.Equal(t, "NAME  PHASE  MESSAGE\nweb   Ready  \na     Reconciling  waiting…\n", b.String(),
		"a later row keeps the first batch's columns, and only a longer cell widens its own")
	require.NoError(t, st.write("b\tReady\tok\n"))
	require.True(t, strings.HasSuffix(b.String(), "b     Ready        ok\n"), b.String())
}

// TestEveryShortNameResolves: the CLI's short names come from the kind registry, singular and plural.
func TestEveryShortNameResolves(t *testing.T) {
	for _, ki := range api.Kinds() {
		require.NotEmpty(t, ki.ShortNames, "kind %s has no short name", ki.Kind)
		for _, n := range append(slices.Clone(ki.ShortNames), ki.Kind, ki.Plural) {
			for _, form := range []string{n, n + "s"} {
				if form == ki.Plural+"s" {
					continue
				}
				got, err := resolveKind(form)
				require.NoError(t, err, form)
				require.Equal(t, ki.Kind, got, form)
			}
		}
	}
}
