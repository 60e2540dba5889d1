package awssim_test

import (
	"bytes"
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	r53types "github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

const eksTrust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

func TestIAM(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	policy := "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"

	out, err := f.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("cluster"), AssumeRolePolicyDocument: aws.String(eksTrust),
		Tags: []iamtypes.Tag{{Key: aws.String("qleet.io/owner"), Value: aws.String("rt-1")}}})
	require.NoError(t, err)
	require.Equal(t, "arn:aws:iam::"+f.acct.ID+":role/cluster", aws.ToString(out.Role.Arn))

	_, err = f.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("cluster"), AssumeRolePolicyDocument: aws.String(eksTrust)})
	var exists *iamtypes.EntityAlreadyExistsException
	require.ErrorAs(t, err, &exists)

	got, err := f.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("cluster")})
	require.NoError(t, err)
	doc, err := url.QueryUnescape(aws.ToString(got.Role.AssumeRolePolicyDocument))
	require.NoError(t, err)
	require.JSONEq(t, eksTrust, doc)
	require.Equal(t, "rt-1", aws.ToString(got.Role.Tags[0].Value))

	_, err = f.iam.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String("cluster"), Tags: []iamtypes.Tag{{Key: aws.String("b"), Value: aws.String("2")}}})
	require.NoError(t, err)
	_, err = f.iam.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("cluster"), PolicyArn: aws.String(policy)})
	require.NoError(t, err)
	list, err := f.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String("cluster")})
	require.NoError(t, err)
	require.Len(t, list.AttachedPolicies, 1)
	require.Equal(t, "AmazonEKSClusterPolicy", aws.ToString(list.AttachedPolicies[0].PolicyName))

	_, err = f.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("cluster")})
	var conflict *iamtypes.DeleteConflictException
	require.ErrorAs(t, err, &conflict, "a role with a policy attached cannot be deleted")

	_, err = f.iam.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String("cluster"), PolicyArn: aws.String(policy)})
	require.NoError(t, err)
	_, err = f.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("cluster")})
	require.NoError(t, err)
	_, err = f.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("cluster")})
	var missing *iamtypes.NoSuchEntityException
	require.ErrorAs(t, err, &missing)

	oidc, err := f.iam.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{
		Url: aws.String("https://oidc.eks.us-east-1.amazonaws.com/id/ABC"), ClientIDList: []string{"sts.amazonaws.com"}})
	require.NoError(t, err)
	require.Equal(t, "arn:aws:iam::"+f.acct.ID+":oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC", aws.ToString(oidc.OpenIDConnectProviderArn))
	_, err = f.iam.DeleteOpenIDConnectProvider(ctx, &iam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: oidc.OpenIDConnectProviderArn})
	require.NoError(t, err)
	require.Empty(t, f.sim.Resources())

	create := awssim.Filter(f.sim.Calls(), "iam", "CreateRole")[0]
	require.Equal(t, "cluster", create.Params["RoleName"])
	require.NotContains(t, create.Params, "AssumeRolePolicyDocument", "policy documents stay out of the log")
	attach := awssim.Filter(f.sim.Calls(), "iam", "AttachRolePolicy")[0]
	require.Equal(t, policy, attach.Params["PolicyArn"])
}

// network makes a VPC with two subnets in two zones.
func network(t *testing.T, f *fixture) (string, []string) {
	t.Helper()
	ctx := context.Background()
	tags := func(rt ec2types.ResourceType) []ec2types.TagSpecification {
		return []ec2types.TagSpecification{{ResourceType: rt, Tags: []ec2types.Tag{{Key: aws.String("qleet.io/owner"), Value: aws.String("rt-1")}}}}
	}
	v, err := f.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16"), TagSpecifications: tags(ec2types.ResourceTypeVpc)})
	require.NoError(t, err)
	var subnets []string
	for i, az := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := f.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: v.Vpc.VpcId, CidrBlock: aws.String([]string{"10.0.0.0/20", "10.0.16.0/20"}[i]),
			AvailabilityZone: aws.String(az), TagSpecifications: tags(ec2types.ResourceTypeSubnet)})
		require.NoError(t, err)
		require.Equal(t, az, aws.ToString(sn.Subnet.AvailabilityZone))
		subnets = append(subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	return aws.ToString(v.Vpc.VpcId), subnets
}

