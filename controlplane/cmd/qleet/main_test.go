package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	t.Run("errors are one line with a non-zero exit", func(t *testing.T) {
		out, err := cli("get", "widgets")
		require.Error(t, err)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, out)
		require.Contains(t, out, `unknown kind "widgets"`)
		out, err = cli("describe", "definition", "nope")
		require.Error(t, err)
		require.Contains(t, out, "not found")
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
