package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/client-go/rest"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// EKS provisions "eks" runtimes through AWS: IAM roles for the cluster and its nodes, a VPC with two
// subnets (unless the spec names subnets), the cluster and a managed node group, each tagged with the
// runtime's ownership. Every step looks for what a previous, perhaps interrupted, attempt made (by name
// or by tag) before it creates anything, so a crash never makes a duplicate; and nothing without
// QleetOS's tags is changed or deleted.
type EKS struct {
	// Accounts gives the runtime's cloud account's clients. Required.
	Accounts *awscloud.Accounts
	// Poll is how soon a runtime waiting on AWS (a cluster CREATING) is looked at again (default 5s).
	Poll time.Duration
}

// Names of what an eks runtime is made of.
const (
	// NodeGroupName is the managed node group of every eks runtime.
	NodeGroupName = "qleet-nodes"
	vpcCIDR       = "10.0.0.0/16"
	eksPolicy     = "arn:aws:iam::aws:policy/"
)

var (
	clusterPolicies = []string{eksPolicy + "AmazonEKSClusterPolicy"}
	nodePolicies    = []string{eksPolicy + "AmazonEKSWorkerNodePolicy", eksPolicy + "AmazonEKS_CNI_Policy", eksPolicy + "AmazonEC2ContainerRegistryReadOnly"}
)

// ClusterName is the EKS cluster of a runtime.
func ClusterName(rt *api.KubernetesRuntime) string { return "qleet-" + rt.Name }

// RoleName is an IAM role of a runtime ("cluster" or "node"): at most 64 characters, so it holds the
// random end of the runtime's id rather than its name.
func RoleName(rt *api.KubernetesRuntime, what string) string {
	id := strings.ReplaceAll(rt.ID, "-", "")
	if len(id) > 20 {
		id = id[len(id)-20:]
	}
	return "qleet-" + id + "-" + what
}

func owner(rt *api.KubernetesRuntime) awscloud.Owner {
	return awscloud.Owner{Kind: api.KindKubernetesRuntime, ID: rt.ID}
}

func (e *EKS) poll() time.Duration {
	if e.Poll > 0 {
		return e.Poll
	}
	return 5 * time.Second
}

// notOurs is the error of a resource that exists without the runtime's ownership tags.
func notOurs(what string) error {
	return reconcile.Terminal(fmt.Errorf("%s already exists and was not created by QleetOS for this runtime (no ownership tags); it was left unchanged: delete or rename it, or give the runtime another name", what))
}

// step records the step in progress in the runtime's status.
func step(rt *api.KubernetesRuntime, format string, args ...any) {
	rt.Status.Cloud.Step = fmt.Sprintf(format, args...)
	rt.Status.Message = "eks: " + rt.Status.Cloud.Step
}

