package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
)

// TestPostgresSmoke runs a subset of the API behaviour on PostgreSQL.
func TestPostgresSmoke(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{st: openPostgres(t), cfg: func(c *server.Config) { c.WaitPollInterval = time.Hour }})
	ctx := context.Background()
	rt, def, inst := e.world(t, "pg")

	t.Run("create, get, list with selector", func(t *testing.T) {
		got, err := e.viewer.WorkloadInstances().GetByName(ctx, inst.Name)
		require.NoError(t, err)
		require.Equal(t, inst.ID, got.ID)
		page, err := e.viewer.KubernetesRuntimes().List(ctx, client.ListOptions{LabelSelector: "env=test"})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
	})
	t.Run("stale If-Match is a conflict", func(t *testing.T) {
		stale := *def
		def.Spec.Replicas = nil
		_, err := e.dev.WorkloadDefinitions().Update(ctx, def)
		require.NoError(t, err)
		_, err = e.dev.WorkloadDefinitions().Update(ctx, &stale)
		require.True(t, api.IsConflict(err), "%v", err)
	})
	t.Run("validation names the field and writes nothing", func(t *testing.T) {
		code, body := e.raw(t, server.RoleDeveloper, http.MethodPost, "/v1/workload_instances",
			`{"name":"pg-bad","spec":{"definition_id":"`+def.ID+`","runtime_id":"nope"}}`, nil)
		require.Equal(t, http.StatusBadRequest, code)
		require.Equal(t, "spec.runtime_id", apiErr(t, body).Field)
		_, err := e.dev.WorkloadInstances().GetByName(ctx, "pg-bad")
		require.True(t, api.IsNotFound(err))
	})
	t.Run("wait=reconciled wakes on a status write", func(t *testing.T) {
		onceWaiting(e.srv, inst.ID, func() {
			_, _ = e.ctrl.WorkloadInstances().UpdateStatus(ctx, inst.ID, 0, api.WorkloadInstanceStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 1}})
		})
		start := time.Now()
		_, err := e.dev.WorkloadInstances().WaitReconciled(ctx, inst.ID)
		require.NoError(t, err)
		require.Less(t, time.Since(start), 20*time.Second)
	})
	t.Run("delete is protected, cascade removes dependents", func(t *testing.T) {
		err := e.dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "%v", err)
		stop := make(chan struct{})
		defer close(stop)
		finalizer(t, e, stop)
		require.NoError(t, e.dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{Cascade: true, Wait: true}))
		_, err = e.dev.WorkloadInstances().Get(ctx, inst.ID)
		require.True(t, api.IsNotFound(err))
	})
}
