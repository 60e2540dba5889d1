package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
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
)

func runtimeSpec(kubeconfig string) api.KubernetesRuntimeSpec {
	return api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: kubeconfig}
}

func TestAdminTokenIsWrittenOnFirstStartWithMode0600(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, cptest.Config())
	info, err := os.Stat(filepath.Join(a.DataDir(), "admin.token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	_, err = cl.KubernetesRuntimes().List(context.Background(), client.ListOptions{})
	require.NoError(t, err, "the admin token authenticates")
}

func TestStopNATSWhileWritesContinue(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t)
	kc := cptest.Kubeconfig(t, cluster.Kubeconfig)
	a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Hour, DriftInterval: time.Hour})
	ctx := context.Background()
	rts := cl.KubernetesRuntimes()

	// Before the outage: the pipeline works.
	first, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "before"}, Spec: runtimeSpec(kc)})
	require.NoError(t, err)
	_, err = rts.WaitReconciled(cptest.Wait(t, 30*time.Second), first.ID)
	require.NoError(t, err)

	outage := 10 * time.Second
	if testing.Short() {
		outage = 2 * time.Second
	}
	readyz := func() int {
		resp, err := http.Get(a.Endpoint + "/readyz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, readyz())
	a.Broker.Embedded().Stop()
	await.True(t, 10*time.Second, func() bool { return readyz() == http.StatusServiceUnavailable }, "/readyz reflects the broker the relay and the controllers need")
	var ids []string
	deadline := time.Now().Add(outage)
	for i := 0; time.Now().Before(deadline); i++ {
		obj, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: fmt.Sprintf("during-%d", i)}, Spec: runtimeSpec(kc)})
		require.NoError(t, err, "the API keeps accepting writes while NATS is down")
		ids = append(ids, obj.ID)
		// no signal: paces the writes across the NATS outage, which is the point
		time.Sleep(250 * time.Millisecond)
	}
	pending, _, err := a.Store.OutboxStats(ctx)
	require.NoError(t, err)
	require.Positive(t, pending, "writes wait in the outbox while NATS is down")
	require.NoError(t, a.Broker.Embedded().Start(ctx))
	await.True(t, 30*time.Second, func() bool { return readyz() == http.StatusOK }, "ready again")

	// Resync is an hour away: only the outbox can deliver these.
	for _, id := range ids {
		obj, err := rts.WaitReconciled(cptest.Wait(t, 60*time.Second), id)
		require.NoError(t, err)
		require.Equal(t, 3, obj.Status.NodesReady)
	}
	t.Logf("%d writes acknowledged during a %s NATS outage were all reconciled afterwards", len(ids), outage)
}

func TestRestartLosesNothing(t *testing.T) {
	t.Parallel()
	cluster := kubesimtest.Start(t)
	kc := cptest.Kubeconfig(t, cluster.Kubeconfig)
	dir := t.TempDir()
	ctx := context.Background()

	a1, err := app.Start(ctx, app.Config{DataDir: dir, Listen: "127.0.0.1:0", API: true, Controllers: true, Logger: cptest.Logger()})
	require.NoError(t, err)
	cl1, err := a1.Client()
	require.NoError(t, err)
	ready, err := cl1.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "ready"}, Spec: runtimeSpec(kc)})
	require.NoError(t, err)
	_, err = cl1.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 30*time.Second), ready.ID)
	require.NoError(t, err)
	// Written just before the stop: it may or may not have been reconciled yet.
	late, err := cl1.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "late"}, Spec: runtimeSpec(kc)})
	require.NoError(t, err)
	token := a1.AdminToken
	a1.Close(ctx)

	a2, err := app.Start(ctx, app.Config{DataDir: dir, Listen: "127.0.0.1:0", API: true, Controllers: true, Logger: cptest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { a2.Close(context.Background()) })
	require.Equal(t, token, a2.AdminToken, "the admin token survives a restart")
	cl2, err := a2.Client()
	require.NoError(t, err)
	for _, id := range []string{ready.ID, late.ID} {
		obj, err := cl2.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 60*time.Second), id)
		require.NoError(t, err)
		require.Equal(t, 3, obj.Status.NodesReady)
	}
	list, err := cl2.KubernetesRuntimes().List(ctx, client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
}

func TestServesTLSBeyondLoopback(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, app.Config{Listen: "0.0.0.0:0", Controllers: true, API: true, TLSSANs: []string{"qleet.example.com", "10.9.8.7"}})
	require.True(t, strings.HasPrefix(a.Endpoint, "https://"), a.Endpoint)
	require.FileExists(t, filepath.Join(a.DataDir(), "tls.crt"))
	_, err := cl.KubernetesRuntimes().List(context.Background(), client.ListOptions{})
	require.NoError(t, err, "a client trusting tls.crt connects")
	plain, err := client.New(a.Endpoint, client.WithToken(a.AdminToken))
	require.NoError(t, err)
	_, err = plain.KubernetesRuntimes().List(context.Background(), client.ListOptions{})
	require.Error(t, err, "a client that does not trust the certificate is refused")

	t.Run("the certificate covers the host's addresses and names and the --tls-san extras", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(a.DataDir(), "tls.crt"))
		require.NoError(t, err)
		block, _ := pem.Decode(data)
		require.NotNil(t, block)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		names := []string{"localhost", "qleet.example.com", "127.0.0.1", "10.9.8.7"}
		if h, err := os.Hostname(); err == nil {
			names = append(names, h)
		}
		addrs, err := net.InterfaceAddrs()
		require.NoError(t, err)
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				names = append(names, n.IP.String())
			}
		}
		for _, n := range names {
			require.NoError(t, cert.VerifyHostname(n), "the certificate covers %s", n)
		}
	})

	t.Run("metrics need a token beyond loopback", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only the status code is read
		resp, err := hc.Get(a.Endpoint + "/metrics")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		req, err := http.NewRequest(http.MethodGet, a.Endpoint+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+a.AdminToken)
		resp, err = hc.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})
}

// A part that fails ends Run with its error (and /readyz says so first), instead of the process serving on
// half broken.
func TestRunEndsWhenAPartFails(t *testing.T) {
	t.Parallel()
	a, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", API: true, Controllers: true, Logger: cptest.Logger()})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	// The API server's listener goes away under it: Serve returns an error.
	app.BreakListenerForTest(a)
	select {
	case err := <-done:
		require.Error(t, err)
		require.Contains(t, err.Error(), "api server")
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end when the API server failed")
	}
}
