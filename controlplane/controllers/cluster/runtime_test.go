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
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cluster"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

func TestKubeconfigRuntime(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t, kubesimtest.WithRegion("eu-west"), kubesimtest.WithNodes(3))
	_, cl := cptest.Start(t, cptest.Config())
	good := cptest.Kubeconfig(t, cluster.Kubeconfig)
	ctx := context.Background()
	rts := cl.KubernetesRuntimes()

	t.Run("a reachable cluster goes Ready with its nodes counted", func(t *testing.T) {
		rt, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "byo"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: good}})
		require.NoError(t, err)
		rt, err = rts.WaitReconciled(cptest.Wait(t, 30*time.Second), rt.ID)
		require.NoError(t, err)
		require.Equal(t, 3, rt.Status.NodesReady)
		require.Equal(t, 3, rt.Status.NodesTotal)
		require.Equal(t, "eu-west", rt.Status.Region)
		require.Equal(t, cluster.Endpoint, rt.Status.Endpoint)
		require.True(t, strings.HasPrefix(rt.Status.Version, "v1.31."), rt.Status.Version)
	})

	t.Run("an unreachable address is retried, not Failed, and says since when; fixing the spec brings it back", func(t *testing.T) {
		dead := strings.ReplaceAll(good, cluster.Endpoint, "https://127.0.0.1:1")
		require.NotEqual(t, good, dead)
		rt, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "dead"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: dead}})
		require.NoError(t, err)
		var got *api.KubernetesRuntime
		await.True(t, 30*time.Second, func() bool {
			got, err = rts.Get(ctx, rt.ID)
			require.NoError(t, err)
			return got.Status.ObservedGeneration == got.Generation && got.Status.Message != ""
		}, "condition")
		require.Equal(t, api.PhaseReconciling, got.Status.Phase, "connection refused is transient: %s", got.Status.Message)
		require.Contains(t, got.Status.Message, "127.0.0.1:1")
		require.Contains(t, got.Status.Message, "unreachable since")
		var connected *api.Condition
		for i := range got.Status.Conditions {
			if got.Status.Conditions[i].Type == "Connected" {
				connected = &got.Status.Conditions[i]
			}
		}
		require.NotNil(t, connected, "%+v", got.Status.Conditions)
		require.Equal(t, api.ConditionFalse, connected.Status)
		require.Equal(t, "APIServerUnreachable", connected.Reason)
		require.False(t, connected.LastTransitionTime.IsZero())

		// The controller retries the runtime and may write its status between a read and the update, which
		// makes the update's If-Match stale (a conflict): read again and retry, as a client of optimistic
		// concurrency does.
		var upd *api.KubernetesRuntime
		await.NoError(t, 30*time.Second, func(ctx context.Context) error {
			cur, err := rts.Get(ctx, rt.ID)
			if err != nil {
				return err
			}
			cur.Spec.Kubeconfig = good
			upd, err = rts.Update(ctx, cur)
			if err != nil && !api.IsConflict(err) {
				require.NoError(t, err, "only a stale resource version is retried")
			}
			return err
		})
		ready, err := rts.WaitReconciled(cptest.Wait(t, 60*time.Second), upd.ID)
		require.NoError(t, err)
		require.Equal(t, 3, ready.Status.NodesReady)
		require.Empty(t, ready.Status.Message)
	})

	t.Run("refused credentials fail fast, naming the address", func(t *testing.T) {
		cfg, err := clientcmd.Load([]byte(good))
		require.NoError(t, err)
		for name := range cfg.AuthInfos {
			cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "not-a-token"}
		}
		bad, err := clientcmd.Write(*cfg)
		require.NoError(t, err)
		rt, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "refused"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: string(bad)}})
		require.NoError(t, err)
		failed, err := rts.WaitReconciled(cptest.Wait(t, 30*time.Second), rt.ID)
		require.True(t, client.IsFailed(err), "want Failed, got %v", err)
		require.Contains(t, failed.Status.Message, cluster.Endpoint)
	})

	t.Run("a runtime with instances cannot be deleted without cascade", func(t *testing.T) {
		rt, err := rts.GetByName(ctx, "byo")
		require.NoError(t, err)
		def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
			Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
		require.NoError(t, err)
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web-eu"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		err = rts.Delete(ctx, rt.ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "want 409, got %v", err)
		var apiErr *api.Error
		require.ErrorAs(t, err, &apiErr)
		require.Len(t, apiErr.Dependents, 1)
		require.Equal(t, inst.ID, apiErr.Dependents[0].ID)
		require.Contains(t, err.Error(), `workload_instance "web-eu"`)
	})
}

func TestLocalRuntimeStartsAndRemovesItsCluster(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, cptest.Config())
	ctx := context.Background()
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "local"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: "us-east", Nodes: 2}})
	require.NoError(t, err)
	rt, err = cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 2*time.Minute), rt.ID)
	require.NoError(t, err)
	require.Equal(t, 2, rt.Status.NodesReady)
	require.Equal(t, "us-east", rt.Status.Region)
	dir := filepath.Join(a.DataDir(), "runtimes", rt.ID)
	require.FileExists(t, filepath.Join(dir, "kubeconfig"))

	t.Run("a local cluster whose process dies is noticed, recorded and restarted", func(t *testing.T) {
		pid := kubesimPID(t, dir)
		killed := time.Now()
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		await.True(t, 10*time.Second, func() bool {
			evs, err := cl.KubernetesRuntimes().Events(ctx, rt.ID)
			require.NoError(t, err)
			for _, e := range evs {
				if e.Reason == cluster.ReasonLocalClusterExited && e.Type == api.EventWarning {
					return true
				}
			}
			return false
		}, "the exit is recorded within seconds")
		noticed := time.Since(killed)
		await.True(t, 2*time.Minute, func() bool {
			p, ok := findKubesimPID(dir)
			if !ok || p == pid {
				return false
			}
			got, err := cl.KubernetesRuntimes().Get(ctx, rt.ID)
			require.NoError(t, err)
			return got.Status.Phase == api.PhaseReady && got.Status.NodesReady == 2
		}, "the cluster is started again")
		t.Logf("kubesim killed: event after %s, Ready again after %s", noticed.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	})

	require.NoError(t, cl.KubernetesRuntimes().Delete(cptest.Wait(t, time.Minute), rt.ID, client.DeleteOptions{Wait: true}))
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "local cluster data removed: %v", err)
}

// kubesimPID returns the pid of the kubesim process serving the data dir.
func kubesimPID(t *testing.T, dir string) int {
	t.Helper()
	pid, ok := findKubesimPID(dir)
	require.True(t, ok, "no kubesim process for %s", dir)
	return pid
}

func findKubesimPID(dir string) (int, bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 3 && filepath.Base(args[0]) == "kubesim" && args[1] == "run" && args[2] == "--data-dir" && args[3] == dir {
			return pid, true
		}
	}
	return 0, false
}
