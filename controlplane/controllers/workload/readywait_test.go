package workload_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/workload"
)

func TestTheReconcileThatAppliesWaitsBrieflyForReadiness(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	waiting := func(wait time.Duration) *workload.InstanceReconciler {
		return &workload.InstanceReconciler{Client: e.ctrl, Connector: e.inst.Connector, Renderer: e.inst.Renderer, PollInterval: time.Second, ReadyWait: wait}
	}

	// First, and alone: it also fills the cluster's cache, so that later applies are quick enough to wait.
	t.Run("a quick rollout ends Ready in the reconcile that applied it, with no requeue", func(t *testing.T) {
		inst := e.instance(t, "quick", e.definition(t, "quick", webSpec()), nil)
		res, err := waiting(time.Minute).Reconcile(ctx, inst)
		require.NoError(t, err)
		require.Zero(t, res.RequeueAfter, "the applying reconcile saw its Deployment ready: %s", inst.Status.Message)
		require.EqualValues(t, 3, inst.Status.AvailableReplicas)
		for _, o := range inst.Status.Objects {
			require.True(t, o.Ready, "%+v", o)
		}
	})

	t.Run("a rollout that cannot become ready ends the wait at its bound and requeues", func(t *testing.T) {
		t.Parallel()
		spec := webSpec()
		spec.Containers[0].Resources = &api.Resources{Requests: api.ResourceList{CPU: "100000", Memory: "32Mi"}} // fits no node
		inst := e.instance(t, "stuck", e.definition(t, "stuck", spec), nil)
		start := time.Now()
		res, err := waiting(4*time.Second).Reconcile(ctx, inst)
		took := time.Since(start)
		require.NoError(t, err)
		require.Positive(t, res.RequeueAfter, "not ready: polled again")
		require.GreaterOrEqual(t, took, 4*time.Second, "it waited")
		require.Less(t, took, 20*time.Second, "it did not wait past its bound by much")
		require.Contains(t, inst.Status.Message, "not ready")

		// The next reconcile applies nothing (just applied), so it reads health and does not wait.
		start = time.Now()
		res, err = waiting(time.Minute).Reconcile(ctx, inst)
		require.NoError(t, err)
		require.Positive(t, res.RequeueAfter)
		require.Less(t, time.Since(start), 30*time.Second, "a reconcile that applied nothing does not wait")
	})

	t.Run("no wait when ReadyWait is negative", func(t *testing.T) {
		t.Parallel()
		inst := e.instance(t, "nowait", e.definition(t, "nowait", webSpec()), nil)
		res, err := waiting(-1).Reconcile(ctx, inst)
		require.NoError(t, err)
		require.Positive(t, res.RequeueAfter, "the Deployment cannot be Available the moment it is applied")
	})
}