// Ensure provisions the runtime's cluster, one step after another. It returns a requeue delay while AWS
// is still working, and zero once the cluster and its node group are ACTIVE.
func (e *EKS) Ensure(ctx context.Context, rt *api.KubernetesRuntime) (time.Duration, error) {
	cls, ca, err := e.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return 0, err
	}
	if rt.Status.Cloud == nil {
		rt.Status.Cloud = &api.CloudResources{}
	}
	cr := rt.Status.Cloud
	cr.AccountID = ca.Status.AccountID
	o := owner(rt)

	// What the status records was made (or found) by an earlier reconcile; what it does not record may
	// still exist, made by one that crashed before writing its status, and is looked for first.
	if cr.ClusterRoleARN == "" {
		step(rt, "iam: cluster role")
		if cr.ClusterRoleARN, err = ensureRole(ctx, cls.IAM, RoleName(rt, "cluster"), "eks.amazonaws.com", clusterPolicies, o); err != nil {
			return 0, err
		}
	}
	if cr.NodeRoleARN == "" {
		step(rt, "iam: node role")
		if cr.NodeRoleARN, err = ensureRole(ctx, cls.IAM, RoleName(rt, "node"), "ec2.amazonaws.com", nodePolicies, o); err != nil {
			return 0, err
		}
	}
	subnets := rt.Spec.SubnetIDs
	switch {
	case len(subnets) > 0:
	case cr.VPCID != "" && len(cr.SubnetIDs) >= 2:
		subnets = cr.SubnetIDs
	default:
		step(rt, "ec2: vpc")
		if cr.VPCID, err = ensureVPC(ctx, cls.EC2, o); err != nil {
			return 0, err
		}
		step(rt, "ec2: subnets")
		if subnets, err = ensureSubnets(ctx, cls.EC2, cr.VPCID, rt.Spec.Zones, o); err != nil {
			return 0, err
		}
	}
	cr.SubnetIDs = subnets

	name := ClusterName(rt)
	step(rt, "eks: cluster %s", name)
	cluster, err := describeCluster(ctx, cls.EKS, name)
	if err != nil {
		return 0, err
	}
	if cluster == nil {
		in := &eks.CreateClusterInput{Name: &name, RoleArn: &cr.ClusterRoleARN, Tags: o.Tags(),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets},
			AccessConfig: &ekstypes.CreateAccessConfigRequest{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap,
				BootstrapClusterCreatorAdminPermissions: sdkaws.Bool(true)},
			ClientRequestToken: sdkaws.String(rt.ID)}
		if v := strings.TrimPrefix(rt.Spec.KubernetesVersion, "v"); v != "" {
			in.Version = sdkaws.String(majorMinor(v))
		}
		out, err := cls.EKS.CreateCluster(ctx, in)
		if err != nil {
			return 0, awscloud.Outcome(fmt.Errorf("create EKS cluster %s: %w", name, awscloud.Classify(err)))
		}
		cluster = out.Cluster
		reconcile.Eventf(ctx, api.EventNormal, "ClusterCreating", "creating EKS cluster %s in %s", name, rt.Spec.Region)
	} else if !o.Owns(cluster.Tags) {
		return 0, notOurs(fmt.Sprintf("EKS cluster %s", name))
	}
	cr.ClusterName, cr.ClusterARN = name, sdkaws.ToString(cluster.Arn)
	switch cluster.Status {
	case ekstypes.ClusterStatusActive, ekstypes.ClusterStatusUpdating:
	case ekstypes.ClusterStatusFailed:
		return 0, reconcile.Terminal(fmt.Errorf("EKS cluster %s failed to create", name))
	default:
		step(rt, "eks: cluster %s: waiting for ACTIVE (%s)", name, cluster.Status)
		return e.poll(), nil
	}

	if issuer := Issuer(cluster); issuer != "" {
		step(rt, "iam: oidc provider")
		if err := ensureOIDCProvider(ctx, cls.IAM, cr.AccountID, issuer, o); err != nil {
			return 0, err
		}
	}

	step(rt, "eks: node group %s", NodeGroupName)
	cr.NodeGroup = NodeGroupName
	ng, err := describeNodegroup(ctx, cls.EKS, name)
	if err != nil {
		return 0, err
	}
	want := scaling(&rt.Spec, nil)
	if ng == nil {
		_, err := cls.EKS.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: &name, NodegroupName: sdkaws.String(NodeGroupName),
			NodeRole: &cr.NodeRoleARN, Subnets: subnets, ScalingConfig: want, InstanceTypes: []string{rt.Spec.NodeType},
			Tags: o.Tags(), ClientRequestToken: sdkaws.String(rt.ID + "-nodes")})
		if err != nil {
			return 0, awscloud.Outcome(fmt.Errorf("create EKS node group %s: %w", NodeGroupName, awscloud.Classify(err)))
		}
		step(rt, "eks: node group %s: waiting for ACTIVE (CREATING)", NodeGroupName)
		return e.poll(), nil
	}
	if !o.Owns(ng.Tags) {
		return 0, notOurs(fmt.Sprintf("EKS node group %s of cluster %s", NodeGroupName, name))
	}
	switch ng.Status {
	case ekstypes.NodegroupStatusActive:
	case ekstypes.NodegroupStatusCreateFailed, ekstypes.NodegroupStatusDegraded:
		return 0, reconcile.Terminal(fmt.Errorf("EKS node group %s is %s", NodeGroupName, ng.Status))
	default:
		step(rt, "eks: node group %s: waiting for ACTIVE (%s)", NodeGroupName, ng.Status)
		return e.poll(), nil
	}
	if want := scaling(&rt.Spec, ng.ScalingConfig); !sameScaling(want, ng.ScalingConfig) {
		if _, err := cls.EKS.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{ClusterName: &name, NodegroupName: sdkaws.String(NodeGroupName),
			ScalingConfig: want}); err != nil {
			return 0, awscloud.Outcome(fmt.Errorf("scale EKS node group %s: %w", NodeGroupName, awscloud.Classify(err)))
		}
		step(rt, "eks: node group %s: scaling to %d-%d nodes", NodeGroupName, *want.MinSize, *want.MaxSize)
		return e.poll(), nil
	}
	cr.Step = ""
	rt.Status.Message = ""
	return 0, nil
}

