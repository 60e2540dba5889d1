package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// TestOwnedObjectsAreCollectedWhenTheirOwnersAreGone: an object created for owners goes a grace period
// after the last of them, unless something depends on it; an object a user declared never goes.
func TestOwnedObjectsAreCollectedWhenTheirOwnersAreGone(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	defs := b.client.WorkloadDefinitions()
	b.run(t, recFunc(func(context.Context, *defObj) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		reconcile.Config{ResyncInterval: 50 * time.Millisecond, DriftInterval: 50 * time.Millisecond, OwnerGrace: 300 * time.Millisecond})

	owner := b.createDef(t, "owner")
	owned, err := defs.Create(ctx, &defObj{Meta: api.Meta{Name: "owned", Owners: []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: owner.ID}}},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: owner.ID, Name: "owner"}}, owned.Owners, "the owner is recorded, by name too")
	used, err := defs.Create(ctx, &defObj{Meta: api.Meta{Name: "used", Owners: []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: owner.ID}}},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	declared := b.createDef(t, "declared")
	rt, err := b.client.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"}, Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
	require.NoError(t, err)
	consumer, err := b.client.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "consumer"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: used.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)

	// While the owner exists nothing is collected, well past the grace.
	time.Sleep(time.Second) // no signal: a window in which the controller must not act, and nothing signals "did nothing"
	_, err = defs.Get(ctx, owned.ID)
	require.NoError(t, err, "an owned object stays while its owner does")

	start := time.Now()
	require.NoError(t, defs.Delete(ctx, owner.ID, client.DeleteOptions{Wait: true}))
	await.True(t, 10*time.Second, func() bool {
		_, err := defs.Get(ctx, owned.ID)
		return api.IsNotFound(err)
	}, "the owned object is collected after its owner goes")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "not before the grace")

	_, err = defs.Get(ctx, used.ID)
	require.NoError(t, err, "an owned object something depends on stays")
	_, err = defs.Get(ctx, declared.ID)
	require.NoError(t, err, "an object a user declared is never collected")

	t.Run("owners must exist, and cannot change", func(t *testing.T) {
		_, err := defs.Create(ctx, &defObj{Meta: api.Meta{Name: "bad-owner", Owners: []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: owner.ID}}},
			Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Contains(t, err.Error(), "not found")
		got, err := defs.Get(ctx, used.ID)
		require.NoError(t, err)
		got.Owners = []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: declared.ID}}
		_, err = defs.Update(ctx, got)
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Contains(t, err.Error(), "owners")
	})
	t.Run("the grace counts from when the last consumer goes, not from when the owner did", func(t *testing.T) {
		time.Sleep(500 * time.Millisecond) // no signal: time passing is the point, the owner has been gone longer than the grace
		gone := time.Now()
		// The consumer moves to another definition (no instance controller runs here to delete it).
		consumer.Spec.DefinitionID = declared.ID
		_, err := b.client.WorkloadInstances().Update(ctx, consumer)
		require.NoError(t, err)
		await.True(t, 10*time.Second, func() bool {
			_, err := defs.Get(ctx, used.ID)
			return api.IsNotFound(err)
		}, "the unused definition collected")
		require.GreaterOrEqual(t, time.Since(gone), 300*time.Millisecond, "not before the grace after the consumer went")
	})
}
