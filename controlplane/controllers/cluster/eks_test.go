package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/cluster"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/internal/apitest"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// eksSetup is a stand-in AWS with one account, an API server with a validated cloud_account for it, and
// the EKS provisioner reading it with a controller token.
type eksSetup struct {
	sim     *awssim.Sim
	acct    awssim.Account
	admin   *client.Client
	ctrl    *client.Client
	eks     *cluster.EKS
	account *api.CloudAccount
}

func setupEKS(t *testing.T) *eksSetup {
	t.Helper()
	ctx := context.Background()
	sim := awssim.New(awssim.Config{ClusterDelay: 200 * time.Millisecond, NodegroupDelay: 100 * time.Millisecond, DeleteDelay: 100 * time.Millisecond})
	require.NoError(t, sim.Start(ctx))
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	svc := apitest.Start(t)
	s := &eksSetup{sim: sim, acct: acct, admin: svc.Client(t, server.RoleAdmin), ctrl: svc.Client(t, server.RoleController)}
	ca, err := s.admin.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "aws"}, Spec: api.CloudAccountSpec{
		Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}})
	require.NoError(t, err)
	s.account = s.reconcileAccount(t, ca.ID)
	require.Equal(t, api.PhaseReady, s.account.Status.Phase, s.account.Status.Message)
	s.eks = &cluster.EKS{Accounts: &awscloud.Accounts{Client: s.ctrl}, Poll: 50 * time.Millisecond}
	return s
}

// reconcileAccount runs the account's reconcile once and writes its status as the runtime would.
func (s *eksSetup) reconcileAccount(t *testing.T, id string) *api.CloudAccount {
	t.Helper()
	ctx := context.Background()
	ca, err := s.ctrl.CloudAccounts().Get(ctx, id)
	require.NoError(t, err)
	_, err = (&cloud.AccountReconciler{Accounts: &awscloud.Accounts{Client: s.ctrl}}).Reconcile(ctx, ca)
	ca.Status.ObservedGeneration = ca.Generation
	ca.Status.Phase = api.PhaseReady
	if err != nil {
		ca.Status.Phase, ca.Status.Message = api.PhaseFailed, err.Error()
	}
	out, uerr := s.ctrl.CloudAccounts().UpdateStatus(ctx, id, ca.ResourceVersion, ca.Status)
	require.NoError(t, uerr)
	return out
}

func (s *eksSetup) runtime(t *testing.T, name string) *api.KubernetesRuntime {
	t.Helper()
	ctx := context.Background()
	rt, err := s.admin.KubernetesRuntimes().Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: name}, Spec: api.KubernetesRuntimeSpec{
		Provider: api.ProviderEKS, Region: "us-east-1", CloudAccountID: s.account.ID, MinNodes: 1, MaxNodes: 3}})
	require.NoError(t, err)
	rt, err = s.ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
	require.NoError(t, err)
	return rt
}

// converge calls f (Ensure or Remove) as the reconcile runtime would, until it has nothing left to wait for.
func converge(t *testing.T, f func(context.Context, *api.KubernetesRuntime) (time.Duration, error), rt *api.KubernetesRuntime) {
	t.Helper()
	await.True(t, 20*time.Second, func() bool {
		after, err := f(context.Background(), rt)
		require.NoError(t, err)
		return after == 0
	}, "condition")
}

// mutations are the calls that change something, as service:Action, in order.
func mutations(calls []awssim.Call) []string {
	var out []string
	for _, c := range calls {
		if c.Error != "" || strings.HasPrefix(c.Action, "Describe") || strings.HasPrefix(c.Action, "Get") || strings.HasPrefix(c.Action, "List") {
			continue
		}
		out = append(out, c.Service+":"+c.Action)
	}
	return out
}

func count(calls []awssim.Call, service, action string) int {
	n := 0
	for _, c := range calls {
		if c.Service == service && c.Action == action && c.Error == "" {
			n++
		}
	}
	return n
}