func TestEC2(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	vpcID, subnets := network(t, f)

	vpcs, err := f.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:qleet.io/owner"), Values: []string{"rt-1"}}}})
	require.NoError(t, err)
	require.Len(t, vpcs.Vpcs, 1)
	require.Equal(t, vpcID, aws.ToString(vpcs.Vpcs[0].VpcId))
	require.Equal(t, "10.0.0.0/16", aws.ToString(vpcs.Vpcs[0].CidrBlock))

	_, err = f.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{subnets[0]}, Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/role/elb"), Value: aws.String("1")}}})
	require.NoError(t, err)
	sns, err := f.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{vpcID}}, {Name: aws.String("tag-key"), Values: []string{"kubernetes.io/role/elb"}}}})
	require.NoError(t, err)
	require.Len(t, sns.Subnets, 1)
	require.Equal(t, subnets[0], aws.ToString(sns.Subnets[0].SubnetId))

	_, err = f.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0000000000000dead"}})
	require.Equal(t, "InvalidVpcID.NotFound", errorCode(t, err))
	_, err = f.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: aws.String(vpcID), CidrBlock: aws.String("10.0.1.0/24")})
	require.Equal(t, "InvalidSubnet.Conflict", errorCode(t, err))
	_, err = f.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(vpcID)})
	require.Equal(t, "DependencyViolation", errorCode(t, err), "a VPC with subnets cannot be deleted")

	sg, err := f.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("db"), Description: aws.String("database access"), VpcId: aws.String(vpcID)})
	require.NoError(t, err)
	_, err = f.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId, IpPermissions: []ec2types.IpPermission{
		{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(5432), ToPort: aws.Int32(5432), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("10.0.0.0/16")}}}}})
	require.NoError(t, err)
	groups, err := f.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"db"}}}})
	require.NoError(t, err)
	require.Len(t, groups.SecurityGroups, 1)
	require.Equal(t, int32(5432), aws.ToInt32(groups.SecurityGroups[0].IpPermissions[0].FromPort))
	require.Equal(t, "10.0.0.0/16", aws.ToString(groups.SecurityGroups[0].IpPermissions[0].IpRanges[0].CidrIp))

	for _, id := range subnets {
		_, err = f.ec2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(id)})
		require.NoError(t, err)
	}
	_, err = f.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(vpcID)})
	require.Equal(t, "DependencyViolation", errorCode(t, err), "a VPC with a security group cannot be deleted")
	_, err = f.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId})
	require.NoError(t, err)
	_, err = f.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(vpcID)})
	require.NoError(t, err)
	require.Empty(t, f.sim.Resources())
}

// role creates an IAM role for EKS and returns its ARN.
func role(t *testing.T, f *fixture, name string) string {
	t.Helper()
	out, err := f.iam.CreateRole(context.Background(), &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(eksTrust)})
	require.NoError(t, err)
	return aws.ToString(out.Role.Arn)
}

// clusterStatus polls DescribeCluster until the cluster has the status, or
// until it is gone when status is "".
func waitCluster(t *testing.T, f *fixture, name string, status ekstypes.ClusterStatus) *ekstypes.Cluster {
	t.Helper()
	var c *ekstypes.Cluster
	await.True(t, 2*time.Minute, func() bool {
		out, err := f.eks.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: aws.String(name)})
		if status == "" {
			var nf *ekstypes.ResourceNotFoundException
			return err != nil && errorsAs(err, &nf)
		}
		require.NoError(t, err)
		c = out.Cluster
		return c.Status == status
	}, "cluster %s never %q", name, status)
	return c
}