// majorMinor cuts a version such as 1.31.4 to 1.31, as EKS takes it.
func majorMinor(v string) string {
	if parts := strings.SplitN(v, ".", 3); len(parts) == 3 {
		return parts[0] + "." + parts[1]
	}
	return v
}

// scaling is the node group's scaling for the spec: fixed at nodes, or between min and max nodes. The
// desired size follows the spec only when it leaves the bounds, or at creation (cur nil): within them
// it is the cluster autoscaler's.
func scaling(s *api.KubernetesRuntimeSpec, cur *ekstypes.NodegroupScalingConfig) *ekstypes.NodegroupScalingConfig {
	nodes := int32(max(s.Nodes, 1))
	lo, hi := nodes, nodes
	if s.MaxNodes > 0 {
		lo, hi = int32(s.MinNodes), int32(s.MaxNodes)
	}
	desired := min(max(nodes, lo), hi)
	if cur != nil && cur.DesiredSize != nil && *cur.DesiredSize >= lo && *cur.DesiredSize <= hi && s.MaxNodes > 0 {
		desired = *cur.DesiredSize
	}
	return &ekstypes.NodegroupScalingConfig{MinSize: &lo, MaxSize: &hi, DesiredSize: &desired}
}

func sameScaling(a, b *ekstypes.NodegroupScalingConfig) bool {
	if b == nil {
		return false
	}
	return sdkaws.ToInt32(a.MinSize) == sdkaws.ToInt32(b.MinSize) && sdkaws.ToInt32(a.MaxSize) == sdkaws.ToInt32(b.MaxSize) &&
		sdkaws.ToInt32(a.DesiredSize) == sdkaws.ToInt32(b.DesiredSize)
}

func describeCluster(ctx context.Context, svc awscloud.EKS, name string) (*ekstypes.Cluster, error) {
	out, err := svc.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &name})
	if awscloud.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("describe EKS cluster %s: %w", name, awscloud.Classify(err)))
	}
	return out.Cluster, nil
}

func describeNodegroup(ctx context.Context, svc awscloud.EKS, cluster string) (*ekstypes.Nodegroup, error) {
	out, err := svc.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &cluster, NodegroupName: sdkaws.String(NodeGroupName)})
	if awscloud.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("describe EKS node group %s: %w", NodeGroupName, awscloud.Classify(err)))
	}
	return out.Nodegroup, nil
}

