package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cluster"
	"github.com/qleetos/terraform-provider-qleet/controlplane/render"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// TestRetainedDataKeepsItsRuntime is examples/seeds' story: a database with retain on a runtime
// provisioned from a profile with reclaim_after is deleted, and so is its app. The runtime holds the
// retained volume and credentials, so it is in use: well past reclaim_after it is still there, the
// volume intact, and its status says what it holds and how to release it. Once the data is released,
// the runtime is reclaimed.
func TestRetainedDataKeepsItsRuntime(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: 2 * time.Second, RuntimeRecheck: time.Second})
	ctx := context.Background()
	const reclaimAfter = 3 * time.Second
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "seeds"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west"}, Nodes: 1, ReclaimAfter: reclaimAfter.String()}})
	require.NoError(t, err)
	def := webDefinition(t, cl, "app", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"}}}})
	require.NoError(t, err)
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "orders"}, Spec: api.DatabaseSpec{InstanceID: inst.ID, Retain: true}})
	require.NoError(t, err)
	got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 3*time.Minute), inst.ID)
	require.NoError(t, err)
	require.Len(t, got.Status.Placements, 1)
	rtID := got.Status.Placements[0].RuntimeID
	_, err = cl.Databases().WaitReconciled(cptest.Wait(t, 2*time.Minute), db.ID)
	require.NoError(t, err)
	cs := localCluster(t, a, rtID)
	ns := render.DatabaseNamespace("orders")
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
	require.NoError(t, err)

	// terraform destroy: the database (retained), then its app.
	cur, err := cl.Databases().Get(ctx, db.ID)
	require.NoError(t, err)
	cur.Spec.InstanceID = ""
	_, err = cl.Databases().Update(ctx, cur)
	require.NoError(t, err)
	require.NoError(t, cl.Databases().Delete(cptest.Wait(t, time.Minute), db.ID, client.DeleteOptions{Wait: true}))
	require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), inst.ID, client.DeleteOptions{Wait: true}))
	idle := time.Now()

	t.Run("past reclaim_after, the runtime that holds the retained volume is still there, and the volume too", func(t *testing.T) {
		require.Never(t, func() bool {
			rt, err := cl.KubernetesRuntimes().Get(ctx, rtID)
			return err != nil || rt.DeletionRequestedAt != nil
		}, 4*reclaimAfter, 250*time.Millisecond, "not reclaimed")
		require.Greater(t, time.Since(idle), 3*reclaimAfter)
		kept, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, pvc.UID, kept.UID, "the same volume")
		require.Equal(t, corev1.ClaimBound, kept.Status.Phase)
		require.Nil(t, kept.DeletionTimestamp)
		_, err = cs.CoreV1().Secrets(ns).Get(ctx, render.DatabaseCredentialsSecret, metav1.GetOptions{})
		require.NoError(t, err, "the credentials too")
	})

	t.Run("its status says what it holds and how to release it, and counts it as in use", func(t *testing.T) {
		rt, err := cl.KubernetesRuntimes().Get(ctx, rtID)
		require.NoError(t, err)
		require.Equal(t, 0, rt.Status.Placements)
		require.Nil(t, rt.Status.IdleSince, "in use: not idle")
		require.Len(t, rt.Status.Data, 1)
		d := rt.Status.Data[0]
		require.Equal(t, api.RuntimeData{Kind: api.KindDatabase, Name: "orders", Namespace: ns, Retained: true, Volumes: d.Volumes}, d)
		require.Len(t, d.Volumes, 1)
		require.True(t, strings.HasPrefix(d.Volumes[0], "data-db-0 ("), d.Volumes[0])
		var held *api.Condition
		for i := range rt.Status.Conditions {
			if rt.Status.Conditions[i].Type == cluster.ConditionHoldsData {
				held = &rt.Status.Conditions[i]
			}
		}
		require.NotNil(t, held, "%+v", rt.Status.Conditions)
		require.Equal(t, api.ConditionTrue, held.Status)
		require.Contains(t, held.Message, "not reclaimed")
		require.Contains(t, held.Message, `database "orders" deleted with retain`)
		require.Contains(t, held.Message, "delete namespace "+ns)
		require.Contains(t, held.Message, `create database "orders" again`)
		evs, err := cl.KubernetesRuntimes().Events(ctx, rtID)
		require.NoError(t, err)
		var told bool
		for _, e := range evs {
			require.NotEqual(t, cluster.ReasonReclaimed, e.Reason)
			told = told || e.Reason == cluster.ReasonReclaimHeld && strings.Contains(e.Message, `database "orders"`)
		}
		require.True(t, told, "an event says why it stays: %+v", evs)
	})

	t.Run("once the retained data is released, the runtime is reclaimed", func(t *testing.T) {
		require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		require.NoError(t, cl.KubernetesRuntimes().WaitGone(cptest.Wait(t, 2*time.Minute), rtID))
	})
}