func waitNodegroup(t *testing.T, f *fixture, cluster, name string, status ekstypes.NodegroupStatus) {
	t.Helper()
	await.True(t, time.Minute, func() bool {
		out, err := f.eks.DescribeNodegroup(context.Background(), &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
		if status == "" {
			var nf *ekstypes.ResourceNotFoundException
			return err != nil && errorsAs(err, &nf)
		}
		require.NoError(t, err)
		return out.Nodegroup.Status == status
	}, "node group %s never %q", name, status)
}

func TestEKSLifecycle(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	_, subnets := network(t, f)
	clusterRole, nodeRole := role(t, f, "cluster"), role(t, f, "node")

	_, err := f.eks.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("prod"), RoleArn: aws.String("arn:aws:iam::" + f.acct.ID + ":role/missing"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}})
	var bad *ekstypes.InvalidParameterException
	require.ErrorAs(t, err, &bad, "a cluster role that does not exist is refused")

	out, err := f.eks.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("prod"), RoleArn: aws.String(clusterRole),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}, Tags: map[string]string{"qleet.io/owner": "rt-1"}})
	require.NoError(t, err)
	require.Equal(t, ekstypes.ClusterStatusCreating, out.Cluster.Status)
	require.Empty(t, aws.ToString(out.Cluster.Endpoint), "no endpoint while CREATING")

	c := waitCluster(t, f, "prod", ekstypes.ClusterStatusActive)
	require.Contains(t, aws.ToString(c.Endpoint), "https://127.0.0.1:")
	require.NotEmpty(t, aws.ToString(c.CertificateAuthority.Data))
	require.Contains(t, aws.ToString(c.Identity.Oidc.Issuer), "https://oidc.eks.us-east-1.amazonaws.com/id/")
	require.Equal(t, "rt-1", c.Tags["qleet.io/owner"])

	list, err := f.eks.ListClusters(ctx, &eks.ListClustersInput{})
	require.NoError(t, err)
	require.Equal(t, []string{"prod"}, list.Clusters)

	ng, err := f.eks.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String("prod"), NodegroupName: aws.String("default"),
		NodeRole: aws.String(nodeRole), Subnets: subnets, ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(3), DesiredSize: aws.Int32(1)}})
	require.NoError(t, err)
	require.Equal(t, ekstypes.NodegroupStatusCreating, ng.Nodegroup.Status)
	waitNodegroup(t, f, "prod", "default", ekstypes.NodegroupStatusActive)

	_, err = f.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: aws.String("prod"), NodegroupName: aws.String("default"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(2), DesiredSize: aws.Int32(5)}})
	require.ErrorAs(t, err, &bad, "desired above max is refused")
	upd, err := f.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: aws.String("prod"), NodegroupName: aws.String("default"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(2)}})
	require.NoError(t, err)
	require.Equal(t, ekstypes.UpdateStatusInProgress, upd.Update.Status)
	waitNodegroup(t, f, "prod", "default", ekstypes.NodegroupStatusActive)
	got, err := f.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String("prod"), NodegroupName: aws.String("default")})
	require.NoError(t, err)
	require.Equal(t, int32(2), aws.ToInt32(got.Nodegroup.ScalingConfig.DesiredSize))
	require.Equal(t, int32(3), aws.ToInt32(got.Nodegroup.ScalingConfig.MaxSize))

	_, err = f.eks.TagResource(ctx, &eks.TagResourceInput{ResourceArn: c.Arn, Tags: map[string]string{"extra": "1"}})
	require.NoError(t, err)

	_, err = f.eks.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String("prod")})
	var inUse *ekstypes.ResourceInUseException
	require.ErrorAs(t, err, &inUse, "a cluster with node groups cannot be deleted")

	_, err = f.eks.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String("prod"), NodegroupName: aws.String("default")})
	require.NoError(t, err)
	waitNodegroup(t, f, "prod", "default", "")
	del, err := f.eks.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String("prod")})
	require.NoError(t, err)
	require.Equal(t, ekstypes.ClusterStatusDeleting, del.Cluster.Status)
	require.Equal(t, "1", del.Cluster.Tags["extra"])
	waitCluster(t, f, "prod", "")
}

func TestRDS(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	_, subnets := network(t, f)

	_, err := f.rds.CreateDBSubnetGroup(ctx, &rds.CreateDBSubnetGroupInput{DBSubnetGroupName: aws.String("app-db"),
		DBSubnetGroupDescription: aws.String("qleet"), SubnetIds: subnets})
	require.NoError(t, err)
	_, err = f.rds.CreateDBInstance(ctx, &rds.CreateDBInstanceInput{DBInstanceIdentifier: aws.String("app-db"), DBInstanceClass: aws.String("db.t3.micro"),
		Engine: aws.String("postgres"), MasterUsername: aws.String("app"), MasterUserPassword: aws.String("short")})
	require.Equal(t, "InvalidParameterValue", errorCode(t, err), "a password under 8 characters is refused")

	out, err := f.rds.CreateDBInstance(ctx, &rds.CreateDBInstanceInput{DBInstanceIdentifier: aws.String("app-db"), DBInstanceClass: aws.String("db.t3.micro"),
		Engine: aws.String("postgres"), MasterUsername: aws.String("app"), MasterUserPassword: aws.String("secret-password"), AllocatedStorage: aws.Int32(20),
		DBName: aws.String("app"), DBSubnetGroupName: aws.String("app-db")})
	require.NoError(t, err)
	require.Equal(t, "creating", aws.ToString(out.DBInstance.DBInstanceStatus))
	for _, c := range awssim.Filter(f.sim.Calls(), "rds", "CreateDBInstance") {
		require.NotContains(t, c.Params, "MasterUserPassword", "passwords stay out of the log")
		require.Equal(t, "app-db", c.Params["DBInstanceIdentifier"])
	}
	require.Nil(t, out.DBInstance.Endpoint)

	await.True(t, time.Minute, func() bool {
		d, err := f.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String("app-db")})
		require.NoError(t, err)
		db := d.DBInstances[0]
		return aws.ToString(db.DBInstanceStatus) == "available" && db.Endpoint != nil && aws.ToInt32(db.Endpoint.Port) == 5432 &&
			aws.ToString(db.Endpoint.Address) != "" && aws.ToString(db.DBSubnetGroup.VpcId) != ""
	}, "the database available at an endpoint on 5432 in the VPC")

	_, err = f.rds.DeleteDBSubnetGroup(ctx, &rds.DeleteDBSubnetGroupInput{DBSubnetGroupName: aws.String("app-db")})
	require.Equal(t, "InvalidDBSubnetGroupStateFault", errorCode(t, err), "a subnet group in use cannot be deleted")
	_, err = f.rds.DeleteDBInstance(ctx, &rds.DeleteDBInstanceInput{DBInstanceIdentifier: aws.String("app-db"), SkipFinalSnapshot: aws.Bool(true)})
	require.NoError(t, err)
	await.True(t, time.Minute, func() bool {
		_, err := f.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String("app-db")})
		return err != nil && errorCode(t, err) == "DBInstanceNotFound"
	}, "the database gone")
	_, err = f.rds.DeleteDBSubnetGroup(ctx, &rds.DeleteDBSubnetGroupInput{DBSubnetGroupName: aws.String("app-db")})
	require.NoError(t, err)
}

