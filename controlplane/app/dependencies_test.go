package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func firstEvent(t *testing.T, evs []api.Event, reason string) time.Time {
	t.Helper()
	for _, e := range evs {
		if e.Reason == reason {
			return e.CreatedAt
		}
	}
	t.Fatalf("no %s event in %+v", reason, evs)
	return time.Time{}
}

func lastEvent(t *testing.T, evs []api.Event, reason string) time.Time {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Reason == reason {
			return evs[i].CreatedAt
		}
	}
	t.Fatalf("no %s event in %+v", reason, evs)
	return time.Time{}
}

// TestSecretsAndUses: an app that uses an RPC node and gets a secret: the node rolls out first, the app
// gets its address and the secret as env, a secret change rolls the pods, a Failed dependency fails its
// consumer, a used instance cannot be deleted while used, and no secret value leaks.
func TestSecretsAndUses(t *testing.T) {
	t.Parallel()
	const marker = "s3cr3t-marker-7f1c"
	logs := &lockedBuffer{}
	sim := kubesimtest.Start(t, kubesimtest.WithName("deps"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	rt := readyRuntime(t, cl, "deps", sim.Kubeconfig)
	rpcDef, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "rpc"},
		Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "node", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 8545}}}}}})
	require.NoError(t, err)
	appDef := webDefinition(t, cl, "app", 1, "")

	start := time.Now()
	rpc, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "rpc"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: rpcDef.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	app1, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: appDef.ID, RuntimeID: rt.ID, Uses: []api.Use{{InstanceID: rpc.ID, EnvPrefix: "RPC"}}}})
	require.NoError(t, err)
	sec, err := cl.Secrets().Create(ctx, &api.Secret{Meta: api.Meta{Name: "api-key"},
		Spec: api.SecretSpec{InstanceIDs: []string{app1.ID}, Values: map[string]string{"API_KEY": marker}}})
	require.NoError(t, err)

	t.Run("the app is Ready after the node, with its address and the secret as env", func(t *testing.T) {
		got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), app1.ID)
		require.NoError(t, err)
		t.Logf("seeds-shaped example (an RPC node, an app using it, a secret), create to Ready: %s", time.Since(start).Round(time.Millisecond))
		require.Equal(t, []api.ObjectRef{{Kind: api.KindSecret, ID: sec.ID, Name: "api-key"}}, got.Status.Dependencies)
		rpcEvents, err := cl.WorkloadInstances().Events(ctx, rpc.ID)
		require.NoError(t, err)
		appEvents, err := cl.WorkloadInstances().Events(ctx, app1.ID)
		require.NoError(t, err)
		require.True(t, firstEvent(t, rpcEvents, "Reconciled").Before(firstEvent(t, appEvents, "Reconciled")), "the node is Ready before the app")

		d := deployment(t, cs, "app", "app")
		env := envOf(d.Spec.Template.Spec.Containers[0])
		require.Equal(t, "rpc.rpc.svc.cluster.local", env["RPC_HOST"].Value)
		require.Equal(t, "8545", env["RPC_PORT"].Value)
		require.Equal(t, "http://rpc.rpc.svc.cluster.local:8545", env["RPC_URL"].Value)
		svc, err := cs.CoreV1().Services("rpc").Get(ctx, "rpc", metav1.GetOptions{})
		require.NoError(t, err, "RPC_HOST names the node's Service")
		require.Equal(t, int32(8545), svc.Spec.Ports[0].Port)
		require.Empty(t, env["API_KEY"].Value, "the value is not in the Deployment")
		require.Equal(t, "qleet-secret-api-key", env["API_KEY"].ValueFrom.SecretKeyRef.Name)
		s, err := cs.CoreV1().Secrets("app").Get(ctx, "qleet-secret-api-key", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, marker, string(s.Data["API_KEY"]))
	})

	t.Run("a secret change rolls the pods, and leaves no stale copy", func(t *testing.T) {
		before := deployment(t, cs, "app", "app").Spec.Template.Annotations["qleetos.io/dependencies"]
		cur, err := cl.Secrets().Get(ctx, sec.ID)
		require.NoError(t, err)
		cur.Spec.Values = map[string]string{"API_KEY": marker + "-rotated"}
		_, err = cl.Secrets().Update(ctx, cur)
		require.NoError(t, err)
		await.True(t, time.Minute, func() bool {
			d := deployment(t, cs, "app", "app")
			return d.Spec.Template.Annotations["qleetos.io/dependencies"] != before && d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1
		}, "a new pod template rolls out")
		s, err := cs.CoreV1().Secrets("app").Get(ctx, "qleet-secret-api-key", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, marker+"-rotated", string(s.Data["API_KEY"]))
		secrets, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		n := 0
		for _, s := range secrets.Items {
			for _, v := range s.Data {
				if string(v) == marker {
					n++
				}
			}
		}
		require.Zero(t, n, "no copy of the old value")
	})

	t.Run("a used instance cannot be deleted while used", func(t *testing.T) {
		err := cl.WorkloadInstances().Delete(ctx, rpc.ID, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "%v", err)
		var ae *api.Error
		require.ErrorAs(t, err, &ae)
		require.Contains(t, ae.Dependents, api.ObjectRef{Kind: api.KindWorkloadInstance, ID: app1.ID, Name: "app"})
	})

	t.Run("a Failed dependency fails its consumer, naming it", func(t *testing.T) {
		// rpc2's manifests name a ConfigMap someone else made: it fails, and so does its user.
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rpc2"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().ConfigMaps("rpc2").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		bad, err := cl.WorkloadDefinitions().Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: "bad"},
			Spec: api.WorkloadDefinitionSpec{Manifests: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: taken\ndata: {a: b}\n"}})
		require.NoError(t, err)
		rpc2, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "rpc2"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: bad.ID, RuntimeID: rt.ID}})
		require.NoError(t, err)
		user, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "user"},
			Spec: api.WorkloadInstanceSpec{DefinitionID: appDef.ID, RuntimeID: rt.ID, Uses: []api.Use{{InstanceID: rpc2.ID, EnvPrefix: "RPC"}}}})
		require.NoError(t, err)
		_, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), user.ID)
		require.True(t, client.IsFailed(err), "%v", err)
		require.Contains(t, err.Error(), `workload_instance "rpc2" failed`)
		require.Contains(t, err.Error(), "ConfigMap/rpc2/taken already exists")
		_, err = cs.AppsV1().Deployments("user").Get(ctx, "user", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing of the user was rolled out: %v", err)
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), user.ID, client.DeleteOptions{Wait: true}))
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), rpc2.ID, client.DeleteOptions{Wait: true}))
	})

	t.Run("no secret value in responses, events or logs", func(t *testing.T) {
		for _, who := range []*client.Client{cl} {
			raw, err := who.Raw(api.KindSecret).Get(ctx, sec.ID)
			require.NoError(t, err)
			data, _ := json.Marshal(raw)
			require.NotContains(t, string(data), marker)
			for _, k := range []string{api.KindSecret, api.KindWorkloadInstance} {
				list, err := who.Raw(k).List(ctx, client.ListOptions{})
				require.NoError(t, err)
				data, _ := json.Marshal(list)
				require.NotContains(t, string(data), marker)
			}
			for kind, id := range map[string]string{api.KindSecret: sec.ID, api.KindWorkloadInstance: app1.ID} {
				evs, err := who.Raw(kind).Events(ctx, id)
				require.NoError(t, err)
				data, _ := json.Marshal(evs)
				require.NotContains(t, string(data), marker)
			}
		}
		require.NotEmpty(t, logs.String())
		require.False(t, strings.Contains(logs.String(), marker), "no log line holds the value")
	})

	t.Run("deleting the secret, the app, then the node leaves nothing behind", func(t *testing.T) {
		require.NoError(t, cl.Secrets().Delete(cptest.Wait(t, time.Minute), sec.ID, client.DeleteOptions{Wait: true}))
		await.True(t, time.Minute, func() bool {
			_, err := cs.CoreV1().Secrets("app").Get(ctx, "qleet-secret-api-key", metav1.GetOptions{})
			_, hasEnv := envOf(deployment(t, cs, "app", "app").Spec.Template.Spec.Containers[0])["API_KEY"]
			return apierrors.IsNotFound(err) && !hasEnv
		}, "the secret leaves the cluster and the pods")
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), app1.ID, client.DeleteOptions{Wait: true}))
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), rpc.ID, client.DeleteOptions{Wait: true}))
		for _, ns := range []string{"app", "rpc"} {
			await.True(t, time.Minute, func() bool {
				_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, "%s", ns)
		}
	})
}