// ensureRole finds or creates a role that service may assume, with the policies attached.
func ensureRole(ctx context.Context, svc awscloud.IAM, name, service string, policies []string, o awscloud.Owner) (string, error) {
	got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
	var role *iamtypes.Role
	switch {
	case awscloud.IsNotFound(err):
		trust := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":%q},"Action":"sts:AssumeRole"}]}`, service)
		out, err := svc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: &name, AssumeRolePolicyDocument: &trust, Tags: o.IAMTags(),
			Description: sdkaws.String("QleetOS: " + o.Kind + " " + o.ID)})
		if err != nil {
			return "", awscloud.Outcome(fmt.Errorf("create IAM role %s: %w", name, awscloud.Classify(err)))
		}
		role = out.Role
	case err != nil:
		return "", awscloud.Outcome(fmt.Errorf("get IAM role %s: %w", name, awscloud.Classify(err)))
	default:
		role = got.Role
		if !o.Owns(awscloud.IAMTagMap(role.Tags)) {
			return "", notOurs("IAM role " + name)
		}
	}
	attached, err := attachedPolicies(ctx, svc, name)
	if err != nil {
		return "", err
	}
	for _, p := range policies {
		if slices.Contains(attached, p) {
			continue
		}
		if _, err := svc.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: &name, PolicyArn: sdkaws.String(p)}); err != nil {
			return "", awscloud.Outcome(fmt.Errorf("attach %s to IAM role %s: %w", p, name, awscloud.Classify(err)))
		}
	}
	return sdkaws.ToString(role.Arn), nil
}

func attachedPolicies(ctx context.Context, svc awscloud.IAM, name string) ([]string, error) {
	out, err := svc.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: &name})
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("list the policies of IAM role %s: %w", name, awscloud.Classify(err)))
	}
	var arns []string
	for _, p := range out.AttachedPolicies {
		arns = append(arns, sdkaws.ToString(p.PolicyArn))
	}
	return arns, nil
}

func ec2Tags(o awscloud.Owner, rtype ec2types.ResourceType, name string) []ec2types.TagSpecification {
	tags := []ec2types.Tag{{Key: sdkaws.String("Name"), Value: sdkaws.String(name)}}
	for _, k := range []string{awscloud.TagOwnerKind, awscloud.TagOwnerID, awscloud.TagManagedBy} {
		tags = append(tags, ec2types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(o.Tags()[k])})
	}
	return []ec2types.TagSpecification{{ResourceType: rtype, Tags: tags}}
}

func ownerFilters(o awscloud.Owner) []ec2types.Filter {
	return []ec2types.Filter{
		{Name: sdkaws.String("tag:" + awscloud.TagOwnerKind), Values: []string{o.Kind}},
		{Name: sdkaws.String("tag:" + awscloud.TagOwnerID), Values: []string{o.ID}},
	}
}

// findVPC returns the VPC tagged with o, if any.
func findVPC(ctx context.Context, svc awscloud.EC2, o awscloud.Owner) (string, error) {
	out, err := svc.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: ownerFilters(o)})
	if err != nil {
		return "", awscloud.Outcome(fmt.Errorf("find the VPC: %w", awscloud.Classify(err)))
	}
	if len(out.Vpcs) == 0 {
		return "", nil
	}
	return sdkaws.ToString(out.Vpcs[0].VpcId), nil
}

func ensureVPC(ctx context.Context, svc awscloud.EC2, o awscloud.Owner) (string, error) {
	id, err := findVPC(ctx, svc, o)
	if err != nil || id != "" {
		return id, err
	}
	out, err := svc.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: sdkaws.String(vpcCIDR), TagSpecifications: ec2Tags(o, ec2types.ResourceTypeVpc, "qleet-"+o.ID)})
	if err != nil {
		return "", awscloud.Outcome(fmt.Errorf("create the VPC: %w", awscloud.Classify(err)))
	}
	return sdkaws.ToString(out.Vpc.VpcId), nil
}

