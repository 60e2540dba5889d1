package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
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

	api, cl := cptest.Start(t, app.Config{API: true, DatabaseURL: pgtest.URL(t)})
	token, err := os.ReadFile(filepath.Join(api.DataDir(), "controller.token"))
	require.NoError(t, err)
	for i := range 2 {
		c, err := app.Start(ctx, app.Config{
			Controllers: true, DataDir: t.TempDir(), NATSURL: api.Broker.ClientURL(),
			APIEndpoint: api.Endpoint, ControllerToken: strings.TrimSpace(string(token)),
			Logger: cptest.Logger().With("replica", i),
		})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(context.Background()) })
	}

	var ids []string
	for i := range 6 {
		rt, err := cl.KubernetesRuntimes().Create(ctx, &client.KubernetesRuntime{Meta: client.Meta{Name: fmt.Sprintf("rt-%d", i)}, Spec: runtimeSpec(kc)})
		require.NoError(t, err)
		ids = append(ids, rt.ID)
	}
	for _, id := range ids {
		rt, err := cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 60*time.Second), id)
		require.NoError(t, err)
		require.Equal(t, 3, rt.Status.NodesReady)
	}

	t.Run("a controller-only process cannot serve local runtimes and says so", func(t *testing.T) {
		rt, err := cl.KubernetesRuntimes().Create(ctx, &client.KubernetesRuntime{Meta: client.Meta{Name: "local"},
			Spec: client.KubernetesRuntimeSpec{Provider: client.ProviderLocal}})
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
