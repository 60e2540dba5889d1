package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestDeletingWhenTheClusterIsGone: an instance whose cluster died can still be deleted, by orphaning its
// objects; the API offers that once the cleanup has waited the grace; and a cascading delete of the dead
// runtime completes instead of waiting on its instances forever.
func TestDeletingWhenTheClusterIsGone(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("doomed"))
	_, cl := cptest.Start(t, app.Config{CleanupGrace: 2 * time.Second, ResyncInterval: time.Second})
	ctx := context.Background()
	rt := readyRuntime(t, cl, "doomed", sim.Kubeconfig)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	var insts []*api.WorkloadInstance
	for _, name := range []string{"web-a", "web-b", "web-c"} {
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
		require.NoError(t, err)
		insts = append(insts, inst)
	}

	t.Run("with the cluster healthy, deleting an instance removes its objects from the cluster", func(t *testing.T) {
		cs := clientset(t, sim.Kubeconfig)
		c := insts[2]
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), c.ID, client.DeleteOptions{Wait: true}))
		_, err := cs.AppsV1().Deployments("web-c").Get(ctx, "web-c", metav1.GetOptions{})
		require.Error(t, err, "its objects are gone from the cluster")
	})

	require.NoError(t, sim.Stop(ctx))

	t.Run("the deletion waits, then says it cannot finish and offers orphaning", func(t *testing.T) {
		a := insts[0]
		require.NoError(t, cl.WorkloadInstances().Delete(ctx, a.ID, client.DeleteOptions{}))
		var got *api.WorkloadInstance
		await.True(t, time.Minute, func() bool {
			got, err = cl.WorkloadInstances().Get(ctx, a.ID)
			require.NoError(t, err)
			for _, c := range got.Status.Conditions {
				if c.Type == api.ConditionCleanupBlocked && c.Status == api.ConditionTrue {
					return true
				}
			}
			return false
		}, "a CleanupBlocked condition appears after the grace")
		require.Equal(t, api.PhaseDeleting, got.Status.Phase)
		msg := ""
		for _, c := range got.Status.Conditions {
			if c.Type == api.ConditionCleanupBlocked {
				msg = c.Message
			}
		}
		require.Contains(t, msg, "?orphan=true")
		require.Contains(t, msg, "Deployment/web-a/web-a", "it names what would be left behind")

		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), a.ID, client.DeleteOptions{Orphan: true, Wait: true}))
	})

	t.Run("a cascading delete of the dead runtime with orphan completes", func(t *testing.T) {
		require.NoError(t, cl.KubernetesRuntimes().Delete(cptest.Wait(t, time.Minute), rt.ID, client.DeleteOptions{Cascade: true, Orphan: true, Wait: true}))
		_, err := cl.WorkloadInstances().Get(ctx, insts[1].ID)
		require.True(t, api.IsNotFound(err), "the instance went with it: %v", err)
		_, err = cl.KubernetesRuntimes().Get(ctx, rt.ID)
		require.True(t, api.IsNotFound(err), "the runtime is gone: %v", err)
	})
}