// findSubnets returns the subnets tagged with o, by zone.
func findSubnets(ctx context.Context, svc awscloud.EC2, o awscloud.Owner) (map[string]string, error) {
	out, err := svc.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: ownerFilters(o)})
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("find the subnets: %w", awscloud.Classify(err)))
	}
	byZone := map[string]string{}
	for _, s := range out.Subnets {
		byZone[sdkaws.ToString(s.AvailabilityZone)] = sdkaws.ToString(s.SubnetId)
	}
	return byZone, nil
}

// ensureSubnets makes one subnet in each of two zones (the spec's, or the region's first two).
func ensureSubnets(ctx context.Context, svc awscloud.EC2, vpc string, zones []string, o awscloud.Owner) ([]string, error) {
	if len(zones) < 2 {
		out, err := svc.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
		if err != nil {
			return nil, awscloud.Outcome(fmt.Errorf("list the availability zones: %w", awscloud.Classify(err)))
		}
		zones = zones[:0:0]
		for _, z := range out.AvailabilityZones {
			zones = append(zones, sdkaws.ToString(z.ZoneName))
		}
		slices.Sort(zones)
		if len(zones) < 2 {
			return nil, reconcile.Terminal(errors.New("EKS needs subnets in two availability zones, and the region lists fewer"))
		}
		zones = zones[:2]
	}
	have, err := findSubnets(ctx, svc, o)
	if err != nil {
		return nil, err
	}
	var ids []string
	for i, z := range zones {
		if id, ok := have[z]; ok {
			ids = append(ids, id)
			continue
		}
		out, err := svc.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: &vpc, AvailabilityZone: sdkaws.String(z),
			CidrBlock: sdkaws.String(fmt.Sprintf("10.0.%d.0/19", i*32)), TagSpecifications: ec2Tags(o, ec2types.ResourceTypeSubnet, "qleet-"+o.ID+"-"+z)})
		if err != nil {
			return nil, awscloud.Outcome(fmt.Errorf("create a subnet in %s: %w", z, awscloud.Classify(err)))
		}
		ids = append(ids, sdkaws.ToString(out.Subnet.SubnetId))
	}
	return ids, nil
}

// Remove deletes what Ensure made, in reverse: the node group, the OpenID Connect provider, the cluster, the subnets, the VPC and
// the roles. Each is looked up first, so that a deletion interrupted at any point resumes; what lacks
// the runtime's tags is left alone. It returns a requeue delay while AWS is still deleting.
func (e *EKS) Remove(ctx context.Context, rt *api.KubernetesRuntime) (time.Duration, error) {
	cls, _, err := e.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return 0, err
	}
	if rt.Status.Cloud == nil {
		rt.Status.Cloud = &api.CloudResources{}
	}
	o := owner(rt)
	name := ClusterName(rt)
	cluster, err := describeCluster(ctx, cls.EKS, name)
	if err != nil {
		return 0, err
	}
	if cluster != nil && o.Owns(cluster.Tags) {
		ng, err := describeNodegroup(ctx, cls.EKS, name)
		if err != nil {
			return 0, err
		}
		if ng != nil && o.Owns(ng.Tags) {
			if ng.Status != ekstypes.NodegroupStatusDeleting {
				if _, err := cls.EKS.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: &name, NodegroupName: sdkaws.String(NodeGroupName)}); err != nil && !awscloud.IsNotFound(err) {
					return 0, awscloud.Outcome(fmt.Errorf("delete EKS node group %s: %w", NodeGroupName, awscloud.Classify(err)))
				}
			}
			step(rt, "eks: node group %s: deleting", NodeGroupName)
			return e.poll(), nil
		}
		if cluster.Status != ekstypes.ClusterStatusDeleting {
			step(rt, "iam: oidc provider: deleting")
			if err := removeOIDCProviders(ctx, cls.IAM, o); err != nil {
				return 0, err
			}
			if _, err := cls.EKS.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: &name}); err != nil && !awscloud.IsNotFound(err) {
				return 0, awscloud.Outcome(fmt.Errorf("delete EKS cluster %s: %w", name, awscloud.Classify(err)))
			}
		}
		step(rt, "eks: cluster %s: deleting", name)
		return e.poll(), nil
	} else if cluster != nil {
		reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "EKS cluster %s has no QleetOS ownership tags for this runtime; it was left unchanged", name)
	}

	// A deletion that resumes after the cluster is gone may still find its provider.
	if err := removeOIDCProviders(ctx, cls.IAM, o); err != nil {
		return 0, err
	}
	if len(rt.Spec.SubnetIDs) == 0 {
		step(rt, "ec2: subnets: deleting")
		have, err := findSubnets(ctx, cls.EC2, o)
		if err != nil {
			return 0, err
		}
		for _, id := range have {
			if _, err := cls.EC2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: sdkaws.String(id)}); err != nil && !awscloud.IsNotFound(err) {
				return 0, awscloud.Outcome(fmt.Errorf("delete subnet %s: %w", id, awscloud.Classify(err)))
			}
		}
		step(rt, "ec2: vpc: deleting")
		vpc, err := findVPC(ctx, cls.EC2, o)
		if err != nil {
			return 0, err
		}
		if vpc != "" {
			if _, err := cls.EC2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: &vpc}); err != nil && !awscloud.IsNotFound(err) {
				return 0, awscloud.Outcome(fmt.Errorf("delete VPC %s: %w", vpc, awscloud.Classify(err)))
			}
		}
	}
	for _, r := range []struct{ what, name string }{{"node", RoleName(rt, "node")}, {"cluster", RoleName(rt, "cluster")}} {
		step(rt, "iam: %s role: deleting", r.what)
		if err := deleteRole(ctx, cls.IAM, r.name, o); err != nil {
			return 0, err
		}
	}
	rt.Status.Cloud.Step = ""
	return 0, nil
}

