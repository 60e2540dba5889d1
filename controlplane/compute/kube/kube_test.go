package kube_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// connect starts a kubesim cluster for the test and connects to it.
func connect(t *testing.T) *kube.Cluster {
	t.Helper()
	sim := kubesimtest.Start(t)
	raw, err := os.ReadFile(sim.Kubeconfig)
	require.NoError(t, err)
	rc, err := kube.RESTConfigFromKubeconfig(raw, "")
	require.NoError(t, err)
	rc.QPS, rc.Burst = 100, 200
	cl, err := kube.NewCluster(rc)
	require.NoError(t, err)
	return cl
}

func obj(t *testing.T, doc string, args ...any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(fmt.Sprintf(doc, args...)), &u.Object))
	return u
}

func namespace(t *testing.T, name string) *unstructured.Unstructured {
	return obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", name)
}

func deployment(t *testing.T, name string, replicas int, cpu string) *unstructured.Unstructured {
	return obj(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources: {requests: {cpu: "%[3]s"}}
`, name, replicas, cpu)
}

func service(t *testing.T, name string) *unstructured.Unstructured {
	return obj(t, `apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  selector: {app: %[1]s}
  ports: [{port: 80, targetPort: 8080}]
`, name)
}

func configMap(t *testing.T, name string) *unstructured.Unstructured {
	return obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: \"1\"}\n", name)
}

func refNames(refs []kube.AppliedRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

// TestCluster runs every cluster behaviour against one kubesim cluster; each subtest owns a namespace
// and an instance id.
func TestCluster(t *testing.T) {
	cl := connect(t)
	ctx := context.Background()

	t.Run("a 3-replica deployment is applied and becomes ready", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-ready", Namespace: "ready"}
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{
			service(t, "web"), deployment(t, "web", 3, "100m"), namespace(t, "ready"),
		})
		require.NoError(t, err)
		require.Equal(t, []string{"Namespace/ready", "Service/ready/web", "Deployment/ready/web"}, refNames(refs), "namespaces first, services before workloads")

		var rep kube.HealthReport
		await.Explained(t, 60*time.Second, func() (bool, string) {
			rep = kube.Health(ctx, cl, refs)
			return rep.Ready, fmt.Sprintf("%+v", rep.Objects)
		})
		require.EqualValues(t, 3, rep.Replicas)
		require.EqualValues(t, 3, rep.ReadyReplicas)
		require.EqualValues(t, 3, rep.AvailableReplicas)

		dep, err := cl.Clientset.AppsV1().Deployments("ready").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, kube.ManagedByValue, dep.Labels[kube.LabelManagedBy])
		require.Equal(t, "inst-ready", dep.Labels[kube.LabelInstanceID])
		require.Equal(t, "inst-ready", dep.Spec.Template.Labels[kube.LabelInstanceID], "pods carry the owner label")
		managers := map[string]bool{}
		for _, mf := range dep.ManagedFields {
			managers[mf.Manager+"/"+string(mf.Operation)] = true
		}
		require.True(t, managers["qleet/Apply"], "applied with field manager qleet: %v", managers)

		pods, err := cl.Clientset.CoreV1().Pods("ready").List(ctx, metav1.ListOptions{LabelSelector: owner.InstanceSelector()})
		require.NoError(t, err)
		require.Len(t, pods.Items, 3)
		for _, p := range pods.Items {
			require.Equal(t, "Running", string(p.Status.Phase))
		}
	})

	t.Run("an unschedulable pod reports the scheduler's message", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-huge", Namespace: "huge"}
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "huge"), deployment(t, "huge", 1, "1000")})
		require.NoError(t, err)
		await.Explained(t, 60*time.Second, func() (bool, string) {
			rep := kube.Health(ctx, cl, refs)
			nr := rep.NotReady()
			if nr == nil {
				return false, "ready?"
			}
			return strings.Contains(nr.Message, "Unschedulable") && strings.Contains(nr.Message, "Insufficient cpu"), nr.Message
		})
		rep := kube.Health(ctx, cl, refs)
		require.False(t, rep.Ready)
		require.Equal(t, "Deployment", rep.NotReady().Kind)
		require.Contains(t, rep.NotReady().Message, "nodes are available")
	})

	t.Run("prune removes a dropped object and keeps the rest", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-prune", Namespace: "prune"}
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "prune"), configMap(t, "keep"), service(t, "drop")})
		require.NoError(t, err)
		owner.Previous = refs
		keep, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "prune"), configMap(t, "keep")})
		require.NoError(t, err)
		deleted, err := kube.Prune(ctx, cl, owner, keep)
		require.NoError(t, err)
		require.Equal(t, []string{"Service/prune/drop"}, refNames(deleted))
		_, err = cl.Clientset.CoreV1().Services("prune").Get(ctx, "drop", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "service deleted: %v", err)
		_, err = cl.Clientset.CoreV1().ConfigMaps("prune").Get(ctx, "keep", metav1.GetOptions{})
		require.NoError(t, err)

		again, err := kube.Prune(ctx, cl, owner, keep)
		require.NoError(t, err)
		require.Empty(t, again, "nothing left to prune")
	})

	t.Run("prune and delete leave other owners' objects and their namespace alone", func(t *testing.T) {
		t.Parallel()
		a := kube.Owner{InstanceID: "inst-a", Namespace: "shared"}
		b := kube.Owner{InstanceID: "inst-b", Namespace: "shared"}
		_, err := kube.Apply(ctx, cl, a, []*unstructured.Unstructured{namespace(t, "shared"), configMap(t, "a")})
		require.NoError(t, err)
		bRefs, err := kube.Apply(ctx, cl, b, []*unstructured.Unstructured{configMap(t, "b"), configMap(t, "b2")})
		require.NoError(t, err)
		deleted, err := kube.Prune(ctx, cl, b, bRefs[1:])
		require.NoError(t, err)
		require.Equal(t, []string{"ConfigMap/shared/b"}, refNames(deleted))
		_, err = cl.Clientset.CoreV1().ConfigMaps("shared").Get(ctx, "a", metav1.GetOptions{})
		require.NoError(t, err)

		require.NoError(t, kube.DeleteAll(ctx, cl, a))
		_, err = cl.Clientset.CoreV1().ConfigMaps("shared").Get(ctx, "a", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a's object is deleted: %v", err)
		_, err = cl.Clientset.CoreV1().ConfigMaps("shared").Get(ctx, "b2", metav1.GetOptions{})
		require.NoError(t, err, "b's object survives")
		ns, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, "shared", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, ns.DeletionTimestamp, "the namespace b still uses is not deleted")
	})

	t.Run("an existing namespace is used as it is, never labelled, and survives the owner's deletion", func(t *testing.T) {
		t.Parallel()
		_, err := cl.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "existing", Labels: map[string]string{"team": "data"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cl.Clientset.CoreV1().ConfigMaps("existing").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious"}, Data: map[string]string{"k": "by hand"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		owner := kube.Owner{InstanceID: "inst-existing", Namespace: "existing"}
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "existing"), configMap(t, "app")})
		require.NoError(t, err)
		require.Equal(t, []string{"Namespace/existing", "ConfigMap/existing/app"}, refNames(refs))
		ns, err := cl.Clientset.CoreV1().Namespaces().Get(ctx, "existing", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"team": "data", "kubernetes.io/metadata.name": "existing"}, ns.Labels, "the namespace is not labelled as QleetOS's")

		_, err = kube.Prune(ctx, cl, owner, refs[1:])
		require.NoError(t, err)
		require.NoError(t, kube.DeleteAll(ctx, cl, owner))
		_, err = cl.Clientset.CoreV1().ConfigMaps("existing").Get(ctx, "app", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the owner's own object is deleted: %v", err)
		ns, err = cl.Clientset.CoreV1().Namespaces().Get(ctx, "existing", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, ns.DeletionTimestamp, "the namespace QleetOS did not create is not deleted")
		cm, err := cl.Clientset.CoreV1().ConfigMaps("existing").Get(ctx, "precious", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "by hand", cm.Data["k"], "data put there by hand is intact")
	})

	t.Run("an existing object named by a manifest is neither overwritten nor deleted, and the error names it", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-foreign", Namespace: "foreign"}
		_, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "foreign")})
		require.NoError(t, err)
		_, err = cl.Clientset.CoreV1().ConfigMaps("foreign").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "by hand"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		_, err = kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "foreign"), configMap(t, "settings")})
		require.Error(t, err)
		require.True(t, kube.IsOwnershipConflict(err), "%v", err)
		require.Contains(t, err.Error(), "ConfigMap/foreign/settings already exists and was not created by QleetOS")
		require.Contains(t, err.Error(), "adopt = true")

		_, err = kube.Prune(ctx, cl, owner, nil)
		require.NoError(t, err)
		err = kube.DeleteAll(ctx, cl, owner)
		require.NoError(t, err)
		cm, err := cl.Clientset.CoreV1().ConfigMaps("foreign").Get(ctx, "settings", metav1.GetOptions{})
		require.NoError(t, err, "the foreign object survives prune and delete of the owner")
		require.Equal(t, "by hand", cm.Data["a"])
		require.Empty(t, cm.Labels[kube.LabelManagedBy], "nothing was written to it")
	})

	t.Run("adopt takes over an object QleetOS did not create, which is then deleted with its owner", func(t *testing.T) {
		t.Parallel()
		_, err := cl.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "adopting"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cl.Clientset.CoreV1().ConfigMaps("adopting").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "by hand"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		owner := kube.Owner{InstanceID: "inst-adopt", Namespace: "adopting", Adopt: true}
		_, err = kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{configMap(t, "settings")})
		require.NoError(t, err)
		cm, err := cl.Clientset.CoreV1().ConfigMaps("adopting").Get(ctx, "settings", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "1", cm.Data["a"], "the adopted object takes the desired state")
		require.Equal(t, "inst-adopt", cm.Labels[kube.LabelInstanceID])

		require.NoError(t, kube.DeleteAll(ctx, cl, owner))
		_, err = cl.Clientset.CoreV1().ConfigMaps("adopting").Get(ctx, "settings", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "an adopted object is the owner's: %v", err)
	})

	t.Run("another owner's object is never taken, even with adopt", func(t *testing.T) {
		t.Parallel()
		first := kube.Owner{InstanceID: "inst-first", Namespace: "taken"}
		_, err := kube.Apply(ctx, cl, first, []*unstructured.Unstructured{namespace(t, "taken"), configMap(t, "mine")})
		require.NoError(t, err)
		second := kube.Owner{InstanceID: "inst-second", Namespace: "taken", Adopt: true}
		_, err = kube.Apply(ctx, cl, second, []*unstructured.Unstructured{namespace(t, "taken"), obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\ndata: {a: \"2\"}\n")})
		var oe *kube.OwnershipError
		require.ErrorAs(t, err, &oe)
		require.Equal(t, "inst-first", oe.OwnedBy)
		require.NoError(t, kube.DeleteAll(ctx, cl, second))
		cm, err := cl.Clientset.CoreV1().ConfigMaps("taken").Get(ctx, "mine", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "1", cm.Data["a"])
		require.Equal(t, "inst-first", cm.Labels[kube.LabelInstanceID])
	})

	t.Run("cluster-scoped objects and other namespaces need the owner's opt-in", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-scope", Namespace: "scope"}
		role := obj(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: scope-reader}\nrules: []\n")
		_, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "scope"), role})
		require.Error(t, err)
		require.True(t, kube.IsInvalid(err))
		require.Contains(t, err.Error(), "ClusterRole/scope-reader: is cluster-scoped: set cluster_scoped = true")
		_, err = cl.Clientset.RbacV1().ClusterRoles().Get(ctx, "scope-reader", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing was written: %v", err)

		elsewhere := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: kube-system}\n")
		_, err = kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{elsewhere})
		require.Error(t, err)
		require.Contains(t, err.Error(), `is in namespace "kube-system", not the instance's "scope"`)

		owner.ClusterScoped = true
		_, err = kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "scope"), role})
		require.NoError(t, err)
		require.NoError(t, kube.DeleteAll(ctx, cl, owner))
	})

	t.Run("DeleteAll leaves nothing behind", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-gone", Namespace: "gone"}
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "gone"), deployment(t, "gone", 2, "10m"), service(t, "gone")})
		require.NoError(t, err)
		await.Explained(t, 60*time.Second, func() (bool, string) {
			rep := kube.Health(ctx, cl, refs)
			return rep.Ready, fmt.Sprintf("%+v", rep.Objects)
		})
		owned, err := kube.Owned(ctx, cl, owner)
		require.NoError(t, err)
		require.Len(t, owned, 1+1+1+1+2, "namespace, deployment, service, replicaset, 2 pods: %v", refNames(owned))

		require.NoError(t, kube.DeleteAll(ctx, cl, owner))
		owned, err = kube.Owned(ctx, cl, owner)
		require.NoError(t, err)
		require.Empty(t, owned)
		_, err = cl.Clientset.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "namespace gone: %v", err)
	})

	t.Run("an unknown kind is an invalid apply naming the object", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-widget", Namespace: "widget"}
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{
			namespace(t, "widget"),
			obj(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: foo}\n"),
		})
		require.Error(t, err)
		require.True(t, kube.IsInvalid(err))
		require.Contains(t, err.Error(), `Widget/foo: no matches for kind "Widget"`)
		require.Equal(t, []string{"Namespace/widget"}, refNames(refs), "what was applied before the error is returned")
	})

	t.Run("an object the API server rejects is invalid", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-bad", Namespace: "bad"}
		bad := deployment(t, "bad", 1, "10m")
		require.NoError(t, unstructured.SetNestedStringMap(bad.Object, map[string]string{"app": "other"}, "spec", "selector", "matchLabels"))
		_, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{namespace(t, "bad"), bad})
		require.Error(t, err)
		require.True(t, kube.IsInvalid(err), "%v", err)
		require.Contains(t, err.Error(), "Deployment/bad:")
	})

	t.Run("a CRD and its custom resources apply together", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-crd", Namespace: "crd", ClusterScoped: true}
		crd := obj(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`)
		gadget := obj(t, "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 3}\n")
		refs, err := kube.Apply(ctx, cl, owner, []*unstructured.Unstructured{gadget, crd, namespace(t, "crd")})
		require.NoError(t, err)
		require.Equal(t, []string{"Namespace/crd", "CustomResourceDefinition/gadgets.example.com", "Gadget/crd/g1"}, refNames(refs))
		rep := kube.Health(ctx, cl, refs)
		require.True(t, rep.Ready, "%+v", rep.Objects)
		require.NoError(t, kube.DeleteAll(ctx, cl, kube.Owner{InstanceID: "inst-crd", Previous: refs}))
	})

	t.Run("re-applying corrects drift and says what it corrected", func(t *testing.T) {
		t.Parallel()
		owner := kube.Owner{InstanceID: "inst-drift", Namespace: "drift"}
		desired := func() []*unstructured.Unstructured {
			return []*unstructured.Unstructured{namespace(t, "drift"), deployment(t, "web", 2, "10m"), service(t, "web")}
		}
		refs, err := kube.Apply(ctx, cl, owner, desired())
		require.NoError(t, err)
		for _, r := range refs {
			require.Empty(t, r.Drift, "a first apply corrects nothing")
		}
		owner.Previous = refs

		again, err := kube.Apply(ctx, cl, owner, desired())
		require.NoError(t, err)
		for _, r := range again {
			require.Empty(t, r.Drift, "an unchanged cluster has no drift: %s", r)
		}

		// Scale by hand (as kubectl scale does) and delete the Service.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale, err := cl.Clientset.AppsV1().Deployments("drift").GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = 5
			_, err = cl.Clientset.AppsV1().Deployments("drift").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err)
		require.NoError(t, cl.Clientset.CoreV1().Services("drift").Delete(ctx, "web", metav1.DeleteOptions{}))

		fixed, err := kube.Apply(ctx, cl, owner, desired())
		require.NoError(t, err)
		drift := map[string]string{}
		for _, r := range fixed {
			drift[r.Kind] = r.Drift
		}
		require.Equal(t, "restored spec.replicas (5 -> 2)", drift["Deployment"])
		require.Equal(t, "recreated (it had been deleted)", drift["Service"])
		require.Empty(t, drift["Namespace"])
		dep, err := cl.Clientset.AppsV1().Deployments("drift").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 2, *dep.Spec.Replicas)

		// A change of the desired objects is a rollout, not drift.
		changed := desired()
		require.NoError(t, unstructured.SetNestedField(changed[1].Object, int64(3), "spec", "replicas"))
		rolled, err := kube.Apply(ctx, cl, owner, changed)
		require.NoError(t, err)
		for _, r := range rolled {
			require.Empty(t, r.Drift, "%s", r)
		}
	})
}
