package app_test

import (
	"context"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// localCluster returns a clientset for a local runtime's kubesim cluster.
func localCluster(t *testing.T, a *app.App, runtimeID string) kubernetes.Interface {
	t.Helper()
	return clientset(t, filepath.Join(a.DataDir(), "runtimes", runtimeID, "kubeconfig"))
}

func placedOn(inst *api.WorkloadInstance) map[string]int32 {
	out := map[string]int32{}
	for _, p := range inst.Status.Placements {
		out[p.Region+"/"+p.Runtime] = p.Replicas
	}
	return out
}

func webDefinition(t *testing.T, cl *client.Client, name string, replicas int32, cpu string) *api.WorkloadDefinition {
	t.Helper()
	c := api.Container{Name: "web", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}
	if cpu != "" {
		c.Resources = &api.Resources{Requests: api.ResourceList{CPU: cpu}}
	}
	def, err := cl.WorkloadDefinitions().Create(context.Background(), &api.WorkloadDefinition{Meta: api.Meta{Name: name},
		Spec: api.WorkloadDefinitionSpec{Replicas: ptr(replicas), Containers: []api.Container{c}}})
	require.NoError(t, err)
	return def
}

// TestPlacementAcrossRegions is the quickstart's story with no runtime declared: a profile, and an app
// placed in two regions.
func TestPlacementAcrossRegions(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: 2 * time.Second, RuntimeRecheck: time.Second})
	ctx := context.Background()
	prof, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 1}})
	require.NoError(t, err)
	def := webDefinition(t, cl, "web", 2, "")
	twoRegions := &api.Placement{Regions: []string{"eu-west", "us-east"}}

	var runtimes map[string]*api.KubernetesRuntime // region -> runtime
	var first *api.WorkloadInstance
	t.Run("two regions with no runtime: two clusters are provisioned from the profile, and the app is Ready in both", func(t *testing.T) {
		start := time.Now()
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web-a"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: twoRegions}})
		require.NoError(t, err)
		first, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 3*time.Minute), inst.ID)
		require.NoError(t, err)
		t.Logf("two-region apply-to-ready, cold (two clusters provisioned): %s", time.Since(start).Round(time.Millisecond))
		require.Equal(t, map[string]int32{"eu-west/default-eu-west": 2, "us-east/default-us-east": 2}, placedOn(first))
		require.Equal(t, int32(4), first.Status.ReadyReplicas)

		runtimes = map[string]*api.KubernetesRuntime{}
		for _, p := range first.Status.Placements {
			require.Equal(t, api.PhaseReady, p.Phase)
			require.Equal(t, "default", p.Profile)
			rt, err := cl.KubernetesRuntimes().Get(ctx, p.RuntimeID)
			require.NoError(t, err)
			require.Equal(t, map[string]string{api.LabelProfile: "default", api.LabelRegion: p.Region, api.LabelProvisionedFor: "web-a"}, rt.Labels)
			require.Equal(t, []api.ObjectRef{{Kind: api.KindRuntimeProfile, ID: prof.ID, Name: "default"}}, rt.Owners)
			require.Equal(t, p.Region, rt.Status.Region)
			runtimes[p.Region] = rt
			d := deployment(t, localCluster(t, a, rt.ID), first.Status.Namespace, "web-a")
			require.Equal(t, int32(2), d.Status.AvailableReplicas)
			evs, err := cl.KubernetesRuntimes().Events(ctx, rt.ID)
			require.NoError(t, err)
			require.Equal(t, "Provisioned", evs[0].Reason)
			require.Contains(t, evs[0].Message, `provisioned from runtime_profile "default" for workload_instance "web-a"`)
		}
		// The runtimes are in use: deleting one is refused, naming the instance.
		err = cl.KubernetesRuntimes().Delete(ctx, runtimes["us-east"].ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "got %v", err)
		var ae *api.Error
		require.ErrorAs(t, err, &ae)
		require.Contains(t, ae.Dependents, api.ObjectRef{Kind: api.KindWorkloadInstance, ID: first.ID, Name: "web-a"})
		await.True(t, 30*time.Second, func() bool {
			p, err := cl.RuntimeProfiles().Get(ctx, prof.ID)
			return err == nil && p.Status.Runtimes == 2
		}, "the profile counts its runtimes")
	})

	var second *api.WorkloadInstance
	t.Run("a second app in the same regions reuses the clusters (warm)", func(t *testing.T) {
		start := time.Now()
		inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web-b"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: twoRegions}})
		require.NoError(t, err)
		second, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
		require.NoError(t, err)
		t.Logf("two-region apply-to-ready, warm: %s", time.Since(start).Round(time.Millisecond))
		require.Equal(t, map[string]int32{"eu-west/default-eu-west": 2, "us-east/default-us-east": 2}, placedOn(second))
		all, err := cl.KubernetesRuntimes().List(ctx, client.ListOptions{})
		require.NoError(t, err)
		require.Len(t, all.Items, 2, "no new runtime")
	})

	t.Run("weighted replicas split as asked", func(t *testing.T) {
		upd := updateInstance(ctx, t, cl, second.ID, func(inst *api.WorkloadInstance) {
			inst.Spec.Replicas = ptr(int32(4))
			inst.Spec.Placement = &api.Placement{Regions: []string{"eu-west", "us-east"},
				Replicas: &api.PlacementReplicas{Mode: api.ReplicasWeighted, Weights: map[string]int{"eu-west": 3, "us-east": 1}}}
		})
		second, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), upd.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"eu-west/default-eu-west": 3, "us-east/default-us-east": 1}, placedOn(second))
		require.Equal(t, int32(3), deployment(t, localCluster(t, a, runtimes["eu-west"].ID), "web-b", "web-b").Status.AvailableReplicas)
		// Scaling down counts as rolled out at once (as for kubectl rollout status); the extra pod goes.
		us := localCluster(t, a, runtimes["us-east"].ID)
		require.Equal(t, int32(1), *deployment(t, us, "web-b", "web-b").Spec.Replicas)
		await.True(t, time.Minute, func() bool { return runningPods(t, us, "web-b") == 1 }, "condition")
	})

	t.Run("moving out of a region removes the app's objects there", func(t *testing.T) {
		upd := updateInstance(ctx, t, cl, second.ID, func(inst *api.WorkloadInstance) {
			inst.Spec.Placement = &api.Placement{Regions: []string{"eu-west"}}
		})
		second, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), upd.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"eu-west/default-eu-west": 4}, placedOn(second))
		us := localCluster(t, a, runtimes["us-east"].ID)
		_, err = us.CoreV1().Namespaces().Get(ctx, "web-b", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err) || err == nil, "got %v", err)
		if err == nil {
			await.True(t, time.Minute, func() bool {
				_, err := us.CoreV1().Namespaces().Get(ctx, "web-b", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, "the namespace it made in us-east goes")
		}
		_, err = us.AppsV1().Deployments("web-b").Get(ctx, "web-b", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "got %v", err)
		require.Equal(t, int32(2), deployment(t, us, "web-a", "web-a").Status.AvailableReplicas, "the other app stays")
	})

	t.Run("pinning it to a runtime moves it there and cleans the one it leaves", func(t *testing.T) {
		upd := updateInstance(ctx, t, cl, second.ID, func(inst *api.WorkloadInstance) {
			inst.Spec.Placement = nil
			inst.Spec.RuntimeID = runtimes["us-east"].ID
		})
		second, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), upd.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"us-east/default-us-east": 4}, placedOn(second))
		eu := localCluster(t, a, runtimes["eu-west"].ID)
		_, err = eu.AppsV1().Deployments("web-b").Get(ctx, "web-b", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "got %v", err)
	})

	t.Run("deleting an instance leaves the clusters", func(t *testing.T) {
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), first.ID, client.DeleteOptions{Wait: true}))
		for _, rt := range runtimes {
			got, err := cl.KubernetesRuntimes().Get(ctx, rt.ID)
			require.NoError(t, err)
			require.Nil(t, got.DeletionRequestedAt)
			_, err = localCluster(t, a, rt.ID).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			require.NoError(t, err, "the cluster still serves")
		}
	})

	t.Run("reclaim: an idle provisioned runtime goes after reclaim_after, never one in use", func(t *testing.T) {
		prof, err := cl.RuntimeProfiles().Get(ctx, prof.ID)
		require.NoError(t, err)
		prof.Spec.ReclaimAfter = "3s"
		_, err = cl.RuntimeProfiles().Update(ctx, prof)
		require.NoError(t, err)
		// web-b runs on us-east; eu-west is idle.
		require.NoError(t, cl.KubernetesRuntimes().RequestReconcile(ctx, runtimes["eu-west"].ID))
		require.NoError(t, cl.KubernetesRuntimes().WaitGone(cptest.Wait(t, time.Minute), runtimes["eu-west"].ID))
		evs, err := cl.KubernetesRuntimes().Events(ctx, runtimes["us-east"].ID)
		require.NoError(t, err)
		for _, e := range evs {
			require.NotEqual(t, "Reclaimed", e.Reason)
		}
		us, err := cl.KubernetesRuntimes().Get(ctx, runtimes["us-east"].ID)
		require.NoError(t, err)
		require.Nil(t, us.DeletionRequestedAt, "web-b is placed there")
		require.Equal(t, 1, us.Status.Placements)
		require.Nil(t, us.Status.IdleSince)

		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), second.ID, client.DeleteOptions{Wait: true}))
		require.NoError(t, cl.KubernetesRuntimes().WaitGone(cptest.Wait(t, time.Minute), runtimes["us-east"].ID))
	})
}

