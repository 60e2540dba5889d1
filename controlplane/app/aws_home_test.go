package app_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// TestOneRDSInstanceForTwoEKSRegions: an app placed on EKS in us-east-1 and eu-west-1 uses one database
// and an RPC node that follows it. The stand-in sees exactly one CreateDBInstance, in the home region
// (us-east-1, the app's first); the runtime in eu-west-1 is given the same RDS address, and the node
// runs in both regions.
func TestOneRDSInstanceForTwoEKSRegions(t *testing.T) {
	t.Parallel()
	sim, acct := startAWS(t)
	_, cl := cptest.Start(t, app.Config{AWSPoll: 250 * time.Millisecond, ResyncInterval: 2 * time.Second})
	ctx := context.Background()
	ca, err := cl.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "aws"}, Spec: api.CloudAccountSpec{
		Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}})
	require.NoError(t, err)
	_, err = cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "aws"}, Spec: api.RuntimeProfileSpec{
		Provider: api.ProviderEKS, Regions: []string{"us-east-1", "eu-west-1"}, CloudAccountID: ca.ID, MinNodes: 1, MaxNodes: 2, Nodes: 1}})
	require.NoError(t, err)
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "orders"}})
	require.NoError(t, err)
	bucket, err := cl.Buckets().Create(ctx, &api.Bucket{Meta: api.Meta{Name: "media"}})
	require.NoError(t, err)
	rpc, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "rpc"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: webDefinition(t, cl, "rpc", 1, "").ID}})
	require.NoError(t, err)
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "shop"}, Spec: api.WorkloadInstanceSpec{
		DefinitionID: webDefinition(t, cl, "web", 1, "").ID, Placement: &api.Placement{Regions: []string{"us-east-1", "eu-west-1"}},
		Databases: []string{db.ID}, Buckets: []string{bucket.ID}, Uses: []api.Use{{InstanceID: rpc.ID, EnvPrefix: "RPC", Placement: api.UseWithConsumers}}}})
	require.NoError(t, err)
	start := time.Now()
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 3*time.Minute), inst.ID)
	require.NoError(t, err)
	t.Logf("an app on EKS in two regions with one database and a node that follows it: Ready in %s", time.Since(start).Round(100*time.Millisecond))
	require.Len(t, inst.Status.Placements, 2)

	db, err = cl.Databases().Get(ctx, db.ID)
	require.NoError(t, err)
	require.NotNil(t, db.Status.Home)
	require.Equal(t, "us-east-1", db.Status.Home.Region)
	require.Len(t, db.Status.Runtimes, 2)
	home, access := db.Status.Runtimes[0], db.Status.Runtimes[1]
	require.Equal(t, api.DataRoleHome, home.Role)
	require.Equal(t, api.DataRoleAccess, access.Role)
	require.Contains(t, home.Host, ".rds.")
	require.Equal(t, home.Host, access.Host, "eu-west-1 is given the one RDS instance's address")
	require.Equal(t, home.Host, db.Status.Home.Address)

	var creates []string
	for _, c := range awssim.Filter(sim.Calls(), "rds", "CreateDBInstance") {
		if c.Error == "" {
			creates = append(creates, c.Region)
		}
	}
	require.Equal(t, []string{"us-east-1"}, creates, "one RDS instance, in the home region")
	var instances []string
	for _, r := range sim.Resources() {
		if r.Type == "db-instance" {
			instances = append(instances, r.Region)
		}
	}
	require.Equal(t, []string{"us-east-1"}, instances)

	rpc, err = cl.WorkloadInstances().Get(ctx, rpc.ID)
	require.NoError(t, err)
	var regions []string
	for _, p := range rpc.Status.Placements {
		regions = append(regions, p.Region)
		require.Equal(t, []api.ObjectRef{{Kind: api.KindWorkloadInstance, ID: inst.ID, Name: "shop"}}, p.Consumers)
	}
	require.ElementsMatch(t, []string{"us-east-1", "eu-west-1"}, regions, "the node follows the app into both regions")

	// One S3 bucket, in the home region; each cluster's consumers reach it with a role of their own,
	// trusted by their cluster only (a role trusts one OpenID Connect provider), granting that bucket.
	bucket, err = cl.Buckets().Get(ctx, bucket.ID)
	require.NoError(t, err)
	require.Equal(t, "us-east-1", bucket.Status.Home.Region)
	var buckets []string
	for _, c := range awssim.Filter(sim.Calls(), "s3", "CreateBucket") {
		if c.Error == "" {
			buckets = append(buckets, c.Region)
		}
	}
	require.Equal(t, []string{"us-east-1"}, buckets, "one S3 bucket")
	roles := map[string]bool{}
	for _, c := range awssim.Filter(sim.Calls(), "iam", "PutRolePolicy") {
		if c.Error == "" {
			roles[c.Params["RoleName"]] = true
		}
	}
	require.Len(t, roles, 2, "a role per cluster: %v", roles)
	aws, err := awscloud.Account{Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}.Connect(ctx, "us-east-1")
	require.NoError(t, err)
	iamc := iam.NewFromConfig(aws.Config)
	trusts := map[string]bool{}
	for role := range roles {
		got, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: &role})
		require.NoError(t, err)
		trust, _ := url.QueryUnescape(*got.Role.AssumeRolePolicyDocument)
		require.Equal(t, 1, strings.Count(trust, "oidc-provider/"), "one cluster per role")
		trusts[trust] = true
	}
	require.Len(t, trusts, 2, "each role trusts its own cluster")

	// Read replicas: one RDS read replica in each region, of the one home (by ARN across regions), in
	// that region's cluster VPC; each region reads from its own.
	db.Spec.ReplicasPerRegion = 1
	_, err = cl.Databases().Update(ctx, db)
	require.NoError(t, err)
	db, err = cl.Databases().WaitReconciled(cptest.Wait(t, 2*time.Minute), db.ID)
	require.NoError(t, err)
	require.Equal(t, api.PhaseReady, db.Status.Phase, db.Status.Message)
	replicas := map[string]string{} // region -> source
	for _, c := range awssim.Filter(sim.Calls(), "rds", "CreateDBInstanceReadReplica") {
		if c.Error == "" {
			replicas[c.Region] = c.Params["SourceDBInstanceIdentifier"]
			require.NotEmpty(t, c.Params["DBSubnetGroupName"], c.Region)
		}
	}
	primary := home.CloudID
	require.Equal(t, map[string]string{"us-east-1": primary, "eu-west-1": "arn:aws:rds:us-east-1:" + acct.ID + ":db:" + primary}, replicas)
	var replicaIDs []string
	for _, rs := range db.Status.Runtimes {
		region := map[string]string{api.DataRoleHome: "us-east-1", api.DataRoleAccess: "eu-west-1"}[rs.Role]
		require.Equal(t, 1, rs.Replicas, rs.Runtime)
		require.Len(t, rs.ReplicaCloudIDs, 1, rs.Runtime)
		replicaIDs = append(replicaIDs, region+" "+rs.ReplicaCloudIDs[0])
		require.Contains(t, rs.ReadHost, rs.ReplicaCloudIDs[0]+".", rs.Runtime)
		require.Contains(t, rs.ReadHost, "."+region+".", "read in its own region")
		require.Equal(t, home.Host, rs.Host, "writes go home")
	}
	var subnetGroups []string
	for _, c := range awssim.Filter(sim.Calls(), "rds", "CreateDBSubnetGroup") {
		if c.Error == "" {
			subnetGroups = append(subnetGroups, c.Region)
		}
	}
	require.ElementsMatch(t, []string{"us-east-1", "eu-west-1"}, subnetGroups, "the home's, and one for the replica in eu-west-1's VPC")

	require.NoError(t, cl.WorkloadInstances().Delete(cptest.Wait(t, 2*time.Minute), inst.ID, client.DeleteOptions{Wait: true}))
	require.NoError(t, cl.Databases().Delete(cptest.Wait(t, 3*time.Minute), db.ID, client.DeleteOptions{Wait: true}))
	require.NoError(t, cl.Buckets().Delete(cptest.Wait(t, 2*time.Minute), bucket.ID, client.DeleteOptions{Wait: true}))
	for _, r := range sim.Resources() {
		require.False(t, r.Type == "role" && roles[r.ID], "the bucket's roles go with it: %+v", r)
	}
	var deletes []string
	for _, c := range awssim.Filter(sim.Calls(), "rds", "DeleteDBInstance") {
		if c.Error == "" {
			deletes = append(deletes, c.Region+" "+c.Params["DBInstanceIdentifier"])
		}
	}
	require.Len(t, deletes, 3, "the two replicas and the one home; nothing else")
	require.ElementsMatch(t, replicaIDs, deletes[:2], "the replicas go first")
	require.Equal(t, "us-east-1 "+primary, deletes[2], "then the one home")
	for _, r := range sim.Resources() {
		require.NotEqual(t, "db-instance", r.Type, "no RDS instance is left: %+v", r)
		require.NotEqual(t, "db-subnet-group", r.Type, "no DB subnet group is left: %+v", r)
	}
}
