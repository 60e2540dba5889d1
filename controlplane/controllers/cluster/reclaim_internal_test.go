package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
)

func TestDataIn(t *testing.T) {
	t.Parallel()
	owned := map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstanceID: "db-1"}
	tests := []struct {
		name   string
		ns     string
		labels map[string]string
		want   *api.RuntimeData
	}{
		{"a database that runs here", "qleet-db-orders", owned,
			&api.RuntimeData{Kind: api.KindDatabase, Name: "orders", Namespace: "qleet-db-orders"}},
		{"a bucket that runs here", "qleet-bucket-files", owned,
			&api.RuntimeData{Kind: api.KindBucket, Name: "files", Namespace: "qleet-bucket-files"}},
		{"a database deleted with retain", "qleet-db-orders", map[string]string{api.LabelRetained: "orders"},
			&api.RuntimeData{Kind: api.KindDatabase, Name: "orders", Namespace: "qleet-db-orders", Retained: true}},
		{"a retained database taken back runs here", "qleet-db-orders", map[string]string{api.LabelRetained: "orders", kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstanceID: "db-2"},
			&api.RuntimeData{Kind: api.KindDatabase, Name: "orders", Namespace: "qleet-db-orders"}},
		{"a namespace of that name QleetOS did not make is not QleetOS's data", "qleet-db-orders", map[string]string{"team": "x"}, nil},
		{"an app's namespace holds no data service", "web", owned, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := dataIn(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns, Labels: tc.labels}})
			if tc.want == nil {
				require.False(t, ok, "%+v", got)
				return
			}
			require.True(t, ok)
			require.Equal(t, *tc.want, got)
		})
	}
}

func TestHoldsMessageSaysHowToRelease(t *testing.T) {
	t.Parallel()
	msg := holdsMessage([]api.RuntimeData{
		{Kind: api.KindDatabase, Name: "orders", Namespace: "qleet-db-orders", Retained: true, Volumes: []string{"data-db-0 (1Gi)"}},
		{Kind: api.KindBucket, Name: "files", Namespace: "qleet-bucket-files", Volumes: []string{"data-db-0 (5Gi)"}},
	})
	require.Contains(t, msg, "not reclaimed")
	require.Contains(t, msg, `database "orders" deleted with retain keeps its volume data-db-0 (1Gi) and credentials in namespace qleet-db-orders`)
	require.Contains(t, msg, "delete namespace qleet-db-orders on this runtime")
	require.Contains(t, msg, `create database "orders" again`)
	require.Contains(t, msg, `bucket "files" runs here`)
}