// TestFailover kills the cluster an instance is placed on and measures the time until the instance is
// Ready on another, provisioned from the profile; a pinned instance on the same cluster stays.
func TestFailover(t *testing.T) {
	t.Parallel()
	edge := kubesimtest.Start(t, kubesimtest.WithName("edge"), kubesimtest.WithRegion("eu-west"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: time.Second})
	ctx := context.Background()
	rt := readyRuntime(t, cl, "edge", edge.Kubeconfig)
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "spare"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west"}, Nodes: 1}})
	require.NoError(t, err)
	def := webDefinition(t, cl, "web", 1, "")
	const toleration = 3 * time.Second
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "web"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"eu-west"},
			Failover: &api.Failover{TolerationSeconds: int(toleration / time.Second)}}}})
	require.NoError(t, err)
	pinned, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "pinned"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int32{"eu-west/edge": 1}, placedOn(got), "a Ready matching runtime is used before provisioning")
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), pinned.ID)
	require.NoError(t, err)

	killed := time.Now()
	require.NoError(t, edge.Stop(ctx))
	var placements map[string]int32
	await.True(t, 3*time.Minute, func() bool {
		got, err = cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		placements = placedOn(got)
		_, onSpare := placements["eu-west/spare-eu-west"]
		return api.Reconciled(got.Generation, &got.Status.Status) && onSpare
	}, "the instance is Ready on a runtime provisioned from the profile")
	t.Logf("failover: cluster killed -> instance Ready elsewhere in %s (toleration %s, includes provisioning a cluster)", time.Since(killed).Round(time.Millisecond), toleration)
	require.GreaterOrEqual(t, time.Since(killed), toleration, "not before the toleration")
	require.Equal(t, api.PhaseDeleting, statusOf(got, "edge").Phase, "the dead runtime's objects are deleted when it answers again")
	evs, err := cl.WorkloadInstances().Events(ctx, inst.ID)
	require.NoError(t, err)
	var reasons []string
	for _, e := range evs {
		reasons = append(reasons, e.Reason)
	}
	require.Contains(t, reasons, "FailedOver")
	require.Contains(t, reasons, "ProvisioningRuntime")

	p, err := cl.WorkloadInstances().Get(ctx, pinned.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int32{"eu-west/edge": 1}, placedOn(p), "a pinned runtime never fails over")
	require.NotEqual(t, api.PhaseReady, p.Status.Phase)

	// The dead runtime can be deleted: a placement being moved off does not hold it (only the pinned
	// instance does, so orphan that one first).
	require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), pinned.ID, client.DeleteOptions{Orphan: true, Wait: true}))
	require.NoError(t, cl.KubernetesRuntimes().Delete(cptest.Wait(t, time.Minute), rt.ID, client.DeleteOptions{Wait: true}))
	await.True(t, time.Minute, func() bool {
		got, err = cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		return len(got.Status.Placements) == 1 && api.Reconciled(got.Generation, &got.Status.Status)
	}, "the moved-off placement is dropped once its runtime is gone")
}

