package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// onceWaiting makes write, in another goroutine, once a request waits on id at srv: the write then
// tests what wakes the wait (the hub, or the poll for a write through another replica), not the wait's
// first read. If no wait starts within 30s it writes anyway, and the test's own checks fail.
func onceWaiting(srv *server.Server, id string, write func()) {
	go func() {
		_ = await.Until(context.Background(), 30*time.Second, func(context.Context) error {
			if srv.WaitersOn(id) == 0 {
				return await.ErrNotYet
			}
			return nil
		})
		write()
	}()
}

// finalizer plays a controller: it finalizes every object of the kinds whose deletion was requested.
func finalizer(t *testing.T, e *env, stop <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, kind := range []string{api.KindWorkloadInstance, api.KindWorkloadDefinition, api.KindKubernetesRuntime} {
				for obj, err := range e.ctrl.Raw(kind).All(ctx, client.ListOptions{}) {
					if err != nil {
						break
					}
					if obj.DeletionRequestedAt != nil {
						_ = e.ctrl.Raw(kind).Finalize(ctx, obj.ID)
					}
				}
			}
		}
	}()
}

func TestDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("an object with dependents is protected", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		rt, _, inst := e.world(t, "p")
		err := e.dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "%v", err)
		require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: inst.Name}}, asAPIErr(t, err).Dependents)
		got, err := e.dev.KubernetesRuntimes().Get(ctx, rt.ID)
		require.NoError(t, err)
		require.Nil(t, got.DeletionRequestedAt, "nothing written")
	})
	t.Run("orphan is recorded with the deletion, also on one under way, and bad flags write nothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		_, _, inst := e.world(t, "o")
		for _, q := range []string{"cascade=maybe", "orphan=maybe"} {
			code, data := e.raw(t, server.RoleDeveloper, http.MethodDelete, "/v1/workload_instances/"+inst.ID+"?"+q, "", nil)
			require.Equal(t, http.StatusBadRequest, code, string(data))
			require.Equal(t, strings.Split(q, "=")[0], apiErr(t, data).Field)
		}
		got, err := e.dev.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		require.Nil(t, got.DeletionRequestedAt, "nothing written")

		require.NoError(t, e.dev.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{}))
		got, err = e.dev.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		require.NotNil(t, got.DeletionRequestedAt)
		require.False(t, got.DeletionOrphan)
		require.NoError(t, e.dev.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{Orphan: true}))
		again, err := e.dev.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		require.True(t, again.DeletionOrphan, "a deletion under way turns into orphaning")
		require.Equal(t, *got.DeletionRequestedAt, *again.DeletionRequestedAt, "the deletion keeps its start")
		require.Greater(t, again.ResourceVersion, got.ResourceVersion)
	})
	t.Run("delete requests deletion, is idempotent, and finalize removes the object", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		_, _, inst := e.world(t, "d")
		code, body := e.raw(t, server.RoleDeveloper, http.MethodDelete, "/v1/workload_instances/"+inst.ID, "", nil)
		require.Equal(t, http.StatusAccepted, code, string(body))
		got, err := e.dev.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		require.NotNil(t, got.DeletionRequestedAt)
		code, _ = e.raw(t, server.RoleDeveloper, http.MethodDelete, "/v1/workload_instances/"+inst.ID, "", nil)
		require.Equal(t, http.StatusAccepted, code)

		_, err = e.dev.WorkloadInstances().Update(ctx, got)
		require.True(t, api.IsConflict(err), "a deleting object takes no spec writes: %v", err)

		require.NoError(t, e.ctrl.WorkloadInstances().Finalize(ctx, inst.ID))
		_, err = e.dev.WorkloadInstances().Get(ctx, inst.ID)
		require.True(t, api.IsNotFound(err))
	})
	t.Run("finalize without a delete request is a conflict", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("f"))
		require.NoError(t, err)
		err = e.ctrl.KubernetesRuntimes().Finalize(ctx, rt.ID)
		require.True(t, api.IsConflict(err), "%v", err)
	})
	t.Run("cascade deletes dependents first and waits for them", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		rt, def, inst := e.world(t, "c")
		inst2, err := e.dev.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "c-inst2"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		stop := make(chan struct{})
		defer close(stop)
		finalizer(t, e, stop)

		err = e.dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{Cascade: true, Wait: true})
		require.NoError(t, err)
		for _, id := range []string{inst.ID, inst2.ID} {
			_, err = e.dev.WorkloadInstances().Get(ctx, id)
			require.True(t, api.IsNotFound(err), "dependent %s is gone", id)
		}
		_, err = e.dev.KubernetesRuntimes().Get(ctx, rt.ID)
		require.True(t, api.IsNotFound(err))
		_, err = e.dev.WorkloadDefinitions().Get(ctx, def.ID)
		require.NoError(t, err, "objects the dependents referenced stay")
	})
	t.Run("wait=gone answers 404 once finalized", func(t *testing.T) {
		t.Parallel()
		e := setup(t, setupOpts{cfg: func(c *server.Config) { c.WaitPollInterval = time.Hour }})
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("g"))
		require.NoError(t, err)
		require.NoError(t, e.dev.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{}))
		onceWaiting(e.srv, rt.ID, func() { _ = e.ctrl.KubernetesRuntimes().Finalize(ctx, rt.ID) }) // the hub wakes it, not the poll
		start := time.Now()
		require.NoError(t, e.dev.KubernetesRuntimes().WaitGone(ctx, rt.ID))
		require.Less(t, time.Since(start), 10*time.Second)
	})
}

