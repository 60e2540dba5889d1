package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// TestScaleOut runs the API on PostgreSQL (as `qleet api` does) and two controller replicas in their own
// App instances (as `qleet controller` does), sharing NATS through its URL.
func TestScaleOut(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t)
	kc := cptest.Kubeconfig(t, cluster.Kubeconfig)
	ctx := context.Background()

	svc, cl := cptest.Start(t, app.Config{API: true, DatabaseURL: pgtest.URL(t)})
	token, err := os.ReadFile(filepath.Join(svc.DataDir(), "controller.token"))
	require.NoError(t, err)
	var replicas []*app.App
	for i := range 2 {
		c, err := app.Start(ctx, app.Config{
			Controllers: true, DataDir: t.TempDir(), NATSURL: svc.Broker.ClientURL(),
			APIEndpoint: svc.Endpoint, ControllerToken: strings.TrimSpace(string(token)),
			HealthListen: "127.0.0.1:0", Logger: cptest.Logger().With("replica", i),
		})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(context.Background()) })
		replicas = append(replicas, c)
	}

	var ids []string
	for i := range 6 {
		rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: fmt.Sprintf("rt-%d", i)}, Spec: runtimeSpec(kc)})
		require.NoError(t, err)
		ids = append(ids, rt.ID)
	}
	for _, id := range ids {
		rt, err := cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 60*time.Second), id)
		require.NoError(t, err)
		require.Equal(t, 3, rt.Status.NodesReady)
	}

	t.Run("a controller replica serves probes and its reconcile metrics", func(t *testing.T) {
		var all string
		for _, c := range replicas {
			for _, path := range []string{"/healthz", "/readyz"} {
				body, code := httpGet(t, c.HealthEndpoint+path)
				require.Equal(t, 200, code, "%s: %s", path, body)
			}
			body, code := httpGet(t, c.HealthEndpoint+"/metrics")
			require.Equal(t, 200, code)
			require.Contains(t, body, "process_resident_memory_bytes")
			all += body
		}
		// The runtimes' reconciles were shared between the replicas: each exports its own.
		require.Contains(t, all, `qleet_reconcile_deliveries_total{kind="kubernetes_runtime"}`)
		// Losing the broker fails the replica: both probes say so (`qleet controller` also exits).
		stopped, err := app.Start(ctx, app.Config{
			Controllers: true, DataDir: t.TempDir(), NATSURL: svc.Broker.ClientURL(),
			APIEndpoint: svc.Endpoint, ControllerToken: strings.TrimSpace(string(token)),
			HealthListen: "127.0.0.1:0", Logger: cptest.Logger().With("replica", "stopped"),
		})
		require.NoError(t, err)
		stopped.Broker.Conn().Close()
		for _, path := range []string{"/readyz", "/healthz"} {
			await.True(t, 10*time.Second, func() bool {
				body, code := httpGet(t, stopped.HealthEndpoint+path)
				return code == 503 && strings.Contains(body, "nats")
			}, "%s", path)
		}
		stopped.Close(context.Background())
	})

	t.Run("a controller-only process cannot serve local runtimes and says so", func(t *testing.T) {
		rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "local"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
		require.NoError(t, err)
		_, err = cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 30*time.Second), rt.ID)
		require.True(t, client.IsFailed(err), "%v", err)
		require.Contains(t, err.Error(), "qleet server")
	})

	t.Run("controller mode needs an endpoint and a token", func(t *testing.T) {
		_, err := app.Start(ctx, app.Config{Controllers: true, DataDir: t.TempDir()})
		require.ErrorContains(t, err, "--api-endpoint and --token")
	})
}

// httpGet returns the body and status code of a plain GET.
func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(cptest.Wait(t, 10*time.Second), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b), resp.StatusCode
}
