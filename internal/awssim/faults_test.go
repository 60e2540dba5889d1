package awssim_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()

	t.Run("throttled calls are retried by the SDK and then succeed", func(t *testing.T) {
		f.sim.ResetCalls()
		f.sim.Throttle("sts", "GetCallerIdentity", 2)
		f.sim.Throttle("eks", "ListClusters", 2)
		f.sim.Throttle("ec2", "DescribeVpcs", 2)
		f.sim.Throttle("s3", "ListBuckets", 2)
		f.sim.Throttle("route53", "ListHostedZonesByName", 2)
		_, err := f.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		_, err = f.eks.ListClusters(ctx, &eks.ListClustersInput{})
		require.NoError(t, err)
		_, err = f.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		require.NoError(t, err)
		_, err = f.s3.ListBuckets(ctx, &s3.ListBucketsInput{})
		require.NoError(t, err)
		_, err = f.r53.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{})
		require.NoError(t, err)
		require.Equal(t, []string{
			"sts:GetCallerIdentity:Throttling", "sts:GetCallerIdentity:Throttling", "sts:GetCallerIdentity",
			"eks:ListClusters:ThrottlingException", "eks:ListClusters:ThrottlingException", "eks:ListClusters",
			"ec2:DescribeVpcs:RequestLimitExceeded", "ec2:DescribeVpcs:RequestLimitExceeded", "ec2:DescribeVpcs",
			"s3:ListBuckets:SlowDown", "s3:ListBuckets:SlowDown", "s3:ListBuckets",
			"route53:ListHostedZonesByName:Throttling", "route53:ListHostedZonesByName:Throttling", "route53:ListHostedZonesByName",
		}, actions(f.sim.Calls()))
	})

	t.Run("throttling beyond the SDK's attempts surfaces the throttling error", func(t *testing.T) {
		f.sim.Throttle("iam", "ListOpenIDConnectProviders", 5)
		_, err := f.iam.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
		require.Equal(t, "Throttling", errorCode(t, err))
		f.sim.ClearFaults()
	})

	t.Run("a denied action answers access denied naming it, each protocol its way", func(t *testing.T) {
		f.sim.Deny("eks", "CreateCluster")
		f.sim.Deny("iam", "CreateRole")
		f.sim.Deny("ec2", "CreateVpc")
		defer f.sim.ClearFaults()
		_, err := f.eks.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("x"), RoleArn: aws.String("arn:aws:iam::" + f.acct.ID + ":role/r"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}}})
		require.Equal(t, "AccessDeniedException", errorCode(t, err))
		require.Contains(t, err.Error(), "not authorized to perform: eks:CreateCluster")
		_, err = f.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("r"), AssumeRolePolicyDocument: aws.String(eksTrust)})
		require.Equal(t, "AccessDenied", errorCode(t, err))
		require.Contains(t, err.Error(), "iam:CreateRole")
		_, err = f.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
		require.Equal(t, "UnauthorizedOperation", errorCode(t, err))
		var ae smithy.APIError
		require.ErrorAs(t, err, &ae)
		require.Contains(t, ae.ErrorMessage(), "ec2:CreateVpc")

		_, err = f.eks.ListClusters(ctx, &eks.ListClustersInput{})
		require.NoError(t, err, "other actions are still allowed")
		require.Empty(t, f.sim.Resources(), "a denied call changes nothing")
	})

	t.Run("a fault for one account leaves the others alone", func(t *testing.T) {
		other, err := f.sim.AddAccount("")
		require.NoError(t, err)
		require.NoError(t, f.sim.Inject(awssim.Fault{Service: "sts", Action: "*", Account: other.ID, Deny: true}))
		defer f.sim.ClearFaults()
		_, err = f.withKeys(other.AccessKeyID, other.SecretAccessKey, "").sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.Equal(t, "AccessDenied", errorCode(t, err))
		_, err = f.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
	})

	t.Run("faults can be injected over HTTP", func(t *testing.T) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.sim.URL()+awssim.AdminPrefix+"faults",
			strings.NewReader(`{"service":"s3","action":"CreateBucket","deny":true}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		_, err = f.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("denied-bucket")})
		require.Equal(t, "AccessDenied", errorCode(t, err))
		f.sim.ClearFaults()
	})
}
