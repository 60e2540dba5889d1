package workload

import (
	"github.com/qleetos/terraform-provider-qleet/api"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
)

// TestDependenciesAnnotationIsAVersionNotAHashOfTheValues: the pod-template annotation that rolls the
// pods when a secret changes is readable by whoever reads the Deployment, so it follows the secret's
// version, never a hash of its values.
func TestDependenciesAnnotationIsAVersionNotAHashOfTheValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := apitest.Start(t)
	admin, ctrl := svc.Client(t, server.RoleAdmin), svc.Client(t, server.RoleController)
	r := &InstanceReconciler{Client: ctrl}
	inst := &api.WorkloadInstance{Meta: api.Meta{ID: "inst-1", Name: "web"}}
	const value = "correct-horse"
	sec, err := admin.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "api-key"},
		Spec: api.SecretSpec{InstanceIDs: []string{inst.ID}, Values: map[string]string{"API_KEY": value}}})
	require.NoError(t, err)

	// annotation marks the secret reconciled, as its controller does, and returns the annotation an
	// instance's Deployment gets.
	annotation := func(t *testing.T) string {
		t.Helper()
		cur, err := ctrl.Secrets().Get(ctx, sec.ID)
		require.NoError(t, err)
		_, err = ctrl.Secrets().UpdateStatus(ctx, cur.ID, cur.ResourceVersion, api.SecretStatus{
			Status: api.Status{Phase: api.PhaseReady, ObservedGeneration: cur.Generation}})
		require.NoError(t, err)
		d, err := r.dependencies(ctx, inst)
		require.NoError(t, err)
		dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web"},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "web"}}}}}}}
		objs := d.inject([]*unstructured.Unstructured{dep}, "web", onRuntime{})
		ann, _, _ := unstructured.NestedString(objs[0].Object, "spec", "template", "metadata", "annotations", AnnotationDependencies)
		require.NotEmpty(t, ann)
		return ann
	}
	update := func(t *testing.T, values map[string]string) {
		t.Helper()
		cur, err := ctrl.Secrets().Get(ctx, sec.ID)
		require.NoError(t, err)
		cur.Spec.Values = values
		_, err = admin.Secrets().Update(ctx, cur)
		require.NoError(t, err)
	}

	first := annotation(t)
	t.Run("it is no hash of the value", func(t *testing.T) {
		for _, text := range []string{value, "API_KEY=" + value, "API_KEY=" + value + "\n", "secret api-key \nAPI_KEY=" + value + "\n"} {
			sum := sha256.Sum256([]byte(text))
			require.False(t, strings.HasPrefix(hex.EncodeToString(sum[:]), first), "sha256(%q)", text)
		}
		require.NotContains(t, first, value)
	})
	t.Run("re-sending the same values leaves it as it is", func(t *testing.T) {
		update(t, map[string]string{"API_KEY": value})
		require.Equal(t, first, annotation(t))
	})
	t.Run("a new value changes it", func(t *testing.T) {
		update(t, map[string]string{"API_KEY": value + "-rotated"})
		second := annotation(t)
		require.NotEqual(t, first, second)
		t.Run("and going back to the old value changes it again: it is a version, not a digest", func(t *testing.T) {
			update(t, map[string]string{"API_KEY": value})
			require.NotEqual(t, first, annotation(t))
			require.NotEqual(t, second, annotation(t))
		})
	})
}
