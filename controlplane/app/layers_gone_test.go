package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// TestUnneededLayersGoWithinTheGrace: with the production intervals (resync 30s, drift 60s, runtime
// recheck 30s), a support service that nothing needs is removed within the owner grace plus 10s of
// its last gateway's going, and a runtime provisioned from a profile within the owner grace plus 10s
// of the profile's deletion (terraform destroy's order: gateway, instance, profile), its support
// services with it. Removal is driven by the notifications of the consumers' going, not by the
// resync passes: those come every 30s and would add up to a minute per layer.
func TestUnneededLayersGoWithinTheGrace(t *testing.T) {
	t.Parallel()
	const grace, slack = 15 * time.Second, 10 * time.Second
	_, cl := cptest.Start(t, app.Config{ResyncInterval: 30 * time.Second, DriftInterval: time.Minute, OwnerGrace: grace})
	ctx := context.Background()
	prof, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "edge"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west"}, Nodes: 1}})
	require.NoError(t, err)
	def := webDefinition(t, cl, "web", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"}}}})
	require.NoError(t, err)
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 3*time.Minute), inst.ID)
	require.NoError(t, err)
	require.Len(t, inst.Status.Placements, 1)
	rtID := inst.Status.Placements[0].RuntimeID
	gateway := func(name string) *api.Gateway {
		t.Helper()
		gw, err := cl.Gateways().Create(ctx, &api.Gateway{Meta: api.Meta{Name: name},
			Spec: api.GatewaySpec{InstanceID: inst.ID, Hosts: []string{name + ".example.test"}}})
		require.NoError(t, err)
		_, err = cl.Gateways().WaitReconciled(cptest.Wait(t, 3*time.Minute), gw.ID)
		require.NoError(t, err)
		on := supportServicesOn(t, cl, rtID)
		require.Len(t, on[api.SupportIngress], 1)
		require.Len(t, on[api.SupportCertManager], 1)
		return gw
	}
	// gone waits for cond, up to far longer than the bound, and returns how long it took, so that a
	// slow removal is measured before it fails.
	gone := func(since time.Time, what string, cond func() bool) time.Duration {
		t.Helper()
		await.True(t, 5*time.Minute, cond, "%s removed", what)
		took := time.Since(since)
		t.Logf("%s removed %s after nothing needed it (owner grace %s)", what, took.Round(100*time.Millisecond), grace)
		require.GreaterOrEqual(t, took, grace, "%s: not before the grace", what)
		require.LessOrEqual(t, took, grace+slack, "%s: within the grace plus %s", what, slack)
		return took
	}
	noSupport := func() bool {
		on := supportServicesOn(t, cl, rtID)
		return len(on[api.SupportIngress]) == 0 && len(on[api.SupportCertManager]) == 0
	}

	t.Run("support services go within the grace after their last gateway", func(t *testing.T) {
		gw := gateway("web")
		require.NoError(t, cl.Gateways().Delete(cptest.Wait(t, time.Minute), gw.ID, client.DeleteOptions{Wait: true}))
		gone(time.Now(), "support services", noSupport)
		rt, err := cl.KubernetesRuntimes().Get(ctx, rtID)
		require.NoError(t, err, "the instance still runs there")
		require.Nil(t, rt.DeletionRequestedAt)
	})

	t.Run("a provisioned runtime goes within the grace after its profile, with its support services", func(t *testing.T) {
		gw := gateway("again")
		require.NoError(t, cl.Gateways().Delete(cptest.Wait(t, time.Minute), gw.ID, client.DeleteOptions{Wait: true}))
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), inst.ID, client.DeleteOptions{Wait: true}))
		require.NoError(t, cl.RuntimeProfiles().Delete(cptest.Wait(t, time.Minute), prof.ID, client.DeleteOptions{Wait: true}))
		_, err := cl.KubernetesRuntimes().Get(ctx, rtID)
		require.NoError(t, err, "not before the grace")
		gone(time.Now(), "the runtime", func() bool {
			_, err := cl.KubernetesRuntimes().Get(ctx, rtID)
			return api.IsNotFound(err)
		})
		require.True(t, noSupport(), "its support services went first")
	})
}
