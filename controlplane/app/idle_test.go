package app_test

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// apiRequests returns the API requests the app served so far, by "METHOD route".
func apiRequests(t *testing.T, a *app.App) map[string]uint64 {
	t.Helper()
	mfs, err := a.Registry.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "qleet_api_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["method"]+" "+labels["route"]] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// requestsBetween returns the requests of after that were not yet in before, sorted, with their counts.
func requestsBetween(before, after map[string]uint64) (uint64, string) {
	var total uint64
	var lines []string
	for k, n := range after {
		if d := n - before[k]; d > 0 {
			total += d
			lines = append(lines, fmt.Sprintf("%s ×%d", k, d))
		}
	}
	sort.Strings(lines)
	return total, strings.Join(lines, ", ")
}

// TestDriftIsPutBackFromWatchEvents checks that drift in the compute space is learned from the cluster's
// watch, not from a sweep: with the drift pass at its 10h default, a Deployment scaled by hand, a Service
// deleted by hand and a Service edited by hand are each put back within 2s.
func TestDriftIsPutBackFromWatchEvents(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{DriftInterval: reconcile.DefaultDriftInterval})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "drifting", sim.Kubeconfig)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadDefinitionSpec{Replicas: ptr(int32(2)), Containers: []api.Container{{
			Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 90*time.Second), inst.ID)
	require.NoError(t, err)
	ns := inst.Status.Namespace
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err, "the instance applied a Service for its port")
	require.Equal(t, api.KindWorkloadInstance, svc.Labels["qleetos.io/owner-kind"], "applied objects name their owner's kind")

	t.Run("a Deployment scaled by hand", func(t *testing.T) {
		patch := []byte(`{"spec":{"replicas":1}}`)
		_, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-scale"})
		require.NoError(t, err)
		await.True(t, 2*time.Second, func() bool {
			return *deployment(t, cs, ns, "web").Spec.Replicas == 2
		}, "the replicas are put back within 2s")
	})

	// Each drift is made on a settled instance: the correction of the one before, and the reconcile that
	// its own watch events ask for, are over, so that each subtest times one drift alone.
	settle := func() { time.Sleep(time.Second) }

	t.Run("a Service deleted by hand", func(t *testing.T) {
		settle()
		before, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
		await.True(t, 2*time.Second, func() bool {
			s, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false
			}
			require.NoError(t, err)
			return s.UID != before.UID
		}, "the Service is applied again within 2s")
	})

	t.Run("a Service selector edited by hand", func(t *testing.T) {
		settle()
		s, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		want := maps.Clone(s.Spec.Selector)
		require.NotEmpty(t, want)
		for k := range s.Spec.Selector {
			s.Spec.Selector[k] = "edited-by-hand"
		}
		_, err = cs.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		require.NoError(t, err)
		await.True(t, 2*time.Second, func() bool {
			s, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
			require.NoError(t, err)
			return maps.Equal(s.Spec.Selector, want)
		}, "the selector is put back within 2s")
	})

	t.Run("each correction is recorded as drift", func(t *testing.T) {
		await.True(t, 10*time.Second, func() bool {
			evs, err := cl.WorkloadInstances().Events(ctx, inst.ID)
			require.NoError(t, err)
			n := 0
			for _, e := range evs {
				if e.Reason == "DriftCorrected" {
					n++
				}
			}
			return n >= 2
		}, "DriftCorrected events")
	})
}

