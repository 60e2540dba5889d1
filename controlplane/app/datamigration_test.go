package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/dataservice"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// legacyCopy writes, in a cluster, a database as QleetOS made it before data services had one home: its
// own StatefulSet, Service and credentials (with a password of its own) on every runtime its consumer
// ran on, owned by the database.
func legacyCopy(ctx context.Context, t *testing.T, cs kubernetes.Interface, dbID, password string) []api.AppliedObject {
	t.Helper()
	ns := "qleet-db-ledger"
	labels := map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstanceID: dbID}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta("credentials"),
		Data: map[string][]byte{"username": []byte("app"), "password": []byte(password), "database": []byte("app")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta("db"), Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app.kubernetes.io/name": "db"}, Ports: []corev1.ServicePort{{Name: "main", Port: 5432}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	one := int32(1)
	sel := map[string]string{"app.kubernetes.io/name": "db"}
	_, err = cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{
		Replicas: &one, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: sel},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "postgres:16"}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return []api.AppliedObject{
		{APIVersion: "v1", Kind: "Namespace", Name: ns},
		{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "credentials"},
		{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: "db"},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: ns, Name: "db"},
	}
}

// TestLegacyCopiesGetOneHome: a database from before data services had one home runs as two copies, one
// per region, each with its own password and data. When it is next reconciled the copy where its first
// consumer runs first becomes its home, a HomeChosen warning says so, the other copy keeps its data
// (listed with copy = true, given to no one), and the app in both regions gets the home.
func TestLegacyCopiesGetOneHome(t *testing.T) {
	t.Parallel()
	a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, RuntimeRecheck: time.Second})
	ctx := context.Background()
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 1}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "books"}, Spec: api.WorkloadInstanceSpec{
		DefinitionID: webDefinition(t, cl, "books", 1, "").ID, Placement: &api.Placement{Regions: []string{"us-east", "eu-west"}}}})
	require.NoError(t, err)
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 4*time.Minute), inst.ID)
	require.NoError(t, err)
	runtimes, clusters := map[string]api.PlacementStatus{}, map[string]kubernetes.Interface{}
	for _, p := range inst.Status.Placements {
		runtimes[p.Region], clusters[p.Region] = p, localCluster(t, a, p.RuntimeID)
	}
	require.Len(t, runtimes, 2)

	// The database as the version before homes left it: a copy in each region, in its status with no role.
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "ledger"}})
	require.NoError(t, err)
	db, err = cl.Databases().WaitReconciled(cptest.Wait(t, time.Minute), db.ID)
	require.NoError(t, err)
	require.Nil(t, db.Status.Home)
	st := db.Status
	for _, region := range []string{"eu-west", "us-east"} {
		objs := legacyCopy(ctx, t, clusters[region], db.ID, "password-of-"+region)
		st.Runtimes = append(st.Runtimes, api.DataRuntimeStatus{RuntimeID: runtimes[region].RuntimeID, Runtime: runtimes[region].Runtime,
			Host: "db.qleet-db-ledger.svc.cluster.local", Port: 5432, Namespace: "qleet-db-ledger", Phase: api.PhaseReady, Objects: objs})
	}
	_, err = cl.Databases().UpdateStatus(ctx, db.ID, db.ResourceVersion, st)
	require.NoError(t, err)

	t.Cleanup(func() {
		if t.Failed() {
			got, _ := cl.WorkloadInstances().Get(ctx, inst.ID)
			d, _ := cl.Databases().Get(ctx, db.ID)
			t.Logf("app: %s %q; database: %s %q home %+v runtimes %+v", got.Status.Phase, got.Status.Message, d.Status.Phase, d.Status.Message, d.Status.Home, d.Status.Runtimes)
		}
	})
	// The app, first placed in us-east, uses it, as before: each region its own copy.
	updateInstance(ctx, t, cl, inst.ID, func(i *api.WorkloadInstance) { i.Spec.Databases = []string{db.ID} })
	await.True(t, 2*time.Minute, func() bool {
		got, err := cl.WorkloadInstances().Get(ctx, inst.ID)
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.Phase == api.PhaseReady
	}, "the app is Ready with the database")
	// The new version's controller reconciles every object once when it starts: this stands for that pass.
	require.NoError(t, cl.Databases().RequestReconcile(ctx, db.ID))
	await.True(t, 2*time.Minute, func() bool {
		got, err := cl.Databases().Get(ctx, db.ID)
		return err == nil && got.Status.Home != nil && got.Status.Phase == api.PhaseReady
	}, "the database has one home")
	await.True(t, 2*time.Minute, func() bool {
		s, err := clusters["eu-west"].CoreV1().Secrets(inst.Status.Namespace).Get(ctx, "qleet-database-ledger", metav1.GetOptions{})
		return err == nil && string(s.Data["DATABASE_PASSWORD"]) == "password-of-us-east"
	}, "the app in eu-west is given the home")

	db, err = cl.Databases().Get(ctx, db.ID)
	require.NoError(t, err)
	require.NotNil(t, db.Status.Home)
	require.Equal(t, runtimes["us-east"].RuntimeID, db.Status.Home.RuntimeID, "the copy where the first consumer runs first")
	require.Equal(t, dataservice.HomeByCopy, db.Status.Home.Reason)
	byRuntime := map[string]api.DataRuntimeStatus{}
	for _, rs := range db.Status.Runtimes {
		byRuntime[rs.RuntimeID] = rs
	}
	require.Equal(t, api.DataRoleHome, byRuntime[runtimes["us-east"].RuntimeID].Role)
	other := byRuntime[runtimes["eu-west"].RuntimeID]
	require.Equal(t, api.DataRoleAccess, other.Role)
	require.True(t, other.Copy, "the other copy is listed as one")

	evs, err := cl.Databases().Events(ctx, db.ID)
	require.NoError(t, err)
	var said string
	for _, e := range evs {
		if e.Reason == dataservice.ReasonHomeChosen && e.Type == api.EventWarning {
			said = e.Message
		}
	}
	require.Contains(t, said, `the copy on kubernetes_runtime "`+runtimes["us-east"].Runtime+`" became its one home`)
	require.Contains(t, said, "1 other copy(ies) keep their data")

	// The other copy's data stays where it was; both regions' apps get the home's password.
	_, err = clusters["eu-west"].AppsV1().StatefulSets("qleet-db-ledger").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err, "the other copy is kept")
	kept, err := clusters["eu-west"].CoreV1().Secrets("qleet-db-ledger").Get(ctx, "credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "password-of-eu-west", string(kept.Data["password"]), "its credentials too")
	for region, cs := range clusters {
		s, err := cs.CoreV1().Secrets(inst.Status.Namespace).Get(ctx, "qleet-database-ledger", metav1.GetOptions{})
		require.NoError(t, err, region)
		require.Equal(t, "password-of-us-east", string(s.Data["DATABASE_PASSWORD"]), region)
		if region == "eu-west" {
			require.True(t, strings.HasPrefix(string(s.Data["DATABASE_HOST"]), "db-home."), "eu-west reaches the home, not its old copy")
		}
	}
}
