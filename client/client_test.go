package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// apiClients starts a real API server on SQLite and returns a developer and a controller client.
func apiClients(t *testing.T) (dev, ctrl *client.Client) {
	t.Helper()
	srv := apitest.Start(t)
	return srv.Client(t, server.RoleDeveloper), srv.Client(t, server.RoleController)
}

func TestClientAgainstServer(t *testing.T) {
	t.Parallel()
	dev, ctrl := apiClients(t)
	ctx := context.Background()
	rt, err := dev.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "c1"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
	require.NoError(t, err)

	t.Run("WaitReconciled returns the reconciled object", func(t *testing.T) {
		go func() {
			// The race is benign: a write that lands before the wait starts is seen by the wait's first
			// read, which returns the same reconciled object.
			time.Sleep(50 * time.Millisecond) // no signal: the client cannot see the server's wait start
			_, _ = ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{
				Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: rt.Generation}, NodesReady: 3})
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
		raw, err := dev.Raw(api.KindKubernetesRuntime).Get(ctx, rt.ID)
		require.NoError(t, err)
		require.Equal(t, api.PhaseReady, client.CommonStatus(raw).Phase)
	})
	t.Run("Delete with Wait returns once the controller finalized", func(t *testing.T) {
		go func() { // finalizes once the delete has been requested
			_ = await.Until(ctx, 30*time.Second, func(ctx context.Context) error {
				if err := ctrl.KubernetesRuntimes().Finalize(ctx, rt.ID); err != nil && !api.IsNotFound(err) {
					return err
				}
				return nil
			})
		}()
		require.NoError(t, dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{Wait: true}))
		_, err := dev.KubernetesRuntimes().Get(ctx, rt.ID)
		require.True(t, api.IsNotFound(err))
		require.NoError(t, dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{}), "deleting a missing object is not an error")
	})
	t.Run("API errors come back typed", func(t *testing.T) {
		_, err := dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "i"}, Spec: api.WorkloadInstanceSpec{Namespace: "Not_A_Label"}})
		require.True(t, api.IsInvalid(err), "%v", err)
		var ae *api.Error
		require.ErrorAs(t, err, &ae)
		require.Len(t, ae.Fields, 2)
		_, err = dev.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{})
		require.True(t, api.IsForbidden(err), "a developer may not write status: %v", err)
	})
}

// A wait rides out a control plane that goes away and comes back (a restart, a deploy), instead of
// failing the Terraform apply or CLI command that waits.
func TestWaitsRideOutAControlPlaneRestart(t *testing.T) {
	t.Parallel()
	srv := apitest.Start(t)
	ctx := context.Background()
	ctrl := srv.Client(t, server.RoleController)
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)

	// A front door that can be shut (connection refused) and opened again on the same address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	serve := func(ln net.Listener) *http.Server {
		hs := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		return hs
	}
	front := serve(ln)
	t.Cleanup(func() { _ = front.Close() })
	tok, err := server.NewToken()
	require.NoError(t, err)
	require.NoError(t, srv.Store.CreateToken(ctx, &store.Token{Hash: server.HashToken(tok), Name: "dev", Role: server.RoleDeveloper}))
	dev, err := client.New("http://"+addr, client.WithToken(tok))
	require.NoError(t, err)

	rt, err := dev.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "restarts"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
	require.NoError(t, err)

	type result struct {
		obj *api.KubernetesRuntime
		err error
	}
	done := make(chan result, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		obj, err := dev.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
		done <- result{obj, err}
	}()

	require.NoError(t, front.Close()) // the control plane goes away: connections are refused
	_, err = dev.KubernetesRuntimes().Get(ctx, rt.ID)
	require.Error(t, err, "the front door is shut")
	_, err = ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{
		Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: rt.Generation}})
	require.NoError(t, err)
	select {
	case r := <-done:
		t.Fatalf("the wait ended while the control plane was away: %v", r.err)
	case <-time.After(time.Second):
	}
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	front = serve(ln)
	t.Cleanup(func() { _ = front.Close() })

	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, api.PhaseReady, r.obj.Status.Phase)
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not resume after the control plane came back")
	}
}
