package app_test

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/dataservice"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
)

// startAWS starts the AWS stand-in with kubesim clusters behind its EKS endpoints, and an account.
func startAWS(t *testing.T) (*awssim.Sim, awssim.Account) {
	t.Helper()
	d := 100 * time.Millisecond
	sim := awssim.New(awssim.Config{Kubesim: true, ClusterDelay: d, NodegroupDelay: d, DBDelay: d, DeleteDelay: d})
	require.NoError(t, sim.Start(context.Background()))
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	return sim, acct
}

// callCounts counts the stand-in's calls per service; the STS checks of the EKS tokens that the Kubernetes
// requests to the cluster carry are counted apart.
func callCounts(calls []awssim.Call) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		if c.Params["via"] == "eks-token" {
			out["eks-token checks (Kubernetes requests)"]++
			continue
		}
		out[c.Service]++
	}
	return out
}

func formatCounts(m map[string]int) string {
	var parts []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		total += m[k]
	}
	return fmt.Sprintf("%s (total %d)", strings.Join(parts, ", "), total)
}

// TestAppOnEKS is the story: a profile with provider eks in us-east-1 and an app placed there with
// a database and a bucket. QleetOS validates the cloud account, provisions the EKS cluster through the
// stand-in, deploys the app into the kubesim behind it (reached with EKS tokens), serves the database
// with RDS and the bucket with S3 (the runtime's provider chooses, not the spec), and deleting it all
// leaves nothing in the stand-in.
func TestAppOnEKS(t *testing.T) {
	t.Parallel()
	sim, acct := startAWS(t)
	_, cl := cptest.Start(t, app.Config{AWSPoll: 250 * time.Millisecond, ResyncInterval: 2 * time.Second})
	ctx := context.Background()

	ca, err := cl.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "aws"}, Spec: api.CloudAccountSpec{
		Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}})
	require.NoError(t, err)
	ca, err = cl.CloudAccounts().WaitReconciled(cptest.Wait(t, 30*time.Second), ca.ID)
	require.NoError(t, err)
	require.Equal(t, acct.ID, ca.Status.AccountID)
	require.Empty(t, ca.Spec.SecretAccessKey, "the secret is not returned to an admin token")

	_, err = cl.RuntimeProfiles().Create(ctx, &api.RuntimeProfile{Meta: api.Meta{Name: "aws"}, Spec: api.RuntimeProfileSpec{
		Provider: api.ProviderEKS, Regions: []string{"us-east-1"}, CloudAccountID: ca.ID, MinNodes: 1, MaxNodes: 3, Nodes: 2}})
	require.NoError(t, err)
	def := webDefinition(t, cl, "web", 1, "")
	inst, err := cl.WorkloadInstances().Create(ctx, &api.WorkloadInstance{Meta: api.Meta{Name: "shop"},
		Spec: api.WorkloadInstanceSpec{DefinitionID: def.ID, Placement: &api.Placement{Regions: []string{"us-east-1"}}}})
	require.NoError(t, err)
	db, err := cl.Databases().Create(ctx, &api.Database{Meta: api.Meta{Name: "orders"}, Spec: api.DatabaseSpec{InstanceID: inst.ID}})
	require.NoError(t, err)
	bucket, err := cl.Buckets().Create(ctx, &api.Bucket{Meta: api.Meta{Name: "media"}, Spec: api.BucketSpec{InstanceID: inst.ID}})
	require.NoError(t, err)

	start := time.Now()
	inst, err = cl.WorkloadInstances().WaitReconciled(cptest.Wait(t, 90*time.Second), inst.ID)
	require.NoError(t, err)
	applied := time.Since(start)
	require.Len(t, inst.Status.Placements, 1)
	rt, err := cl.KubernetesRuntimes().Get(ctx, inst.Status.Placements[0].RuntimeID)
	require.NoError(t, err)
	require.Equal(t, api.ProviderEKS, rt.Spec.Provider)
	require.Equal(t, "aws", rt.Labels[api.LabelProfile])
	require.Equal(t, acct.ID, rt.Status.Cloud.AccountID)
	require.Positive(t, rt.Status.NodesReady, "the kubesim behind the EKS endpoint answers with EKS tokens")
	require.Equal(t, int32(1), inst.Status.ReadyReplicas)

	db, err = cl.Databases().WaitReconciled(cptest.Wait(t, 30*time.Second), db.ID)
	require.NoError(t, err)
	require.Len(t, db.Status.Runtimes, 1)
	require.NotEmpty(t, db.Status.Runtimes[0].CloudID, "served by RDS")
	bucket, err = cl.Buckets().WaitReconciled(cptest.Wait(t, 30*time.Second), bucket.ID)
	require.NoError(t, err)
	require.Equal(t, sim.URL(), bucket.Status.Runtimes[0].Endpoint, "served by S3")
	types := map[string]int{}
	for _, r := range sim.Resources() {
		types[r.Type]++
		require.NotEmpty(t, r.Tags["qleet.io/owner-id"], "%s %s carries QleetOS's ownership", r.Type, r.ID)
	}
	require.Equal(t, map[string]int{"role": 3, "oidc-provider": 1, "vpc": 1, "subnet": 2, "cluster": 1, "nodegroup": 1, "db-subnet-group": 1, "security-group": 1, "db-instance": 1, "bucket": 1}, types)
	for _, r := range sim.Resources() {
		if r.Type == "db-instance" {
			require.Equal(t, db.Status.Runtimes[0].CloudID, r.ID)
			require.Contains(t, db.Status.Runtimes[0].Host, ".rds.", "the instance gets the RDS address")
		}
	}
	applyCalls := sim.Calls()

	// IRSA: the runtime registers its cluster's issuer, and the bucket gets a role that the instance's
	// service account (and no other) may assume with a web identity, allowed S3 on that bucket only.
	var iamMutations []string
	for _, c := range awssim.Filter(applyCalls, "iam", "") {
		if c.Error == "" && !strings.HasPrefix(c.Action, "Get") && !strings.HasPrefix(c.Action, "List") {
			iamMutations = append(iamMutations, c.Action)
		}
	}
	require.Equal(t, []string{"CreateRole", "AttachRolePolicy", "CreateRole", "AttachRolePolicy", "AttachRolePolicy", "AttachRolePolicy",
		"CreateOpenIDConnectProvider", "CreateRole", "PutRolePolicy"}, iamMutations)
	clients, err := awscloud.Account{Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}.Connect(ctx, "")
	require.NoError(t, err)
	bucketName := bucket.Status.Runtimes[0].CloudID
	role, err := clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: &bucketName})
	require.NoError(t, err)
	trust, err := url.QueryUnescape(sdkaws.ToString(role.Role.AssumeRolePolicyDocument))
	require.NoError(t, err)
	cluster, err := clients.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &rt.Status.Cloud.ClusterName})
	require.NoError(t, err)
	issuer := sdkaws.ToString(cluster.Cluster.Identity.Oidc.Issuer)
	require.JSONEq(t, awscloud.WebIdentityTrust(awscloud.OIDCProviderARN(acct.ID, issuer), issuer, []string{"system:serviceaccount:shop:default"}), trust)
	require.Contains(t, trust, `"sts:AssumeRoleWithWebIdentity"`)
	rc, err := awscloud.RESTConfig(sdkaws.ToString(cluster.Cluster.Endpoint), sdkaws.ToString(cluster.Cluster.CertificateAuthority.Data), awscloud.NewTokenSource(clients.Config, rt.Status.Cloud.ClusterName))
	require.NoError(t, err)
	kc, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	await.True(t, 30*time.Second, func() bool {
		sa, err := kc.CoreV1().ServiceAccounts("shop").Get(ctx, "default", metav1.GetOptions{})
		return err == nil && sa.Annotations["eks.amazonaws.com/role-arn"] == sdkaws.ToString(role.Role.Arn)
	}, "the instance's service account names the bucket's role")
	await.True(t, 30*time.Second, func() bool {
		dep, err := kc.AppsV1().Deployments("shop").Get(ctx, "shop", metav1.GetOptions{})
		return err == nil && dep.Spec.Template.Annotations[dataservice.RestartedForRole] == sdkaws.ToString(role.Role.Arn)
	}, "the instance's pods are restarted once for the role, so that they get it")
	t.Logf("apply: instance Ready in %s; AWS calls per service: %s", applied.Round(100*time.Millisecond), formatCounts(callCounts(applyCalls)))

	sim.ResetCalls()
	start = time.Now()
	// Attached by their own instance_id, the instance still uses them: the delete detaches, as
	// Terraform's does.
	require.NoError(t, cl.Databases().Delete(ctx, db.ID, client.DeleteOptions{Wait: true, Detach: true}))
	require.NoError(t, cl.Buckets().Delete(ctx, bucket.ID, client.DeleteOptions{Wait: true, Detach: true}))
	sa, err := kc.CoreV1().ServiceAccounts("shop").Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, sa.Annotations, "eks.amazonaws.com/role-arn", "the deleted bucket's role is taken off the service account")
	var order []string
	for _, c := range sim.Calls() {
		if c.Error == "" && slices.Contains([]string{"DeleteRolePolicy", "DeleteRole", "DeleteBucket"}, c.Action) {
			order = append(order, c.Service+":"+c.Action)
		}
	}
	require.Equal(t, []string{"iam:DeleteRolePolicy", "iam:DeleteRole", "s3:DeleteBucket"}, order, "the bucket's role goes before the bucket")
	require.NoError(t, cl.WorkloadInstances().Delete(ctx, inst.ID, client.DeleteOptions{Wait: true}))
	require.NoError(t, cl.KubernetesRuntimes().Delete(cptest.Wait(t, 2*time.Minute), rt.ID, client.DeleteOptions{Wait: true}))
	require.Empty(t, sim.Resources(), "destroy leaves nothing behind")
	t.Logf("destroy in %s; AWS calls per service: %s", time.Since(start).Round(100*time.Millisecond), formatCounts(callCounts(sim.Calls())))
}