func TestStatusWrites(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("s"))
	require.NoError(t, err)
	ctrl := e.ctrl.KubernetesRuntimes()

	t.Run("a controller writes status without bumping generation", func(t *testing.T) {
		got, err := ctrl.UpdateStatus(ctx, rt.ID, rt.ResourceVersion, api.KubernetesRuntimeStatus{
			Status:   api.Status{Phase: api.PhaseReady, ObservedGeneration: rt.Generation, Message: "3/3 nodes ready"},
			Endpoint: "https://127.0.0.1:6443", NodesReady: 3, NodesTotal: 3,
		})
		require.NoError(t, err)
		require.Equal(t, rt.Generation, got.Generation)
		require.Equal(t, rt.ResourceVersion+1, got.ResourceVersion)
		require.Equal(t, 3, got.Status.NodesReady)
		require.True(t, api.Reconciled(got.Generation, &got.Status.Status))
	})
	t.Run("observed_generation may not exceed generation", func(t *testing.T) {
		_, err := ctrl.UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 7}})
		require.True(t, api.IsInvalid(err), "%v", err)
		require.Equal(t, "status.observed_generation", asAPIErr(t, err).Field)
	})
	for _, tc := range []struct{ name, body, field string }{
		{"unknown status field", `{"phase":"Ready","observed_generation":1,"nodes":3}`, "status.nodes"},
		{"wrong type", `{"phase":"Ready","observed_generation":"1"}`, "status.observed_generation"},
		{"unknown phase", `{"phase":"Happy","observed_generation":1}`, "status.phase"},
		{"bad condition status", `{"phase":"Ready","observed_generation":1,"conditions":[{"type":"Ready","status":"Yes","last_transition_time":"2024-01-01T00:00:00Z"}]}`, "status.conditions[0].status"},
		{"bad timestamp", `{"phase":"Ready","observed_generation":1,"conditions":[{"type":"Ready","status":"True","last_transition_time":"yesterday"}]}`, "status.conditions[0].last_transition_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := ctrl.Get(ctx, rt.ID)
			require.NoError(t, err)
			code, body := e.raw(t, server.RoleController, http.MethodPut, "/v1/kubernetes_runtimes/"+rt.ID+"/status", tc.body, nil)
			require.Equal(t, http.StatusBadRequest, code, string(body))
			require.Equal(t, tc.field, apiErr(t, body).Field)
			after, err := ctrl.Get(ctx, rt.ID)
			require.NoError(t, err)
			require.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing written")
		})
	}
	t.Run("developers may not write status", func(t *testing.T) {
		_, err := e.dev.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{})
		require.True(t, api.IsForbidden(err), "%v", err)
	})
}

