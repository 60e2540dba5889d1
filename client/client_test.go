package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
)

// apiClients starts a real API server on SQLite and returns a developer and a controller client.
func apiClients(t *testing.T) (dev, ctrl *client.Client) {
	t.Helper()
	api := apitest.Start(t)
	return api.Client(t, server.RoleDeveloper), api.Client(t, server.RoleController)
}

func TestClientAgainstServer(t *testing.T) {
	t.Parallel()
	dev, ctrl := apiClients(t)
	ctx := context.Background()
	rt, err := dev.KubernetesRuntimes().Create(ctx, &client.KubernetesRuntime{Meta: client.Meta{Name: "c1"},
		Spec: client.KubernetesRuntimeSpec{Provider: client.ProviderLocal}})
	require.NoError(t, err)

	t.Run("WaitReconciled returns the reconciled object", func(t *testing.T) {
		go func() {
			time.Sleep(50 * time.Millisecond)
			_, _ = ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, client.KubernetesRuntimeStatus{
				Status: client.Status{Phase: client.PhaseReady, ObservedGeneration: rt.Generation}, NodesReady: 3})
		}()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, err := dev.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
		require.NoError(t, err)
		require.Equal(t, 3, got.Status.NodesReady)
	})
	t.Run("WaitReconciled honours the context deadline", func(t *testing.T) {
		cur, err := dev.KubernetesRuntimes().Get(ctx, rt.ID)
		require.NoError(t, err)
		cur.Spec.Nodes = 5 // a new generation, not reconciled yet
		_, err = dev.KubernetesRuntimes().Update(ctx, cur)
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		last, err := dev.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
		require.Error(t, err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		if last != nil { // the server's answer at its own timeout may win the race with ctx
			require.EqualValues(t, 2, last.Generation)
		}
	})
	t.Run("the raw client sees the same object", func(t *testing.T) {
		raw, err := dev.Raw(client.KindKubernetesRuntime).Get(ctx, rt.ID)
		require.NoError(t, err)
		require.Equal(t, client.PhaseReady, client.CommonStatus(raw).Phase)
	})
	t.Run("Delete with Wait returns once the controller finalized", func(t *testing.T) {
		go func() {
			for {
				if err := ctrl.KubernetesRuntimes().Finalize(ctx, rt.ID); err == nil || client.IsNotFound(err) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		require.NoError(t, dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{Wait: true}))
		_, err := dev.KubernetesRuntimes().Get(ctx, rt.ID)
		require.True(t, client.IsNotFound(err))
		require.NoError(t, dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{}), "deleting a missing object is not an error")
	})
	t.Run("API errors come back typed", func(t *testing.T) {
		_, err := dev.WorkloadInstances().Create(ctx, &client.WorkloadInstance{Meta: client.Meta{Name: "i"}})
		require.True(t, client.IsInvalid(err), "%v", err)
		var ae *client.Error
		require.ErrorAs(t, err, &ae)
		require.Len(t, ae.Fields, 2)
		_, err = ctrl.KubernetesRuntimes().Create(ctx, &client.KubernetesRuntime{Meta: client.Meta{Name: "x"}, Spec: client.KubernetesRuntimeSpec{Provider: "local"}})
		require.True(t, client.IsForbidden(err), "%v", err)
	})
}
