package kube_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// hungServer listens on loopback and accepts every connection, then never reads or answers: an API
// server that hangs (stopped, wedged, or behind a black-holing proxy) looks like this at the socket.
func hungServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func kubeconfigFor(addr string) string {
	return `apiVersion: v1
kind: Config
current-context: hung
clusters:
- name: hung
  cluster: {server: "https://` + addr + `", insecure-skip-tls-verify: true}
contexts:
- name: hung
  context: {cluster: hung, user: hung}
users:
- name: hung
  user: {token: abc}
`
}

func TestHungAPIServer(t *testing.T) {
	t.Parallel()
	addr := hungServer(t)
	type report struct {
		id  string
		err error
	}
	reports := make(chan report, 16)
	// A request timeout far beyond the test's waits: whatever ends a call here is the probe.
	conn := kube.NewConnector(kube.ConnectorConfig{Timeout: 10 * time.Minute,
		OnReachability: func(id string, err error) { reports <- report{id, err} }})
	t.Cleanup(conn.Close)
	rt := &api.KubernetesRuntime{Meta: api.Meta{ID: "rt-hung", Name: "hung"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: kubeconfigFor(addr)}}
	cl, err := conn.Connect(context.Background(), rt)
	require.NoError(t, err)

	// A call made before anything is known about the server: it is under way when the probe gives up.
	inFlight := make(chan error, 1)
	go func() {
		_, err := cl.Clientset.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		inFlight <- err
	}()

	t.Run("the probe finds it unreachable within its timeout, and tells whoever listens", func(t *testing.T) {
		select {
		case r := <-reports:
			require.Equal(t, "rt-hung", r.id)
			require.ErrorIs(t, r.err, kube.ErrUnreachable)
			require.Contains(t, r.err.Error(), addr)
			require.Contains(t, r.err.Error(), "no answer within 3s")
		case <-time.After(30 * time.Second):
			t.Fatal("no reachability report within 30s (probe every 5s, each bounded by 3s, twice in a row)")
		}
		require.ErrorIs(t, cl.Reachable(), kube.ErrUnreachable)
	})

	t.Run("a call under way is cancelled rather than waiting out its 10m timeout", func(t *testing.T) {
		select {
		case err := <-inFlight:
			require.ErrorIs(t, err, kube.ErrUnreachable)
			require.True(t, kube.Transient(err), "%v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the call under way is still blocked")
		}
	})

	t.Run("later calls fail at once, as transient", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cl.Clientset.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		require.ErrorIs(t, err, kube.ErrUnreachable)
		require.NoError(t, ctx.Err(), "refused at once, not at the deadline")
		require.True(t, kube.Transient(err))
		var ue *kube.UnreachableError
		require.True(t, errors.As(err, &ue))
		require.False(t, ue.Since.IsZero())
	})

	t.Run("a probe asked for directly is bounded by the probe timeout too", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cl.Probe(ctx)
		require.Error(t, err)
		require.NoError(t, ctx.Err(), "the probe gave up by itself")
	})
}