func TestWaitReconciled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("returns when another goroutine writes a Ready status", func(t *testing.T) {
		t.Parallel()
		// With an hour-long fallback poll, only the in-process notification can end the wait early.
		e := setup(t, setupOpts{cfg: func(c *server.Config) { c.WaitPollInterval = time.Hour }})
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("w"))
		require.NoError(t, err)
		onceWaiting(e.srv, rt.ID, func() {
			_, _ = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReconciling, ObservedGeneration: 1}})
			_, _ = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 1}})
		})
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		start := time.Now()
		got, err := e.dev.KubernetesRuntimes().WaitReconciled(wctx, rt.ID)
		require.NoError(t, err)
		require.Equal(t, api.PhaseReady, got.Status.Phase)
		require.Less(t, time.Since(start), 20*time.Second, "returned because of the write, not the 30s server timeout")
	})
	t.Run("returns at once on Failed at the current generation", func(t *testing.T) {
		t.Parallel()
		e := setup(t, setupOpts{cfg: func(c *server.Config) { c.WaitPollInterval = time.Hour }})
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("f"))
		require.NoError(t, err)
		_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseFailed, ObservedGeneration: 1, Message: "no capacity"}})
		require.NoError(t, err)
		start := time.Now()
		_, err = e.dev.KubernetesRuntimes().WaitReconciled(ctx, rt.ID)
		require.True(t, client.IsFailed(err), "%v", err)
		require.Contains(t, err.Error(), "no capacity")
		require.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("a Ready status for an older generation does not count", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("o"))
		require.NoError(t, err)
		rt.Spec.Nodes = 4
		_, err = e.dev.KubernetesRuntimes().Update(ctx, rt)
		require.NoError(t, err)
		_, err = e.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 1}})
		require.NoError(t, err)
		code, body := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/"+rt.ID+"?wait=reconciled&timeout=200ms", "", nil)
		require.Equal(t, http.StatusOK, code, "the timeout answers with the current object")
		require.Contains(t, string(body), `"generation":2`)
		code, body = e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/"+rt.ID+"?wait=reconciled&timeout=0s", "", nil)
		require.Equal(t, http.StatusOK, code, string(body))
	})
	t.Run("sees writes through another API replica by polling", func(t *testing.T) {
		t.Parallel()
		a := setup(t, setupOpts{cfg: func(c *server.Config) { c.WaitPollInterval = 50 * time.Millisecond }})
		b := setup(t, setupOpts{st: a.store})
		rt, err := a.dev.KubernetesRuntimes().Create(ctx, localRuntime("r"))
		require.NoError(t, err)
		onceWaiting(a.srv, rt.ID, func() { // written through b: a's hub does not hear it, a's poll must see it
			_, _ = b.ctrl.KubernetesRuntimes().UpdateStatus(ctx, rt.ID, 0, api.KubernetesRuntimeStatus{Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: 1}})
		})
		start := time.Now()
		_, err = a.dev.KubernetesRuntimes().WaitReconciled(ctx, rt.ID)
		require.NoError(t, err)
		require.Less(t, time.Since(start), 10*time.Second)
	})
	t.Run("the fallback poll slows down while nothing changes", func(t *testing.T) {
		t.Parallel()
		st := &countingGets{Store: openSQLite(t)}
		e := setup(t, setupOpts{st: st, cfg: func(c *server.Config) { c.WaitPollInterval = 20 * time.Millisecond }})
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("slow"))
		require.NoError(t, err)
		before := st.gets.Load()
		code, _ := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/"+rt.ID+"?wait=reconciled&timeout=2s", "", nil)
		require.Equal(t, http.StatusOK, code)
		// A fixed 20ms poll reads about 100 times in 2s; doubling to 160ms reads 1 + 3 + about 12.
		reads := st.gets.Load() - before
		require.Greater(t, reads, int64(5), "it still polls")
		require.Less(t, reads, int64(30), "the poll backs off")
	})
	t.Run("bad wait parameters are 400s", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime("b"))
		require.NoError(t, err)
		for q, field := range map[string]string{"wait=soon": "wait", "wait=reconciled&timeout=10m": "timeout", "wait=gone&timeout=x": "timeout"} {
			code, body := e.raw(t, server.RoleViewer, http.MethodGet, "/v1/kubernetes_runtimes/"+rt.ID+"?"+q, "", nil)
			require.Equal(t, http.StatusBadRequest, code, q)
			require.Equal(t, field, apiErr(t, body).Field)
		}
	})
}

