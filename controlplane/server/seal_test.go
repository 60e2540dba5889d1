package server_test

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

const sealKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
users:
- name: u
  user:
    token: super-secret-token
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`

func TestWriteOnlyFieldsAreEncryptedAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: filepath.Join(t.TempDir(), "q.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	srv, err := server.New(server.Config{Store: st, SecretKey: key})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tok, _ := server.NewToken()
	require.NoError(t, st.CreateToken(ctx, &store.Token{Hash: server.HashToken(tok), Name: "a", Role: server.RoleAdmin}))
	cl, err := client.New(hs.URL, client.WithToken(tok))
	require.NoError(t, err)

	ctrlTok, _ := server.NewToken()
	require.NoError(t, st.CreateToken(ctx, &store.Token{Hash: server.HashToken(ctrlTok), Name: "c", Role: server.RoleController}))
	ctrl, err := client.New(hs.URL, client.WithToken(ctrlTok))
	require.NoError(t, err)

	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "byo"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: sealKubeconfig}})
	require.NoError(t, err)
	require.Empty(t, rt.Spec.Kubeconfig, "not even admin reads it back")
	rt, err = ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
	require.NoError(t, err)
	require.Equal(t, sealKubeconfig, rt.Spec.Kubeconfig, "the controller role reads the plain value")

	raw, err := st.Get(ctx, api.KindKubernetesRuntime, rt.ID)
	require.NoError(t, err)
	require.NotContains(t, string(raw.Spec), "super-secret-token", "the database holds ciphertext")
	require.Contains(t, string(raw.Spec), "enc:v2:")

	// Re-sending the unchanged secret is not a spec change.
	again, err := cl.KubernetesRuntimes().Update(ctx, rt)
	require.NoError(t, err)
	require.Equal(t, rt.Generation, again.Generation)

	got, err := ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
	require.NoError(t, err)
	require.Equal(t, sealKubeconfig, got.Spec.Kubeconfig)

	// A server with another key cannot read it, and says why.
	other := make([]byte, 32)
	_, _ = rand.Read(other)
	srv2, err := server.New(server.Config{Store: st, SecretKey: other})
	require.NoError(t, err)
	hs2 := httptest.NewServer(srv2)
	t.Cleanup(hs2.Close)
	cl2, err := client.New(hs2.URL, client.WithToken(ctrlTok))
	require.NoError(t, err)
	_, err = cl2.KubernetesRuntimes().Get(ctx, rt.ID)
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), "super-secret-token"))
}