func TestEKSRuntimeProvisioning(t *testing.T) {
	t.Parallel()
	s := setupEKS(t)
	ctx := context.Background()

	t.Run("create makes roles, a VPC, subnets, the cluster and the node group, in that order, all tagged", func(t *testing.T) {
		s.sim.ResetCalls()
		rt := s.runtime(t, "prod")
		converge(t, s.eks.Ensure, rt)
		require.Equal(t, []string{
			"iam:CreateRole", "iam:AttachRolePolicy",
			"iam:CreateRole", "iam:AttachRolePolicy", "iam:AttachRolePolicy", "iam:AttachRolePolicy",
			"ec2:CreateVpc", "ec2:CreateSubnet", "ec2:CreateSubnet",
			"eks:CreateCluster", "iam:CreateOpenIDConnectProvider", "eks:CreateNodegroup",
		}, mutations(s.sim.Calls()))
		cr := rt.Status.Cloud
		require.Empty(t, cr.Step, "nothing left in progress")
		require.Equal(t, "qleet-prod", cr.ClusterName)
		require.Len(t, cr.SubnetIDs, 2)
		require.NotEmpty(t, cr.VPCID)
		require.Equal(t, s.acct.ID, cr.AccountID)
		res := s.sim.Resources()
		for _, r := range res {
			require.Equal(t, rt.ID, r.Tags["qleet.io/owner-id"], "%s %s carries the runtime's ownership", r.Type, r.ID)
			require.Equal(t, api.KindKubernetesRuntime, r.Tags["qleet.io/owner-kind"])
		}
		var types []string
		for _, r := range res {
			types = append(types, r.Type)
			if r.Type == "oidc-provider" {
				require.Equal(t, "arn:aws:iam::"+s.acct.ID+":oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/", r.ID[:len(r.ID)-32], "the cluster's issuer is registered")
			}
		}
		require.ElementsMatch(t, []string{"role", "role", "oidc-provider", "vpc", "subnet", "subnet", "cluster", "nodegroup"}, types)

		t.Run("node group bounds follow min and max nodes", func(t *testing.T) {
			s.sim.ResetCalls()
			rt.Spec.MinNodes, rt.Spec.MaxNodes, rt.Spec.Nodes = 2, 5, 2
			converge(t, s.eks.Ensure, rt)
			require.Equal(t, []string{"eks:UpdateNodegroupConfig"}, mutations(s.sim.Calls()))
			for _, c := range s.sim.Calls() {
				if c.Action == "UpdateNodegroupConfig" {
					require.Equal(t, "qleet-nodes", c.Params["nodegroupName"])
				}
			}
		})

		t.Run("delete removes everything in reverse and nothing is left", func(t *testing.T) {
			s.sim.ResetCalls()
			converge(t, s.eks.Remove, rt)
			require.Equal(t, []string{
				"eks:DeleteNodegroup", "iam:DeleteOpenIDConnectProvider", "eks:DeleteCluster",
				"ec2:DeleteSubnet", "ec2:DeleteSubnet", "ec2:DeleteVpc",
				"iam:DetachRolePolicy", "iam:DetachRolePolicy", "iam:DetachRolePolicy", "iam:DeleteRole",
				"iam:DetachRolePolicy", "iam:DeleteRole",
			}, mutations(s.sim.Calls()))
			require.Empty(t, s.sim.Resources())
			require.Empty(t, rt.Status.Cloud.Step)
		})
	})

	t.Run("a crash after CreateCluster resumes without a duplicate", func(t *testing.T) {
		s.sim.ResetCalls()
		rt := s.runtime(t, "crash")
		after, err := s.eks.Ensure(ctx, rt)
		require.NoError(t, err)
		require.Positive(t, after, "the cluster is CREATING")
		require.Contains(t, rt.Status.Cloud.Step, "waiting for ACTIVE (CREATING)", "status names the step in progress")
		// The controller died before writing that status: the next one starts from the stored object.
		fresh, err := s.ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
		require.NoError(t, err)
		require.Nil(t, fresh.Status.Cloud)
		converge(t, s.eks.Ensure, fresh)
		calls := s.sim.Calls()
		require.Equal(t, 1, count(calls, "eks", "CreateCluster"))
		require.Equal(t, 1, count(calls, "eks", "CreateNodegroup"))
		require.Equal(t, 1, count(calls, "ec2", "CreateVpc"))
		require.Equal(t, 2, count(calls, "ec2", "CreateSubnet"))
		require.Equal(t, 2, count(calls, "iam", "CreateRole"))
		require.Equal(t, rt.Status.Cloud.VPCID, fresh.Status.Cloud.VPCID, "the VPC made before the crash is found by its tags")

		t.Run("and so does a delete", func(t *testing.T) {
			s.sim.ResetCalls()
			after, err := s.eks.Remove(ctx, fresh)
			require.NoError(t, err)
			require.Positive(t, after)
			again, err := s.ctrl.KubernetesRuntimes().Get(ctx, rt.ID)
			require.NoError(t, err)
			converge(t, s.eks.Remove, again)
			require.Empty(t, s.sim.Resources())
			require.Equal(t, 1, count(s.sim.Calls(), "eks", "DeleteNodegroup"))
			require.Equal(t, 1, count(s.sim.Calls(), "eks", "DeleteCluster"))
		})
	})

	t.Run("throttling is retried", func(t *testing.T) {
		s.sim.ResetCalls()
		s.sim.Throttle("eks", "CreateCluster", 2)
		s.sim.Throttle("ec2", "CreateVpc", 1)
		rt := s.runtime(t, "throttled")
		converge(t, s.eks.Ensure, rt)
		var throttled int
		for _, c := range s.sim.Calls() {
			if c.Error == "ThrottlingException" || c.Error == "RequestLimitExceeded" {
				throttled++
			}
		}
		require.Equal(t, 3, throttled)
		require.Equal(t, 1, count(s.sim.Calls(), "eks", "CreateCluster"))
		converge(t, s.eks.Remove, rt)
		require.Empty(t, s.sim.Resources())
	})

	t.Run("access denied fails the runtime naming the action", func(t *testing.T) {
		s.sim.ResetCalls()
		s.sim.Deny("eks", "CreateCluster")
		defer s.sim.ClearFaults()
		rt := s.runtime(t, "denied")
		_, err := s.eks.Ensure(ctx, rt)
		require.Error(t, err)
		require.True(t, reconcile.IsTerminal(err), "not retried: %v", err)
		require.Contains(t, err.Error(), "access denied to eks:CreateCluster")
		require.Equal(t, "eks: eks: cluster qleet-denied", rt.Status.Message, "the status names the step that failed")
		s.sim.ClearFaults()
		converge(t, s.eks.Remove, rt)
		require.Empty(t, s.sim.Resources())
	})

	t.Run("a role QleetOS did not make is neither used nor deleted", func(t *testing.T) {
		rt := s.runtime(t, "squatted")
		name := cluster.RoleName(rt, "cluster")
		_, err := s.sim.AddRole(s.acct.ID, name, awssim.TrustPolicy("eks.amazonaws.com", ""))
		require.NoError(t, err)
		_, err = s.eks.Ensure(ctx, rt)
		require.True(t, reconcile.IsTerminal(err))
		require.Contains(t, err.Error(), "IAM role "+name+" already exists and was not created by QleetOS")
		converge(t, s.eks.Remove, rt)
		res := s.sim.Resources()
		require.Len(t, res, 1)
		require.Equal(t, name, res[0].ID, "the role is still there")
	})
}

