package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

// A pod's template labels name its owner's id but not its kind: the kind comes from the workload that
// controls it.
func TestPodOwnerComesFromItsWorkload(t *testing.T) {
	t.Parallel()
	owned := func(id, kind string) map[string]string {
		l := map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstanceID: id}
		if kind != "" {
			l[kube.LabelOwnerKind] = kind
		}
		return l
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "db", Labels: owned("d1", api.KindDatabase)}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "store", Labels: owned("b1", api.KindBucket)}}
	stsInf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.StatefulSet{}, 0, cache.Indexers{})
	require.NoError(t, stsInf.GetIndexer().Add(sts))
	depInf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.Deployment{}, 0, cache.Indexers{})
	require.NoError(t, depInf.GetIndexer().Add(dep))
	set := informerSet{byKind: map[string]cache.SharedIndexInformer{"StatefulSet": stsInf, "Deployment": depInf}}
	pod := func(ns, id, ctrlKind, ctrlName string, extra map[string]string) *corev1.Pod {
		l := owned(id, "")
		for k, v := range extra {
			l[k] = v
		}
		yes := true
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: l,
			OwnerReferences: []metav1.OwnerReference{{Kind: ctrlKind, Name: ctrlName, Controller: &yes}}}}
	}

	kind, id := podOwner(set, pod("db", "d1", "StatefulSet", "db", nil))
	require.Equal(t, []string{api.KindDatabase, "d1"}, []string{kind, id}, "a StatefulSet's pod")
	kind, id = podOwner(set, pod("b", "b1", "ReplicaSet", "store-5d8f7", map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7"}))
	require.Equal(t, []string{api.KindBucket, "b1"}, []string{kind, id}, "a Deployment's pod, through its ReplicaSet's name")
	kind, id = podOwner(set, pod("web", "i1", "ReplicaSet", "web-77c9", map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "77c9"}))
	require.Equal(t, []string{api.KindWorkloadInstance, "i1"}, []string{kind, id}, "a workload the cache does not hold: an instance's, by default")
	kind, id = podOwner(set, pod("db", "other", "StatefulSet", "db", nil))
	require.Equal(t, []string{api.KindWorkloadInstance, "other"}, []string{kind, id}, "a workload of another owner id does not lend its kind")
	kind, id = podOwner(set, &corev1.Pod{})
	require.Empty(t, kind+id, "a pod QleetOS did not apply")
}