func TestS3(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	b := aws.String("qleet-app-data")

	_, err := f.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b})
	require.NoError(t, err)
	_, err = f.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b})
	require.NoError(t, err)
	_, err = f.s3.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	require.Equal(t, "NoSuchTagSet", errorCode(t, err))
	_, err = f.s3.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{Key: aws.String("qleet.io/owner"), Value: aws.String("bk-1")}}}})
	require.NoError(t, err)
	tags, err := f.s3.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	require.NoError(t, err)
	require.Equal(t, "bk-1", aws.ToString(tags.TagSet[0].Value))

	_, err = f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("a/b.txt"), Body: bytes.NewReader([]byte("hello"))})
	require.NoError(t, err)
	list, err := f.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	require.NoError(t, err)
	require.Len(t, list.Contents, 1)
	require.Equal(t, int64(5), aws.ToInt64(list.Contents[0].Size))
	_, err = f.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b})
	require.Equal(t, "BucketNotEmpty", errorCode(t, err))
	_, err = f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("a/b.txt")})
	require.NoError(t, err)
	_, err = f.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b})
	require.NoError(t, err)
	_, err = f.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b})
	var nf *s3types.NotFound
	require.ErrorAs(t, err, &nf)
}

func TestRoute53(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	z, err := f.r53.CreateHostedZone(ctx, &route53.CreateHostedZoneInput{Name: aws.String("apps.example.com"), CallerReference: aws.String("qleet-dn-1")})
	require.NoError(t, err)
	require.Equal(t, "apps.example.com.", aws.ToString(z.HostedZone.Name))
	require.Len(t, z.DelegationSet.NameServers, 4)
	id := z.HostedZone.Id

	got, err := f.r53.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: id})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(id), aws.ToString(got.HostedZone.Id))
	byName, err := f.r53.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{DNSName: aws.String("apps.example.com")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(id), aws.ToString(byName.HostedZones[0].Id))

	rec := &r53types.ResourceRecordSet{Name: aws.String("web.apps.example.com"), Type: r53types.RRTypeA, TTL: aws.Int64(300),
		ResourceRecords: []r53types.ResourceRecord{{Value: aws.String("192.0.2.10")}}}
	change := func(a r53types.ChangeAction) error {
		_, err := f.r53.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{HostedZoneId: id,
			ChangeBatch: &r53types.ChangeBatch{Changes: []r53types.Change{{Action: a, ResourceRecordSet: rec}}}})
		return err
	}
	require.NoError(t, change(r53types.ChangeActionCreate))
	var invalid *r53types.InvalidChangeBatch
	require.ErrorAs(t, change(r53types.ChangeActionCreate), &invalid, "creating a record twice is refused")
	sets, err := f.r53.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: id})
	require.NoError(t, err)
	require.Len(t, sets.ResourceRecordSets, 3) // NS, SOA, A
	var names []string
	for _, s := range sets.ResourceRecordSets {
		names = append(names, aws.ToString(s.Name)+" "+string(s.Type))
	}
	require.Contains(t, names, "web.apps.example.com. A")

	_, err = f.r53.DeleteHostedZone(ctx, &route53.DeleteHostedZoneInput{Id: id})
	var notEmpty *r53types.HostedZoneNotEmpty
	require.ErrorAs(t, err, &notEmpty)
	require.NoError(t, change(r53types.ChangeActionDelete))
	_, err = f.r53.DeleteHostedZone(ctx, &route53.DeleteHostedZoneInput{Id: id})
	require.NoError(t, err)
	_, err = f.r53.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: id})
	var noZone *r53types.NoSuchHostedZone
	require.ErrorAs(t, err, &noZone)
}