func deleteRole(ctx context.Context, svc awscloud.IAM, name string, o awscloud.Owner) error {
	got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
	if awscloud.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return awscloud.Outcome(fmt.Errorf("get IAM role %s: %w", name, awscloud.Classify(err)))
	}
	if !o.Owns(awscloud.IAMTagMap(got.Role.Tags)) {
		reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "IAM role %s has no QleetOS ownership tags for this runtime; it was left unchanged", name)
		return nil
	}
	attached, err := attachedPolicies(ctx, svc, name)
	if err != nil {
		return err
	}
	for _, p := range attached {
		if _, err := svc.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: &name, PolicyArn: sdkaws.String(p)}); err != nil && !awscloud.IsNotFound(err) {
			return awscloud.Outcome(fmt.Errorf("detach %s from IAM role %s: %w", p, name, awscloud.Classify(err)))
		}
	}
	if _, err := svc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: &name}); err != nil && !awscloud.IsNotFound(err) {
		return awscloud.Outcome(fmt.Errorf("delete IAM role %s: %w", name, awscloud.Classify(err)))
	}
	return nil
}

// RESTConfig connects to an eks runtime's cluster: its endpoint and certificate authority from
// DescribeCluster, and EKS tokens made with the cloud account's credentials, refreshed before they
// expire. It is kube.ConnectorConfig's source for provider eks.
func (e *EKS) RESTConfig(ctx context.Context, rt *api.KubernetesRuntime) (*rest.Config, error) {
	cls, _, err := e.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return nil, err
	}
	name := ClusterName(rt)
	cluster, err := describeCluster(ctx, cls.EKS, name)
	if err != nil {
		return nil, err
	}
	if cluster == nil || cluster.Status != ekstypes.ClusterStatusActive && cluster.Status != ekstypes.ClusterStatusUpdating {
		return nil, fmt.Errorf("EKS cluster %s is not ACTIVE", name)
	}
	ca := ""
	if cluster.CertificateAuthority != nil {
		ca = sdkaws.ToString(cluster.CertificateAuthority.Data)
	}
	return awscloud.RESTConfig(sdkaws.ToString(cluster.Endpoint), ca, awscloud.NewTokenSource(cls.Config, name))
}