// TestIdleControlPlaneMakesNoCalls puts instances on a kubesim cluster, waits until every one is Ready
// and the control plane has settled, then counts what it asks of the API and of the cluster over an idle
// window: nothing but its watches. Every previous poll (the agents' runtime list, the resync passes,
// the cluster probe, waits on dependencies, a Ready database's 10 s look and a domain name's 5 s one)
// would show here.
func TestIdleControlPlaneMakesNoCalls(t *testing.T) {
	t.Parallel()
	const instances = 10
	window := 30 * time.Second
	if testing.Short() {
		window = 10 * time.Second
	}
	sim := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	a, cl := cptest.Start(t, app.Config{DriftInterval: reconcile.DefaultDriftInterval})
	ctx := context.Background()
	rt := readyRuntime(t, cl, "idle", sim.Kubeconfig)
	def, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "idle"},
		Spec: api.WorkloadDefinitionSpec{Replicas: ptr(int32(1)), Containers: []api.Container{{
			Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}}})
	require.NoError(t, err)
	var ids []string
	for i := range instances {
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: fmt.Sprintf("idle-%d", i)},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		ids = append(ids, inst.ID)
	}
	// A database that the first instance uses, and a domain name: each used to be looked at on a timer.
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "idle"}, Spec: api.DatabaseSpec{InstanceID: ids[0]}})
	require.NoError(t, err)
	zone, err := cl.DomainNames().Create(ctx, &api.DomainName{Meta: api.Meta{Name: "idle"}, Spec: api.DomainNameSpec{Zone: "idle.test"}})
	require.NoError(t, err)
	for _, id := range ids {
		_, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), id)
		require.NoError(t, err)
	}
	_, err = cl.WorkloadDefinitions().WaitReconciled(cptest.Wait(t, time.Minute), def.ID)
	require.NoError(t, err)
	_, err = cl.Databases().WaitReconciled(cptest.Wait(t, time.Minute), db.ID)
	require.NoError(t, err)
	_, err = cl.DomainNames().WaitReconciled(cptest.Wait(t, time.Minute), zone.ID)
	require.NoError(t, err)

	// Settled: a few seconds in which neither the API nor the cluster is asked anything (the last
	// reconciles' passes run once more and find nothing to do).
	quiet := 3 * time.Second
	await.Explained(t, time.Minute, func() (bool, string) {
		apiBefore, kubeBefore := apiRequests(t, a), a.ClusterRequests()
		// no signal: a quiet spell is what is awaited
		time.Sleep(quiet)
		n, which := requestsBetween(apiBefore, apiRequests(t, a))
		calls := a.ClusterRequests().Calls - kubeBefore.Calls
		return n == 0 && calls == 0, fmt.Sprintf("in the last %s: %d API requests (%s), %d cluster calls", quiet, n, which, calls)
	})

	apiBefore, kubeBefore := apiRequests(t, a), a.ClusterRequests()
	// no signal: this is the idle window under test; nothing happens in it by design
	time.Sleep(window)
	apiN, which := requestsBetween(apiBefore, apiRequests(t, a))
	kubeAfter := a.ClusterRequests()
	t.Logf("idle %s with %d Ready instances, a database and a domain name: %d API requests (%s); %d cluster calls, %d new watches",
		window, instances, apiN, which, kubeAfter.Calls-kubeBefore.Calls, kubeAfter.Watches-kubeBefore.Watches)
	require.Zero(t, apiN, "API requests at rest: %s", which)
	require.Zero(t, kubeAfter.Calls-kubeBefore.Calls, "cluster calls at rest")

	t.Run("a change still gets through: a Service deleted by hand comes back", func(t *testing.T) {
		cs := clientset(t, sim.Kubeconfig)
		inst, err := cl.WorkloadInstances().Get(ctx, ids[0])
		require.NoError(t, err)
		require.NoError(t, cs.CoreV1().Services(inst.Status.Namespace).Delete(ctx, inst.Name, metav1.DeleteOptions{}))
		await.True(t, 10*time.Second, func() bool {
			_, err := cs.CoreV1().Services(inst.Status.Namespace).Get(ctx, inst.Name, metav1.GetOptions{})
			return err == nil
		}, "the Service is back")
	})

	t.Run("the database's StatefulSet deleted by hand comes back, told by the watch", func(t *testing.T) {
		cs := clientset(t, sim.Kubeconfig)
		require.NoError(t, cs.AppsV1().StatefulSets("qleet-db-idle").Delete(ctx, "db", metav1.DeleteOptions{}))
		await.True(t, 10*time.Second, func() bool {
			_, err := cs.AppsV1().StatefulSets("qleet-db-idle").Get(ctx, "db", metav1.GetOptions{})
			return err == nil
		}, "the StatefulSet is back")
	})
}