func statusOf(inst *api.WorkloadInstance, runtime string) api.PlacementStatus {
	for _, p := range inst.Status.Placements {
		if p.Runtime == runtime {
			return p
		}
	}
	return api.PlacementStatus{}
}

// TestNodeAutoscaling: pods that do not fit add nodes, up to max_nodes; idle added nodes go after the
// scale-down delay, down to min_nodes.
func TestNodeAutoscaling(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, RuntimeRecheck: time.Second, ScaleDownDelay: 2 * time.Second})
	ctx := context.Background()
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "elastic"},
		Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, Region: "eu-west", Nodes: 1, MinNodes: 1, MaxNodes: 3}})
	require.NoError(t, err)
	rt, err = cl.KubernetesRuntimes().WaitReconciled(cptest.Wait(t, 2*time.Minute), rt.ID)
	require.NoError(t, err)
	require.Equal(t, 1, rt.Status.NodesReady)
	cs := localCluster(t, a, rt.ID)
	// kubesim nodes have 32 CPUs: one 20-CPU pod fits per node.
	def := webDefinition(t, cl, "big", 3, "20")
	start := time.Now()
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "big"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	require.NoError(t, err)
	t.Logf("node scale-up: 3 pods of 20 CPUs on 1 node -> Ready on 3 nodes in %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 3, nodeCount(t, cs))
	await.True(t, 30*time.Second, func() bool {
		got, err := cl.KubernetesRuntimes().Get(ctx, rt.ID)
		require.NoError(t, err)
		return got.Status.NodesReady == 3 && got.Status.NodesAdded == 2 && got.Status.Phase == api.PhaseReady
	}, "condition")

	t.Run("max_nodes bounds the scale-up", func(t *testing.T) {
		inst, err := cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		inst.Spec.Replicas = ptr(int32(4))
		_, err = cl.WorkloadInstances().Update(ctx, inst)
		require.NoError(t, err)
		time.Sleep(3 * time.Second) // no signal: a window of several rechecks in which nothing may change
		require.Equal(t, 3, nodeCount(t, cs))
	})

	t.Run("idle added nodes go after the delay, down to min_nodes", func(t *testing.T) {
		inst, err := cl.WorkloadInstances().Get(ctx, inst.ID)
		require.NoError(t, err)
		inst.Spec.Replicas = ptr(int32(1))
		_, err = cl.WorkloadInstances().Update(ctx, inst)
		require.NoError(t, err)
		start := time.Now()
		await.True(t, time.Minute, func() bool { return nodeCount(t, cs) == 1 }, "condition")
		t.Logf("node scale-down: 3 -> 1 nodes in %s (delay 2s)", time.Since(start).Round(time.Millisecond))
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEqual(t, "true", nodes.Items[0].Labels["qleet.io/autoscaled"], "the node kubesim made stays")
		got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), inst.ID)
		require.NoError(t, err)
		require.Equal(t, int32(1), got.Status.AvailableReplicas)
	})
}