// The system we follow failed on token refresh: here the stand-in's clusters accept a token for 2 s only,
// and requests keep succeeding past that, each refused token replaced at once.
func TestEKSTokenIsRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := 100 * time.Millisecond
	sim := awssim.New(awssim.Config{Kubesim: true, ClusterDelay: d, NodegroupDelay: d, DeleteDelay: d, EKSTokenLifetime: 2 * time.Second})
	require.NoError(t, sim.Start(ctx))
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	svc := apitest.Start(t)
	s := &eksSetup{sim: sim, acct: acct, admin: svc.Client(t, server.RoleAdmin), ctrl: svc.Client(t, server.RoleController)}
	ca, err := s.admin.CloudAccounts().Create(ctx, &api.CloudAccount{Meta: api.Meta{Name: "aws"}, Spec: api.CloudAccountSpec{
		Provider: api.CloudAWS, Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}})
	require.NoError(t, err)
	s.account = s.reconcileAccount(t, ca.ID)
	s.eks = &cluster.EKS{Accounts: &awscloud.Accounts{Client: s.ctrl}, Poll: 50 * time.Millisecond}
	rt := s.runtime(t, "tokens")
	converge(t, s.eks.Ensure, rt)
	t.Cleanup(func() { converge(t, s.eks.Remove, rt) })

	rc, err := s.eks.RESTConfig(ctx, rt)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	_, err = cs.Discovery().ServerVersion()
	require.NoError(t, err, "the cluster accepts the EKS token")
	refused := func() (n int) {
		for _, c := range sim.Calls() {
			if c.Params["via"] == "eks-token" && c.Error != "" {
				n++
			}
		}
		return n
	}
	require.Zero(t, refused())
	await.True(t, 15*time.Second, func() bool {
		_, err := cs.Discovery().ServerVersion()
		require.NoError(t, err, "no request fails when its token has expired")
		return refused() > 0
	}, "the first token expires")
	calls := sim.Calls()
	last := calls[len(calls)-1]
	require.Equal(t, "eks-token", last.Params["via"])
	require.Empty(t, last.Error, "a new token was accepted after the refused one")
}