// TestDatabaseRetainAndReattach: a database is Ready before its instance, which gets the connection
// details from a Secret; a retained database keeps its volume and credentials through delete and
// re-create; deleting without retain leaves nothing behind.
func TestDatabaseRetainAndReattach(t *testing.T) { //nolint:maintidx // one story, told in order
	t.Parallel()
	sim := kubesimtest.Start(t, kubesimtest.WithName("db"), kubesimtest.WithNodes(1))
	_, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: 2 * time.Second})
	ctx := context.Background()
	cs := clientset(t, sim.Kubeconfig)
	appDef := webDefinition(t, cl, "app", 1, "")
	// The runtime is not waited for: the instance's first reconcile waits for it, so that the database
	// and the bucket, created just after the instance (they name it), exist by the time it runs.
	rt, err := cl.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "db"},
		Spec: runtimeSpec(cptest.Kubeconfig(t, sim.Kubeconfig))})
	require.NoError(t, err)
	start := time.Now()
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "app"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: appDef.ID, RuntimeID: rt.ID}})
	require.NoError(t, err)
	newDB := func() *api.Database {
		db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "main"},
			Spec: api.DatabaseSpec{InstanceID: inst.ID, Retain: true}})
		require.NoError(t, err)
		return db
	}
	db := newDB()
	bucket, err := cl.Buckets().Create(ctx, &api.Bucket{Meta: api.Meta{Name: "files"}, Spec: api.BucketSpec{InstanceID: inst.ID}})
	require.NoError(t, err)
	// The instance's first reconcile may run before the database and the bucket exist (they are
	// created after it, since they name it), and then it is Ready without them first; their creation
	// reconciles it again. What counts is that it ends Ready with both.
	await.Explained(t, 2*time.Minute, func() (bool, string) {
		got, err := cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 2*time.Minute), inst.ID)
		if err != nil {
			return false, err.Error()
		}
		deps := got.Status.Dependencies
		return slices.Contains(deps, api.ObjectRef{Kind: api.KindBucket, ID: bucket.ID, Name: "files"}) &&
			slices.Contains(deps, api.ObjectRef{Kind: api.KindDatabase, ID: db.ID, Name: "main"}), fmt.Sprintf("dependencies %v", deps)
	})
	t.Logf("an app with a database and a bucket, create to Ready: %s", time.Since(start).Round(time.Millisecond))

	var password, pvcUID string
	t.Run("the connection details reach the app and point at the database's Service", func(t *testing.T) {
		dbEvents, err := cl.Databases().Events(ctx, db.ID)
		require.NoError(t, err)
		appEvents, err := cl.WorkloadInstances().Events(ctx, inst.ID)
		require.NoError(t, err)
		dbReady, appReady := firstEvent(t, dbEvents, "Reconciled"), lastEvent(t, appEvents, "Reconciled")
		require.True(t, dbReady.Before(appReady), "the database is Ready (%s) before the app is Ready with it (%s); app events %+v",
			dbReady.Format(time.StampMicro), appReady.Format(time.StampMicro), appEvents)
		env := envOf(deployment(t, cs, "app", "app").Spec.Template.Spec.Containers[0])
		for _, k := range []string{"DATABASE_URL", "DATABASE_HOST", "DATABASE_PORT", "DATABASE_NAME", "DATABASE_USER", "DATABASE_PASSWORD"} {
			require.Equal(t, "qleet-database-main", env[k].ValueFrom.SecretKeyRef.Name, k)
		}
		s, err := cs.CoreV1().Secrets("app").Get(ctx, "qleet-database-main", metav1.GetOptions{})
		require.NoError(t, err)
		creds, err := cs.CoreV1().Secrets("qleet-db-main").Get(ctx, "credentials", metav1.GetOptions{})
		require.NoError(t, err)
		password = string(creds.Data["password"])
		require.Len(t, password, 24)
		require.Equal(t, "postgres://app:"+password+"@db.qleet-db-main.svc.cluster.local:5432/app", string(s.Data["DATABASE_URL"]))
		svc, err := cs.CoreV1().Services("qleet-db-main").Get(ctx, "db", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(5432), svc.Spec.Ports[0].Port)
		pvc, err := cs.CoreV1().PersistentVolumeClaims("qleet-db-main").Get(ctx, "data-db-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
		pvcUID = string(pvc.UID)

		// The bucket: an S3 endpoint, the bucket's name and credentials.
		for _, k := range []string{"S3_ENDPOINT", "S3_BUCKET", "S3_REGION", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"} {
			require.Equal(t, "qleet-bucket-files", env[k].ValueFrom.SecretKeyRef.Name, k)
		}
		bs, err := cs.CoreV1().Secrets("app").Get(ctx, "qleet-bucket-files", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "http://db.qleet-bucket-files.svc.cluster.local:9000", string(bs.Data["S3_ENDPOINT"]))
		require.Equal(t, "files", string(bs.Data["S3_BUCKET"]))
		bcreds, err := cs.CoreV1().Secrets("qleet-bucket-files").Get(ctx, "credentials", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, string(bcreds.Data["secret_key"]), string(bs.Data["S3_SECRET_ACCESS_KEY"]))
		got, err := cl.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		data, _ := json.Marshal(got)
		require.NotContains(t, string(data), password, "the password is not in the API")
	})

	// detach takes a database off the instance its spec.instance_id names: while attached, the instance
	// uses it and it cannot be deleted.
	detach := func(t *testing.T, id string) {
		t.Helper()
		err := cl.Databases().Delete(ctx, id, client.DeleteOptions{})
		require.True(t, api.IsConflict(err), "an attached database is protected while its instance uses it: %v", err)
		cur, err := cl.Databases().Get(ctx, id)
		require.NoError(t, err)
		cur.Spec.InstanceID = ""
		_, err = cl.Databases().Update(ctx, cur)
		require.NoError(t, err)
	}

	t.Run("a retained database survives delete and re-create, with its volume and credentials", func(t *testing.T) {
		detach(t, db.ID)
		require.NoError(t, cl.Databases().Delete(cptest.Wait(t, time.Minute), db.ID, client.DeleteOptions{Wait: true}))
		_, err := cs.AppsV1().StatefulSets("qleet-db-main").Get(ctx, "db", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%v", err)
		await.True(t, time.Minute, func() bool {
			_, hasURL := envOf(deployment(t, cs, "app", "app").Spec.Template.Spec.Containers[0])["DATABASE_URL"]
			return !hasURL
		}, "the app no longer gets the details")
		pvc, err := cs.CoreV1().PersistentVolumeClaims("qleet-db-main").Get(ctx, "data-db-0", metav1.GetOptions{})
		require.NoError(t, err, "the volume stays")
		require.Equal(t, pvcUID, string(pvc.UID))

		db = newDB()
		_, err = cl.Databases().WaitReconciled(cptest.Wait(t, 2*time.Minute), db.ID)
		require.NoError(t, err)
		creds, err := cs.CoreV1().Secrets("qleet-db-main").Get(ctx, "credentials", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, password, string(creds.Data["password"]), "the same credentials")
		pvc, err = cs.CoreV1().PersistentVolumeClaims("qleet-db-main").Get(ctx, "data-db-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, pvcUID, string(pvc.UID), "the same volume")
		await.True(t, time.Minute, func() bool {
			_, hasURL := envOf(deployment(t, cs, "app", "app").Spec.Template.Spec.Containers[0])["DATABASE_URL"]
			return hasURL
		}, "the app gets the details again")
	})

	t.Run("a namespace QleetOS did not make is refused, and left intact", func(t *testing.T) {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "qleet-db-theirs"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().PersistentVolumeClaims("qleet-db-theirs").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		theirs, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "theirs"}, Spec: api.DatabaseSpec{InstanceID: inst.ID}})
		require.NoError(t, err)
		_, err = cl.Databases().WaitReconciled(cptest.Wait(t, time.Minute), theirs.ID)
		require.True(t, client.IsFailed(err), "%v", err)
		require.Contains(t, err.Error(), "namespace qleet-db-theirs already exists and was not created by QleetOS")
		_, err = cs.AppsV1().StatefulSets("qleet-db-theirs").Get(ctx, "db", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing was put there: %v", err)
		detach(t, theirs.ID)
		require.NoError(t, cl.Databases().Delete(cptest.Wait(t, time.Minute), theirs.ID, client.DeleteOptions{Wait: true}))
		_, err = cs.CoreV1().PersistentVolumeClaims("qleet-db-theirs").Get(ctx, "data-db-0", metav1.GetOptions{})
		require.NoError(t, err, "their volume claim is intact")
		_, err = cs.CoreV1().Namespaces().Get(ctx, "qleet-db-theirs", metav1.GetOptions{})
		require.NoError(t, err, "their namespace is intact")
	})

	t.Run("deleting the app, then the database without retain, leaves nothing behind", func(t *testing.T) {
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, time.Minute), inst.ID, client.DeleteOptions{Wait: true}))
		cur, err := cl.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		cur.Spec.Retain = false
		_, err = cl.Databases().Update(ctx, cur)
		require.NoError(t, err)
		require.NoError(t, cl.Databases().Delete(cptest.Wait(t, 2*time.Minute), db.ID, client.DeleteOptions{Wait: true}))
		require.NoError(t, cl.Buckets().Delete(cptest.Wait(t, 2*time.Minute), bucket.ID, client.DeleteOptions{Wait: true}))
		for _, ns := range []string{"app", "qleet-db-main", "qleet-bucket-files"} {
			await.True(t, time.Minute, func() bool {
				_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, "%s", ns)
		}
	})
}