func nodeCount(t *testing.T, cs kubernetes.Interface) int {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				names = append(names, n.Name)
			}
		}
	}
	sort.Strings(names)
	return len(names)
}

// updateInstance changes an instance's spec as a user would: read, change, write with If-Match, and read
// again when a controller's status write came in between (409), like client-go's RetryOnConflict.
func updateInstance(ctx context.Context, t *testing.T, cl *client.Client, id string, change func(*api.WorkloadInstance)) *api.WorkloadInstance {
	t.Helper()
	for attempt := 0; ; attempt++ {
		inst, err := cl.WorkloadInstances().Get(ctx, id)
		require.NoError(t, err)
		change(inst)
		upd, err := cl.WorkloadInstances().Update(ctx, inst)
		if api.IsConflict(err) && attempt < 5 {
			continue
		}
		require.NoError(t, err)
		return upd
	}
}

// TestARegionWithNoRuntimeWaitsForAWrite: an instance placed in a region that no runtime or profile
// serves waits, with no timer short enough to matter (5 minutes) and no resync pass (an hour). The
// profile created for the region ends the wait at once: its notification wakes the instance, which
// provisions a runtime there and is Ready on it.
func TestARegionWithNoRuntimeWaitsForAWrite(t *testing.T) {
	t.Parallel()
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Hour})
	ctx := context.Background()
	def := webDefinition(t, cl, "far", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "far"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"ap-south"}}}})
	require.NoError(t, err)
	await.True(t, 30*time.Second, func() bool {
		got, err := cl.WorkloadInstances().Get(ctx, inst.ID)
		if err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == "Ready" && c.Reason == "NoRuntimeForPlacement" {
				return true
			}
		}
		return false
	}, "the instance waits for a runtime in ap-south")

	created := time.Now()
	_, err = cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "ap"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"ap-south"}, Nodes: 1}})
	require.NoError(t, err)
	await.True(t, 10*time.Second, func() bool {
		page, err := cl.KubernetesRuntimes().List(ctx, client.ListOptions{LabelSelector: api.LabelProvisionedFor + "=far"})
		return err == nil && len(page.Items) == 1
	}, "the profile's creation wakes the instance, which provisions a runtime in ap-south")
	t.Logf("runtime provisioned %s after the profile's creation", time.Since(created).Round(time.Millisecond))
	got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int32{"ap-south/ap-ap-south": 1}, placedOn(got))
}
