package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cluster"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// connected returns the runtime's Connected condition, or nil.
func connected(rt *api.KubernetesRuntime) *api.Condition {
	for i := range rt.Status.Conditions {
		if rt.Status.Conditions[i].Type == cluster.ConditionConnected {
			return &rt.Status.Conditions[i]
		}
	}
	return nil
}

// apiserverPID returns the pid of the kube-apiserver process that kubesim (pid parent) runs.
func apiserverPID(t *testing.T, parent int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), "kube-apiserver") {
			return pid
		}
	}
	require.FailNow(t, "no kube-apiserver child of kubesim", "pid %d", parent)
	return 0
}

// TestHungClusterIsReportedWithinSeconds pauses a Ready runtime's API server (SIGSTOP: it keeps accepting
// connections and never answers) for 35s, an outage shorter than any recheck, and expects the runtime's
// Connected condition to turn False within seconds, naming the hang, and True again once it answers.
func TestHungClusterIsReportedWithinSeconds(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, cptest.Config())
	ctx := context.Background()
	rts := cl.KubernetesRuntimes()
	rt, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "paused"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: cptest.Kubeconfig(t, cluster.Kubeconfig)}})
	require.NoError(t, err)
	rt, err = rts.WaitReconciled(cptest.Wait(t, time.Minute), rt.ID)
	require.NoError(t, err)
	require.Equal(t, api.ConditionTrue, connected(rt).Status)

	apiserver := apiserverPID(t, cluster.PID)
	t.Cleanup(func() { _ = syscall.Kill(apiserver, syscall.SIGCONT) }) // never leave it stopped
	require.NoError(t, syscall.Kill(apiserver, syscall.SIGSTOP))
	stopped := time.Now()

	t.Run("Connected turns False within seconds, saying the API server does not answer", func(t *testing.T) {
		var c *api.Condition
		await.True(t, 20*time.Second, func() bool {
			got, err := rts.Get(ctx, rt.ID)
			require.NoError(t, err)
			c = connected(got)
			return c != nil && c.Status == api.ConditionFalse
		}, "Connected still True 20s into the outage (probe every 5s, 3s each)")
		t.Logf("Connected=False %s after SIGSTOP: %s", time.Since(stopped).Round(100*time.Millisecond), c.Message)
		require.Equal(t, "APIServerUnreachable", c.Reason)
		require.Contains(t, c.Message, "no answer within")
	})

	// The rest of a 35s outage.
	// no signal: the outage's length is what is under test
	time.Sleep(time.Until(stopped.Add(35 * time.Second)))
	require.NoError(t, syscall.Kill(apiserver, syscall.SIGCONT))
	resumed := time.Now()

	t.Run("Connected turns True again within seconds of the server answering", func(t *testing.T) {
		var c *api.Condition
		await.True(t, 30*time.Second, func() bool {
			got, err := rts.Get(ctx, rt.ID)
			require.NoError(t, err)
			c = connected(got)
			return c != nil && c.Status == api.ConditionTrue && got.Status.Phase == api.PhaseReady
		}, "not Connected 30s after SIGCONT")
		t.Logf("Connected=True %s after SIGCONT", time.Since(resumed).Round(100*time.Millisecond))
	})
}
