package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// TestScaleDownMovesPodsThatFitElsewhere: which replica a ReplicaSet keeps when it scales down is not
// ours to choose, so an added node may keep the last pod while the node kubesim made stands empty. Such
// a node still goes: it is cordoned, its pod evicted and recreated on the node that stays. Pods that fit
// nowhere else, or that no controller would recreate, keep their node.
func TestScaleDownMovesPodsThatFitElsewhere(t *testing.T) {
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithNodes(1))
	rc, err := clientcmd.BuildConfigFromFlags("", sim.Kubeconfig)
	require.NoError(t, err)
	cl, err := kube.NewCluster(rc)
	require.NoError(t, err)
	cs := cl.Clientset
	ctx := context.Background()
	rt := &api.KubernetesRuntime{Meta: api.Meta{ID: "rt-1", Name: "elastic"}, Spec: api.KubernetesRuntimeSpec{Provider: api.ProviderLocal, MinNodes: 1, MaxNodes: 3}}
	s := &nodeScaler{}
	first := onlyNode(t, cs).Name

	// addBusyNode adds a node and runs one 20-CPU replica of a ReplicaSet named name on it (the node
	// kubesim made is cordoned meanwhile, so the scheduler has no other choice).
	addBusyNode := func(t *testing.T, name string, managed bool) string {
		t.Helper()
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NoError(t, s.addNode(ctx, cl, rt, &nodes.Items[0], len(nodes.Items)))
		cordon(t, cs, first, true)
		defer cordon(t, cs, first, false)
		rs := replicaSet(name, "20")
		if managed {
			rs.Labels = map[string]string{kube.LabelManagedBy: kube.ManagedByValue}
		}
		_, err = cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{})
		require.NoError(t, err)
		var node string
		await.True(t, time.Minute, func() bool {
			pods := podsOf(t, cs, name)
			if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
				return false
			}
			node = pods[0].Spec.NodeName
			return true
		}, "the replica runs on the added node")
		require.NotEqual(t, first, node)
		return node
	}
	scale := func(t *testing.T) bool {
		t.Helper()
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		changed, err := s.scale(ctx, cl, rt, nodes.Items, 0)
		require.NoError(t, err)
		return changed
	}

	t.Run("a replica that fits on the node that stays is moved, and its node goes", func(t *testing.T) {
		added := addBusyNode(t, "a", true)
		require.True(t, scale(t))
		_, err := cs.CoreV1().Nodes().Get(ctx, added, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the added node is removed: %v", err)
		await.True(t, time.Minute, func() bool {
			pods := podsOf(t, cs, "a")
			return len(pods) == 1 && pods[0].Spec.NodeName == first && pods[0].Status.Phase == corev1.PodRunning
		}, "the ReplicaSet runs its replica again, on the node kubesim made")
		require.Equal(t, 1, rt.Status.NodesRemoved)
	})

	t.Run("a replica that fits nowhere else keeps its node", func(t *testing.T) {
		added := addBusyNode(t, "b", true) // the first node has 12 of 32 CPUs free: 20 do not fit
		require.False(t, scale(t))
		n, err := cs.CoreV1().Nodes().Get(ctx, added, metav1.GetOptions{})
		require.NoError(t, err)
		require.False(t, n.Spec.Unschedulable, "not cordoned")

		t.Run("nor does a replica of a workload QleetOS did not apply, and it is left intact", func(t *testing.T) {
			require.NoError(t, cs.AppsV1().ReplicaSets("default").Delete(ctx, "a", metav1.DeleteOptions{}))
			await.True(t, time.Minute, func() bool { return len(podsOf(t, cs, "a")) == 0 }, "the first node is free again")
			rs, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "b", metav1.GetOptions{})
			require.NoError(t, err)
			rs.Labels = map[string]string{"team": "theirs"} // as if someone else had made it
			_, err = cs.AppsV1().ReplicaSets("default").Update(ctx, rs, metav1.UpdateOptions{})
			require.NoError(t, err)
			pods := podsOf(t, cs, "b")
			require.Len(t, pods, 1)
			require.False(t, scale(t), "it would fit on the first node now, but it is not QleetOS's to move")
			after := podsOf(t, cs, "b")
			require.Len(t, after, 1)
			require.Equal(t, pods[0].UID, after[0].UID, "the foreign pod was not evicted")
			n, err := cs.CoreV1().Nodes().Get(ctx, added, metav1.GetOptions{})
			require.NoError(t, err)
			require.False(t, n.Spec.Unschedulable, "not cordoned")
		})

		t.Run("nor does a pod that no controller would recreate", func(t *testing.T) {
			require.NoError(t, cs.AppsV1().ReplicaSets("default").Delete(ctx, "b", metav1.DeleteOptions{}))
			await.True(t, time.Minute, func() bool { return len(podsOf(t, cs, "b")) == 0 }, "the replica is gone")
			bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "default"},
				Spec: corev1.PodSpec{NodeName: added, Containers: []corev1.Container{{Name: "c", Image: "app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
			_, err := cs.CoreV1().Pods("default").Create(ctx, bare, metav1.CreateOptions{})
			require.NoError(t, err)
			require.False(t, scale(t))
			_, err = cs.CoreV1().Pods("default").Get(ctx, "bare", metav1.GetOptions{})
			require.NoError(t, err, "the bare pod is left alone")

			require.NoError(t, cs.CoreV1().Pods("default").Delete(ctx, "bare", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
			await.True(t, time.Minute, func() bool {
				_, err := cs.CoreV1().Pods("default").Get(ctx, "bare", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, "the bare pod is gone")
			require.True(t, scale(t), "an empty added node goes")
			require.Equal(t, first, onlyNode(t, cs).Name)
		})
	})
}

func onlyNode(t *testing.T, cs kubernetes.Interface) corev1.Node {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	return nodes.Items[0]
}

func cordon(t *testing.T, cs kubernetes.Interface, node string, on bool) {
	t.Helper()
	_, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType,
		fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on), metav1.PatchOptions{})
	require.NoError(t, err)
}

func podsOf(t *testing.T, cs kubernetes.Interface, app string) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

func replicaSet(name, cpu string) *appsv1.ReplicaSet {
	one := int32(1)
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{Name: "c", Image: "app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}}}
}