func TestRequestReconcileWritesAnOutboxRowAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	def, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "poke"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	before, _, err := e.store.OutboxStats(ctx)
	require.NoError(t, err)
	require.NoError(t, e.admin.WorkloadDefinitions().RequestReconcile(ctx, def.ID))
	after, _, err := e.store.OutboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, before+1, after)
	got, err := e.admin.WorkloadDefinitions().Get(ctx, def.ID)
	require.NoError(t, err)
	require.Equal(t, def.ResourceVersion, got.ResourceVersion, "nothing was written to the object")
	require.True(t, api.IsNotFound(e.admin.WorkloadDefinitions().RequestReconcile(ctx, "nope")))
}

func TestListByReferenceFindsADefinitionsInstances(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	spec := api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}
	web, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"}, Spec: spec})
	require.NoError(t, err)
	svc, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "api"}, Spec: spec})
	require.NoError(t, err)
	rt, err := e.admin.KubernetesRuntimes().Create(ctx, localRuntime("rt"))
	require.NoError(t, err)
	for name, def := range map[string]string{"web-1": web.ID, "web-2": web.ID, "api-1": svc.ID} {
		_, err := e.admin.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: name},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def, RuntimeID: rt.ID}})
		require.NoError(t, err)
	}
	var names []string
	for inst, err := range e.admin.WorkloadInstances().All(ctx, client.ListOptions{References: web.ID, Limit: 1}) {
		require.NoError(t, err)
		names = append(names, inst.Name)
	}
	require.ElementsMatch(t, []string{"web-1", "web-2"}, names, "paged one at a time")
}

// countingGets counts the store's Get calls.
type countingGets struct {
	store.Store
	gets atomic.Int64
}

func (c *countingGets) Get(ctx context.Context, kind, id string) (*store.Object, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, kind, id)
}

// TestGarbageDependentsDoNotBlockADelete: a runtime whose only dependents are support services a
// controller made for owners that are gone is deleted at once, taking them first; a declared support
// service, or one whose owner still exists, still blocks it.
func TestGarbageDependentsDoNotBlockADelete(t *testing.T) {
	t.Parallel()
	e := setup(t, setupOpts{cfg: func(c *server.Config) { c.CascadeTimeout = 20 * time.Second }})
	ctx := context.Background()
	rt, err := e.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "rt"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
	require.NoError(t, err)
	owner, err := e.admin.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "owner"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
	require.NoError(t, err)
	made, err := e.ctrl.SupportServices().Create(ctx, &api.SupportService{
		Meta: api.Meta{Name: "ingress-rt", Owners: []api.ObjectRef{{Kind: api.KindWorkloadDefinition, ID: owner.ID}}},
		Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportIngress}})
	require.NoError(t, err)

	err = e.admin.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{})
	require.True(t, api.IsConflict(err), "its owner still exists: %v", err)

	// The owner goes (being deleted is enough); nothing runs the support service's finalizer here, so
	// play the controller: finalize it once its deletion is requested.
	require.NoError(t, e.admin.WorkloadDefinitions().Delete(ctx, owner.ID, client.DeleteOptions{}))
	go func() {
		_ = await.Until(ctx, 10*time.Second, func(ctx context.Context) error {
			got, err := e.ctrl.SupportServices().Get(ctx, made.ID)
			if err != nil {
				return err
			}
			if got.DeletionRequestedAt == nil {
				return await.ErrNotYet
			}
			_ = e.ctrl.SupportServices().Finalize(ctx, made.ID)
			return nil
		})
	}()
	require.NoError(t, e.admin.KubernetesRuntimes().Delete(ctx, rt.ID, client.DeleteOptions{}))
	_, err = e.admin.SupportServices().Get(ctx, made.ID)
	require.True(t, api.IsNotFound(err), "the garbage went first: %v", err)
	got, err := e.admin.KubernetesRuntimes().Get(ctx, rt.ID)
	require.NoError(t, err)
	require.NotNil(t, got.DeletionRequestedAt)

	t.Run("a declared support service blocks", func(t *testing.T) {
		rt2, err := e.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "rt2"},
			Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal}})
		require.NoError(t, err)
		_, err = e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: "declared"},
			Spec: api.SupportServiceSpec{RuntimeID: rt2.ID, Type: api.SupportMetricsServer}})
		require.NoError(t, err)
		err = e.admin.KubernetesRuntimes().Delete(ctx, rt2.ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "%v", err)
	})
}
