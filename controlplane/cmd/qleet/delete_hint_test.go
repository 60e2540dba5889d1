package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// deadKubeconfig is a kubeconfig whose API server address refuses connections.
const deadKubeconfig = `apiVersion: v1
kind: Config
current-context: dead
clusters:
- name: dead
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
contexts:
- name: dead
  context: {cluster: dead, user: dead}
users:
- name: dead
  user: {token: abc}
`

// TestDeleteSaysHowToOrphanWhenTheClusterDoesNotAnswer: `qleet delete` of an instance, or of a runtime,
// whose cluster does not answer says at once what blocks the deletion and the --orphan way out.
func TestDeleteSaysHowToOrphanWhenTheClusterDoesNotAnswer(t *testing.T) {
	t.Parallel()
	a, cl, def, env := cliServer(t)
	ctx := context.Background()
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "gone"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderKubeconfig, Kubeconfig: deadKubeconfig}})
	require.NoError(t, err)
	await.True(t, 30*time.Second, func() bool {
		got, err := cl.KubernetesRuntimes().Get(ctx, rt.ID)
		require.NoError(t, err)
		return disconnected(&got.Status.Status) != nil
	}, "the runtime's Connected condition turns False")
	_, err = cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "stranded"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	_ = a

	t.Run("deleting the runtime names the cluster and the cascading orphan", func(t *testing.T) {
		res := qleetIn(cptest.Wait(t, 30*time.Second), env, "delete", "runtime", "gone")
		require.NotEqual(t, 0, res.code, "it has a dependent: 409")
		require.Contains(t, res.stderr, `kubernetes_runtime "gone" does not answer`)
		require.Contains(t, res.stderr, "qleet delete runtime gone --cascade --orphan")
		require.Equal(t, 1, strings.Count(res.stderr, "--orphan"), "said once: %s", res.stderr)
	})

	t.Run("deleting the instance names its runtime and the orphan flag", func(t *testing.T) {
		res := qleetIn(cptest.Wait(t, 30*time.Second), env, "delete", "instance", "stranded")
		require.Equal(t, 0, res.code, res.stderr)
		require.Contains(t, res.stderr, `kubernetes_runtime "gone" does not answer`)
		require.Contains(t, res.stderr, "qleet delete instance stranded --orphan")
	})

	t.Run("with --orphan there is nothing to say", func(t *testing.T) {
		// An instance of its own: the one above may already be gone, which would say nothing either.
		_, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "stranded-too"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		res := qleetIn(cptest.Wait(t, 30*time.Second), env, "delete", "instance", "stranded-too", "--orphan")
		require.Equal(t, 0, res.code, res.stderr)
		require.NotContains(t, res.stderr, "does not answer")
	})
}
