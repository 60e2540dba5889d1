package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/dataservice"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// TestDependenciesHaveAHomeAndFollowTheirConsumers is the seeds' story in two regions: an app placed in
// eu-west and us-east uses a database and a bucket, each with one home (the app's first region), and an
// RPC node that follows the app. Both regions get the same database, the node is rolled out in both
// before the app, and it leaves a region when the app does.
func TestDependenciesHaveAHomeAndFollowTheirConsumers(t *testing.T) { //nolint:maintidx // one story, told in order
	t.Parallel()
	a, cl := cptest.Start(t, app.Config{ResyncInterval: time.Second, DriftInterval: 2 * time.Second, RuntimeRecheck: time.Second})
	ctx := context.Background()
	_, err := cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "default"},
		Spec: api.RuntimeProfileSpec{Provider: api.ProviderLocal, Regions: []string{"eu-west", "us-east"}, Nodes: 1}})
	require.NoError(t, err)
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "orders"}})
	require.NoError(t, err)
	bucket, err := cl.Buckets().Create(ctx, &api.Bucket{Meta: api.Meta{Name: "files"}})
	require.NoError(t, err)
	rpcDef := webDefinition(t, cl, "rpc", 1, "")
	rpc, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "rpc"}, Spec: api.WorkloadInstanceSpec{DefinitionID: rpcDef.ID}})
	require.NoError(t, err, "an instance with neither runtime_id nor placement runs where its consumers run")
	rpc, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, time.Minute), rpc.ID)
	require.NoError(t, err)
	require.Empty(t, rpc.Status.Placements, "Ready with nothing to run until a consumer is placed")
	require.Equal(t, api.PhaseReady, rpc.Status.Phase)

	appDef := webDefinition(t, cl, "app", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "app"}, Spec: api.WorkloadInstanceSpec{
		DefinitionID: appDef.ID, Placement: &api.Placement{Regions: []string{"eu-west", "us-east"}},
		Uses:      []api.Use{{InstanceID: rpc.ID, EnvPrefix: "RPC", Placement: api.UseWithConsumers}},
		Databases: []string{db.ID}, Buckets: []string{bucket.ID}}})
	require.NoError(t, err)
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 4*time.Minute), inst.ID)
	require.NoError(t, err)
	require.Len(t, inst.Status.Placements, 2)
	clusters := map[string]kubernetes.Interface{} // region -> cluster
	runtimes := map[string]string{}               // region -> runtime id
	for _, p := range inst.Status.Placements {
		clusters[p.Region] = localCluster(t, a, p.RuntimeID)
		runtimes[p.Region] = p.RuntimeID
	}
	home, away := clusters["eu-west"], clusters["us-east"]

	t.Run("the database has one home, in the first region of its first consumer, and every region gets it", func(t *testing.T) {
		got, err := cl.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Status.Home)
		require.Equal(t, runtimes["eu-west"], got.Status.Home.RuntimeID)
		require.Equal(t, "eu-west", got.Status.Home.Region)
		require.Equal(t, dataservice.HomeByConsumer, got.Status.Home.Reason)
		roles := map[string]string{}
		for _, rs := range got.Status.Runtimes {
			roles[rs.RuntimeID] = rs.Role
		}
		require.Equal(t, map[string]string{runtimes["eu-west"]: api.DataRoleHome, runtimes["us-east"]: api.DataRoleAccess}, roles)

		// One StatefulSet, at home; the other region has an alias Service whose endpoint is the home's
		// load balancer address, and a copy of the same credentials.
		_, err = home.AppsV1().StatefulSets("qleet-db-orders").Get(ctx, "db", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = away.AppsV1().StatefulSets("qleet-db-orders").Get(ctx, "db", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "no second database in us-east: %v", err)
		lb, err := home.CoreV1().Services("qleet-db-orders").Get(ctx, "db-remote", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, lb.Status.LoadBalancer.Ingress)
		require.Equal(t, lb.Status.LoadBalancer.Ingress[0].IP, got.Status.Home.Address)
		alias, err := away.CoreV1().Services("qleet-db-orders").Get(ctx, "db-home", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, alias.Spec.Selector, "an alias: its endpoint is set, not selected")
		slice, err := away.DiscoveryV1().EndpointSlices("qleet-db-orders").Get(ctx, "db-home", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{got.Status.Home.Address}, slice.Endpoints[0].Addresses)
		require.Equal(t, int32(5432), *slice.Ports[0].Port)

		creds, err := home.CoreV1().Secrets("qleet-db-orders").Get(ctx, "credentials", metav1.GetOptions{})
		require.NoError(t, err)
		password := string(creds.Data["password"])
		copied, err := away.CoreV1().Secrets("qleet-db-orders").Get(ctx, "credentials-home", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, password, string(copied.Data["password"]))

		// The app in each region gets the one database: the same credentials, through a name its
		// cluster resolves.
		hosts := map[string]string{"eu-west": "db.qleet-db-orders.svc.cluster.local", "us-east": "db-home.qleet-db-orders.svc.cluster.local"}
		for region, cs := range clusters {
			s, err := cs.CoreV1().Secrets(inst.Status.Namespace).Get(ctx, "qleet-database-orders", metav1.GetOptions{})
			require.NoError(t, err, region)
			require.Equal(t, password, string(s.Data["DATABASE_PASSWORD"]), region)
			require.Equal(t, "postgres://app:"+password+"@"+hosts[region]+":5432/app", string(s.Data["DATABASE_URL"]), region)
		}
	})

	t.Run("the bucket likewise: one object store, the same keys in both regions", func(t *testing.T) {
		got, err := cl.Buckets().Get(ctx, bucket.ID)
		require.NoError(t, err)
		require.Equal(t, runtimes["eu-west"], got.Status.Home.RuntimeID)
		_, err = away.AppsV1().StatefulSets("qleet-bucket-files").Get(ctx, "db", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%v", err)
		var keys []string
		for region, cs := range clusters {
			s, err := cs.CoreV1().Secrets(inst.Status.Namespace).Get(ctx, "qleet-bucket-files", metav1.GetOptions{})
			require.NoError(t, err, region)
			keys = append(keys, string(s.Data["S3_SECRET_ACCESS_KEY"]))
			require.Equal(t, "files", string(s.Data["S3_BUCKET"]))
		}
		require.Equal(t, keys[0], keys[1])
		require.NotEmpty(t, keys[0])
	})

	t.Run("read replicas: one in each region, streaming from the home; reads go to them, writes home", func(t *testing.T) {
		setReplicas := func(n int) {
			cur, err := cl.Databases().Get(ctx, db.ID)
			require.NoError(t, err)
			cur.Spec.ReplicasPerRegion = n
			_, err = cl.Databases().Update(ctx, cur)
			require.NoError(t, err)
		}
		readHosts := func(region string) (string, string) {
			s, err := clusters[region].CoreV1().Secrets(inst.Status.Namespace).Get(ctx, "qleet-database-orders", metav1.GetOptions{})
			require.NoError(t, err, region)
			return string(s.Data["DATABASE_HOST"]), string(s.Data["DATABASE_READ_HOST"])
		}
		setReplicas(1)
		await.True(t, 2*time.Minute, func() bool {
			for region := range clusters {
				if _, read := readHosts(region); read != "db-read.qleet-db-orders.svc.cluster.local" {
					return false
				}
			}
			return true
		}, "the app in each region reads from its region's replicas")
		got, err := cl.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		for _, rs := range got.Status.Runtimes {
			require.Equal(t, 1, rs.Replicas, rs.Runtime)
			require.Equal(t, "db-read.qleet-db-orders.svc.cluster.local", rs.ReadHost, rs.Runtime)
		}
		// Writes still go to the one home.
		for region, host := range map[string]string{"eu-west": "db.qleet-db-orders.svc.cluster.local", "us-east": "db-home.qleet-db-orders.svc.cluster.local"} {
			write, _ := readHosts(region)
			require.Equal(t, host, write, region)
			// The replica clones from the home: through the alias away from it.
			sts, err := clusters[region].AppsV1().StatefulSets("qleet-db-orders").Get(ctx, "db-read", metav1.GetOptions{})
			require.NoError(t, err, region)
			require.Equal(t, int32(1), *sts.Spec.Replicas)
			clone := sts.Spec.Template.Spec.InitContainers[0]
			require.Contains(t, clone.Command[2], "pg_basebackup")
			require.Equal(t, host, envOf(clone)["PRIMARY_HOST"].Value, region)
		}
		// The home accepts replication connections.
		primary, err := home.AppsV1().StatefulSets("qleet-db-orders").Get(ctx, "db", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{"-c", "hba_file=/etc/qleet/pg_hba.conf"}, primary.Spec.Template.Spec.Containers[0].Args)
		hba, err := home.CoreV1().ConfigMaps("qleet-db-orders").Get(ctx, "db-hba", metav1.GetOptions{})
		require.NoError(t, err)
		require.Contains(t, hba.Data["pg_hba.conf"], "host replication all all scram-sha-256")

		setReplicas(0)
		await.True(t, 2*time.Minute, func() bool {
			for _, cs := range clusters {
				if _, err := cs.AppsV1().StatefulSets("qleet-db-orders").Get(ctx, "db-read", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		}, "without replicas, none run")
		await.True(t, time.Minute, func() bool {
			_, read := readHosts("us-east")
			return read == ""
		}, "without replicas, the app gets no read variables")
	})

	t.Run("the RPC node follows the app: placed in both regions, rolled out before it, counting it", func(t *testing.T) {
		got, err := cl.WorkloadInstances().Get(ctx, rpc.ID)
		require.NoError(t, err)
		require.Len(t, got.Status.Placements, 2)
		for _, p := range got.Status.Placements {
			require.Equal(t, api.PhaseReady, p.Phase)
			require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: "app"}}, p.Consumers)
		}
		for region, cs := range clusters {
			require.Equal(t, int32(1), deployment(t, cs, got.Status.Namespace, "rpc").Status.AvailableReplicas, region)
			env := envOf(deployment(t, cs, inst.Status.Namespace, "app").Spec.Template.Spec.Containers[0])
			require.Equal(t, "rpc.rpc.svc.cluster.local", env["RPC_HOST"].Value, region)
		}
		rpcEvents, err := cl.WorkloadInstances().Events(ctx, rpc.ID)
		require.NoError(t, err)
		appEvents, err := cl.WorkloadInstances().Events(ctx, inst.ID)
		require.NoError(t, err)
		require.True(t, firstEvent(t, rpcEvents, "Reconciled").Before(firstEvent(t, appEvents, "Reconciled")), "the node is Ready first")
	})

	t.Run("the app leaves us-east: the node and the database's access leave with it, the data stays home", func(t *testing.T) {
		updateInstance(ctx, t, cl, inst.ID, func(i *api.WorkloadInstance) { i.Spec.Placement = &api.Placement{Regions: []string{"eu-west"}} })
		await.True(t, 2*time.Minute, func() bool {
			got, err := cl.WorkloadInstances().Get(ctx, rpc.ID)
			return err == nil && len(got.Status.Placements) == 1 && got.Status.Placements[0].RuntimeID == runtimes["eu-west"]
		}, "the node leaves us-east")
		await.True(t, time.Minute, func() bool {
			_, err := away.AppsV1().Deployments("rpc").Get(ctx, "rpc", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "its Deployment is gone from us-east")
		await.True(t, time.Minute, func() bool {
			_, err := away.CoreV1().Secrets("qleet-db-orders").Get(ctx, "credentials-home", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "no copy of the credentials stays where no consumer runs")
		_, err := home.AppsV1().StatefulSets("qleet-db-orders").Get(ctx, "db", metav1.GetOptions{})
		require.NoError(t, err, "the home stays")
	})

	t.Run("a home that holds data does not move: a spec asking for it fails with the reason", func(t *testing.T) {
		cur, err := cl.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		cur.Spec.Region = "us-east"
		_, err = cl.Databases().Update(ctx, cur)
		require.NoError(t, err)
		await.True(t, time.Minute, func() bool {
			got, err := cl.Databases().Get(ctx, db.ID)
			return err == nil && got.Status.Phase == api.PhaseFailed && got.Status.ObservedGeneration == got.Generation
		}, "the database fails")
		got, err := cl.Databases().Get(ctx, db.ID)
		require.NoError(t, err)
		require.Contains(t, got.Status.Message, `its data is on kubernetes_runtime "default-eu-west" in "eu-west"`)
	})

	t.Run("deleting the app removes the node from every runtime", func(t *testing.T) {
		require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, 2*time.Minute), inst.ID, client.DeleteOptions{Wait: true}))
		await.True(t, time.Minute, func() bool {
			got, err := cl.WorkloadInstances().Get(ctx, rpc.ID)
			return err == nil && len(got.Status.Placements) == 0
		}, "the node runs nowhere")
	})
}
