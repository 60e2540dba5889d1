package dataservice

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	rdstypes "github.com/aws/aws-sdk-go-v2/service/rds/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// AWS serves data services with AWS on eks runtimes, chosen by the runtime's provider and never by the
// user's spec: a database is an RDS instance in the cluster's VPC (a DB subnet group over the cluster's
// subnets), a bucket is an S3 bucket. Each is tagged with the data service's ownership, and the instance
// gets the connection details the same way as in-cluster: from the credentials Secret in the data
// service's namespace on the runtime. Nothing without QleetOS's tags is changed or deleted.
type AWS struct {
	// Accounts gives the runtimes' cloud accounts' clients. Required.
	Accounts *awscloud.Accounts
	// DBInstanceClass is the RDS instance class (default db.t3.micro).
	DBInstanceClass string
}

func awsOwner(id string, svc Service) awscloud.Owner { return awscloud.Owner{Kind: svc.Kind, ID: id} }

// CloudName is the name of the RDS instance (and DB subnet group) or the S3 bucket serving a data
// service on a runtime: its name, and a hash of its id and the runtime's, so that it is unique per
// account (buckets: worldwide) and says whose it is.
func CloudName(id, name, runtimeID string) string {
	sum := sha256.Sum256([]byte(id + "/" + runtimeID))
	name = strings.ReplaceAll(name, "--", "-")
	if len(name) > 30 {
		name = strings.TrimRight(name[:30], "-")
	}
	return "qleet-" + name + "-" + hex.EncodeToString(sum[:6])
}

// run serves the data service on an eks runtime and reports it in rs.
func (a *AWS) run(ctx context.Context, cl *kube.Cluster, id, name string, svc Service, rt *api.KubernetesRuntime, consumers []string, rs *api.DataRuntimeStatus) error {
	cls, ca, err := a.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return err
	}
	ns := svc.Namespace
	if err := ownNamespace(ctx, cl, ns, id, false); err != nil {
		return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
	}
	creds, err := credentials(ctx, cl, svc)
	if err != nil {
		return err
	}
	objs := credentialObjects(ns, creds)
	owner := kube.Owner{InstanceID: id, Kind: svc.Kind, Namespace: ns, Previous: kube.RefsOf(rs.Objects)}
	applied, err := kube.Apply(ctx, cl, owner, objs)
	if err != nil {
		if kube.IsInvalid(err) || kube.IsOwnershipConflict(err) {
			return reconcile.Terminal(fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err))
		}
		return fmt.Errorf("on kubernetes_runtime %q: %w", rt.Name, err)
	}
	rep := kube.HealthWith(ctx, cl, applied, kube.HealthOptions{})
	rs.Objects, rs.Namespace, rs.Region = rep.Objects, ns, rt.Spec.Region
	rs.CloudID = CloudName(id, name, rt.ID)
	o := awsOwner(id, svc)
	var ready bool
	if svc.Kind == api.KindBucket {
		ready, err = a.ensureBucket(ctx, cls.S3, rs, rt.Spec.Region, o)
		rs.Endpoint = "https://s3." + rt.Spec.Region + ".amazonaws.com"
		if ca.Spec.Endpoint != "" {
			rs.Endpoint = ca.Spec.Endpoint
		}
		if err == nil && ready {
			err = bucketAccess(ctx, cls, cl, rs.CloudID, rs.CloudID, rt, consumers, o)
		}
	} else {
		ready, err = a.ensureDB(ctx, cls.RDS, cls.EC2, rs, svc, creds, rt, o)
		if err == nil && ready && (rs.Replicas > 0 || len(rs.ReplicaCloudIDs) > 0) {
			ready, err = a.syncReplicas(ctx, rt, id, name, svc, rs, rs.Replicas, rs)
		}
	}
	if err != nil {
		return err
	}
	if !ready {
		rs.Phase = api.PhaseReconciling
		return nil
	}
	rs.Phase, rs.Message = api.PhaseReady, ""
	return nil
}

// credentials are the data service's credentials: those already in its Secret, else new ones. They are
// written to the cluster before any cloud resource uses them, so that a crash never loses a password
// an RDS instance was made with. A bucket has none: its workload reaches S3 with its service account's
// role (IRSA), annotated by ensureBucketRole's caller.
func credentials(ctx context.Context, cl *kube.Cluster, svc Service) (map[string]string, error) {
	if svc.Kind == api.KindBucket {
		return map[string]string{"access_key": "", "secret_key": ""}, nil
	}
	return keptCredentials(ctx, cl, svc)
}

// keptCredentials are svc.Credentials with their values: those already in the credentials Secret, else
// the fixed ones, else new random ones.
func keptCredentials(ctx context.Context, cl *kube.Cluster, svc Service) (map[string]string, error) {
	existing := map[string][]byte{}
	sec, err := cl.Clientset.CoreV1().Secrets(svc.Namespace).Get(ctx, CredentialsSecret, metav1.GetOptions{})
	switch {
	case err == nil:
		existing = sec.Data
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	out := map[string]string{}
	for k, fixed := range svc.Credentials {
		v := string(existing[k])
		if v == "" {
			v = fixed
		}
		if v == "" {
			b := make([]byte, 18)
			if _, err := rand.Read(b); err != nil {
				return nil, err
			}
			v = base64.RawURLEncoding.EncodeToString(b)
		}
		out[k] = v
	}
	return out, nil
}

func credentialObjects(ns string, creds map[string]string) []*unstructured.Unstructured {
	data := map[string]any{}
	for k, v := range creds {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": CredentialsSecret, "namespace": ns}, "type": "Opaque", "data": data}},
	}
}

func rdsTags(o awscloud.Owner) []rdstypes.Tag {
	var tags []rdstypes.Tag
	for _, k := range []string{awscloud.TagOwnerKind, awscloud.TagOwnerID, awscloud.TagManagedBy} {
		tags = append(tags, rdstypes.Tag{Key: sdkaws.String(k), Value: sdkaws.String(o.Tags()[k])})
	}
	return tags
}

func rdsTagMap(tags []rdstypes.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[sdkaws.ToString(t.Key)] = sdkaws.ToString(t.Value)
	}
	return m
}

func notOurs(what string) error {
	return reconcile.Terminal(fmt.Errorf("%s already exists and was not created by QleetOS for this object (no ownership tags); it was left unchanged", what))
}

// storageGiB is the RDS allocated storage for a size: whole GiB, at least RDS's minimum of 20.
func storageGiB(size string) int32 {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return 20
	}
	return int32(max(20, math.Ceil(float64(q.Value())/(1<<30))))
}

// ensureDB makes the DB subnet group and the RDS instance, and reports the instance's address once it
// is available.
func (a *AWS) ensureDB(ctx context.Context, awsAPI awscloud.RDS, ec2api awscloud.EC2, rs *api.DataRuntimeStatus, svc Service, creds map[string]string, rt *api.KubernetesRuntime, o awscloud.Owner) (bool, error) {
	name := rs.CloudID
	db, err := describeDB(ctx, awsAPI, name)
	if err != nil {
		return false, err
	}
	if db == nil {
		if rt.Status.Cloud == nil || len(rt.Status.Cloud.SubnetIDs) == 0 {
			return false, reconcile.Wait(fmt.Sprintf("kubernetes_runtime %q", rt.Name), "no subnets recorded", "RuntimeNotReady", 5*time.Second)
		}
		if err := ensureSubnetGroup(ctx, awsAPI, name, rt.Status.Cloud.SubnetIDs, o); err != nil {
			return false, err
		}
		sg, err := ensureSecurityGroup(ctx, ec2api, name, svc.Port, rt, o)
		if err != nil {
			return false, err
		}
		class := a.DBInstanceClass
		if class == "" {
			class = "db.t3.micro"
		}
		out, err := awsAPI.CreateDBInstance(ctx, &rds.CreateDBInstanceInput{DBInstanceIdentifier: &name, DBInstanceClass: &class,
			Engine: sdkaws.String(svc.Engine), EngineVersion: sdkaws.String(svc.Version), AllocatedStorage: sdkaws.Int32(storageGiB(svc.Size)),
			MasterUsername: sdkaws.String(creds["username"]), MasterUserPassword: sdkaws.String(creds["password"]), DBName: sdkaws.String(creds["database"]),
			DBSubnetGroupName: &name, VpcSecurityGroupIds: []string{sg}, PubliclyAccessible: sdkaws.Bool(false), Tags: rdsTags(o)})
		if err != nil {
			return false, awscloud.Outcome(fmt.Errorf("create RDS instance %s: %w", name, awscloud.Classify(err)))
		}
		reconcile.Eventf(ctx, api.EventNormal, "RDSCreating", "creating RDS instance %s (%s %s) on kubernetes_runtime %q", name, svc.Engine, svc.Version, rt.Name)
		db = out.DBInstance
	} else if !o.Owns(rdsTagMap(db.TagList)) {
		return false, notOurs("RDS instance " + name)
	}
	st := sdkaws.ToString(db.DBInstanceStatus)
	if st != "available" || db.Endpoint == nil {
		if st == "failed" || st == "incompatible-parameters" || st == "storage-full" {
			return false, reconcile.Terminal(fmt.Errorf("RDS instance %s is %s", name, st))
		}
		rs.Message = fmt.Sprintf("RDS instance %s is %s", name, st)
		return false, nil
	}
	rs.Host, rs.Port = sdkaws.ToString(db.Endpoint.Address), sdkaws.ToInt32(db.Endpoint.Port)
	return true, nil
}

func describeDB(ctx context.Context, awsAPI awscloud.RDS, name string) (*rdstypes.DBInstance, error) {
	out, err := awsAPI.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: &name})
	if awscloud.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("describe RDS instance %s: %w", name, awscloud.Classify(err)))
	}
	if len(out.DBInstances) == 0 {
		return nil, nil
	}
	return &out.DBInstances[0], nil
}

// subnetGroup returns the DB subnet group's ARN, or "" when it does not exist.
func subnetGroup(ctx context.Context, awsAPI awscloud.RDS, name string) (string, error) {
	out, err := awsAPI.DescribeDBSubnetGroups(ctx, &rds.DescribeDBSubnetGroupsInput{DBSubnetGroupName: &name})
	if awscloud.IsNotFound(err) || err == nil && len(out.DBSubnetGroups) == 0 {
		return "", nil
	}
	if err != nil {
		return "", awscloud.Outcome(fmt.Errorf("describe DB subnet group %s: %w", name, awscloud.Classify(err)))
	}
	return sdkaws.ToString(out.DBSubnetGroups[0].DBSubnetGroupArn), nil
}

// ownsSubnetGroup reports whether the DB subnet group carries o's tags.
func ownsSubnetGroup(ctx context.Context, awsAPI awscloud.RDS, arn string, o awscloud.Owner) (bool, error) {
	out, err := awsAPI.ListTagsForResource(ctx, &rds.ListTagsForResourceInput{ResourceName: &arn})
	if err != nil {
		return false, awscloud.Outcome(fmt.Errorf("list the tags of %s: %w", arn, awscloud.Classify(err)))
	}
	return o.Owns(rdsTagMap(out.TagList)), nil
}

func ensureSubnetGroup(ctx context.Context, awsAPI awscloud.RDS, name string, subnets []string, o awscloud.Owner) error {
	arn, err := subnetGroup(ctx, awsAPI, name)
	if err != nil {
		return err
	}
	if arn != "" {
		ours, err := ownsSubnetGroup(ctx, awsAPI, arn, o)
		if err != nil || ours {
			return err
		}
		return notOurs("DB subnet group " + name)
	}
	_, err = awsAPI.CreateDBSubnetGroup(ctx, &rds.CreateDBSubnetGroupInput{DBSubnetGroupName: &name, SubnetIds: subnets, Tags: rdsTags(o),
		DBSubnetGroupDescription: sdkaws.String("QleetOS: " + o.Kind + " " + o.ID)})
	if err != nil {
		return awscloud.Outcome(fmt.Errorf("create DB subnet group %s: %w", name, awscloud.Classify(err)))
	}
	return nil
}

func s3Tags(o awscloud.Owner) []s3types.Tag {
	var tags []s3types.Tag
	for _, k := range []string{awscloud.TagOwnerKind, awscloud.TagOwnerID, awscloud.TagManagedBy} {
		tags = append(tags, s3types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(o.Tags()[k])})
	}
	return tags
}

// bucketTags returns a bucket's tags; exists is false when the bucket does not exist.
func bucketTags(ctx context.Context, awsAPI awscloud.S3, name string) (tags map[string]string, exists bool, err error) {
	if _, err := awsAPI.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name}); err != nil {
		if awscloud.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, awscloud.Outcome(fmt.Errorf("look for S3 bucket %s: %w", name, awscloud.Classify(err)))
	}
	out, err := awsAPI.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: &name})
	if awscloud.IsCode(err, "NoSuchTagSet") {
		return map[string]string{}, true, nil
	}
	if err != nil {
		return nil, true, awscloud.Outcome(fmt.Errorf("read the tags of S3 bucket %s: %w", name, awscloud.Classify(err)))
	}
	tags = map[string]string{}
	for _, t := range out.TagSet {
		tags[sdkaws.ToString(t.Key)] = sdkaws.ToString(t.Value)
	}
	return tags, true, nil
}

// ensureBucket makes the S3 bucket and tags it. S3 cannot tag a bucket as it makes it, so a bucket of
// this name without any tags is one whose tagging an earlier reconcile did not reach (the name holds a
// hash of the object's id): it is tagged now. A bucket with other tags is not QleetOS's.
func (a *AWS) ensureBucket(ctx context.Context, awsAPI awscloud.S3, rs *api.DataRuntimeStatus, region string, o awscloud.Owner) (bool, error) {
	name := rs.CloudID
	tags, exists, err := bucketTags(ctx, awsAPI, name)
	if err != nil {
		return false, err
	}
	switch {
	case exists && o.Owns(tags):
		return true, nil
	case exists && len(tags) > 0:
		return false, notOurs("S3 bucket " + name)
	case !exists:
		in := &s3.CreateBucketInput{Bucket: &name}
		if region != "us-east-1" {
			in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
		}
		if _, err := awsAPI.CreateBucket(ctx, in); err != nil {
			return false, awscloud.Outcome(fmt.Errorf("create S3 bucket %s: %w", name, awscloud.Classify(err)))
		}
	}
	if _, err := awsAPI.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: &name, Tagging: &s3types.Tagging{TagSet: s3Tags(o)}}); err != nil {
		return false, awscloud.Outcome(fmt.Errorf("tag S3 bucket %s: %w", name, awscloud.Classify(err)))
	}
	return true, nil
}

// remove deletes the data service's RDS instance and subnet group, or its role (IRSA) and then empties
// and deletes its bucket, on an eks runtime. It returns a requeue delay while AWS is still deleting.
func (a *AWS) remove(ctx context.Context, cl *kube.Cluster, id, objName string, svc Service, rt *api.KubernetesRuntime, rs *api.DataRuntimeStatus) (time.Duration, error) {
	cls, _, err := a.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		var we *reconcile.WaitError
		if errors.As(err, &we) {
			return 0, reconcile.Terminal(fmt.Errorf("cannot clean up on kubernetes_runtime %q: %w", rt.Name, err))
		}
		return 0, err
	}
	o := awsOwner(id, svc)
	name := CloudName(id, objName, rt.ID)
	if svc.Kind == api.KindBucket {
		// In reverse: the service accounts' annotation, the role, the bucket.
		if rt.Status.Cloud != nil && rt.Status.Cloud.AccountID != "" {
			if err := unannotateServiceAccounts(ctx, cl, "arn:aws:iam::"+rt.Status.Cloud.AccountID+":role/"+name); err != nil {
				return 0, err
			}
		}
		if err := removeBucketRole(ctx, cls.IAM, name, o); err != nil {
			return 0, err
		}
		return 0, removeBucket(ctx, cls.S3, name, o)
	}
	db, err := describeDB(ctx, cls.RDS, name)
	if err != nil {
		return 0, err
	}
	if db != nil {
		if !o.Owns(rdsTagMap(db.TagList)) {
			reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "RDS instance %s has no QleetOS ownership tags for this database; it was left unchanged", name)
			return 0, nil
		}
		if sdkaws.ToString(db.DBInstanceStatus) != "deleting" {
			if _, err := cls.RDS.DeleteDBInstance(ctx, &rds.DeleteDBInstanceInput{DBInstanceIdentifier: &name, SkipFinalSnapshot: sdkaws.Bool(true),
				DeleteAutomatedBackups: sdkaws.Bool(true)}); err != nil && !awscloud.IsNotFound(err) {
				return 0, awscloud.Outcome(fmt.Errorf("delete RDS instance %s: %w", name, awscloud.Classify(err)))
			}
		}
		rs.Message = fmt.Sprintf("RDS instance %s is deleting on kubernetes_runtime %q", name, rt.Name)
		return time.Second, nil
	}
	arn, err := subnetGroup(ctx, cls.RDS, name)
	if err != nil {
		return 0, err
	}
	if arn != "" {
		ours, err := ownsSubnetGroup(ctx, cls.RDS, arn, o)
		if err != nil {
			return 0, err
		}
		if ours {
			if _, err := cls.RDS.DeleteDBSubnetGroup(ctx, &rds.DeleteDBSubnetGroupInput{DBSubnetGroupName: &name}); err != nil && !awscloud.IsNotFound(err) {
				return 0, awscloud.Outcome(fmt.Errorf("delete DB subnet group %s: %w", name, awscloud.Classify(err)))
			}
		}
	}
	sg, err := findSecurityGroup(ctx, cls.EC2, name, o)
	if err != nil || sg == nil {
		return 0, err
	}
	if _, err := cls.EC2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil && !awscloud.IsNotFound(err) {
		return 0, awscloud.Outcome(fmt.Errorf("delete security group %s: %w", name, awscloud.Classify(err)))
	}
	return 0, nil
}

func removeBucket(ctx context.Context, awsAPI awscloud.S3, name string, o awscloud.Owner) error {
	tags, exists, err := bucketTags(ctx, awsAPI, name)
	if err != nil || !exists {
		return err
	}
	if !o.Owns(tags) {
		reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "S3 bucket %s has no QleetOS ownership tags for this bucket; it was left unchanged", name)
		return nil
	}
	for {
		out, err := awsAPI.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &name})
		if err != nil {
			return awscloud.Outcome(fmt.Errorf("list S3 bucket %s: %w", name, awscloud.Classify(err)))
		}
		if len(out.Contents) == 0 {
			break
		}
		for _, obj := range out.Contents {
			if _, err := awsAPI.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &name, Key: obj.Key}); err != nil && !awscloud.IsNotFound(err) {
				return awscloud.Outcome(fmt.Errorf("empty S3 bucket %s: %w", name, awscloud.Classify(err)))
			}
		}
	}
	if _, err := awsAPI.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &name}); err != nil && !awscloud.IsNotFound(err) {
		return awscloud.Outcome(fmt.Errorf("delete S3 bucket %s: %w", name, awscloud.Classify(err)))
	}
	return nil
}

func ec2OwnerTags(o awscloud.Owner, name string) []ec2types.TagSpecification {
	tags := []ec2types.Tag{{Key: sdkaws.String("Name"), Value: sdkaws.String(name)}}
	for _, k := range []string{awscloud.TagOwnerKind, awscloud.TagOwnerID, awscloud.TagManagedBy} {
		tags = append(tags, ec2types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(o.Tags()[k])})
	}
	return []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: tags}}
}

// findSecurityGroup returns the security group named name that carries o's tags, if any.
func findSecurityGroup(ctx context.Context, awsAPI awscloud.EC2, name string, o awscloud.Owner) (*ec2types.SecurityGroup, error) {
	out, err := awsAPI.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		{Name: sdkaws.String("tag:" + awscloud.TagOwnerKind), Values: []string{o.Kind}},
		{Name: sdkaws.String("tag:" + awscloud.TagOwnerID), Values: []string{o.ID}},
	}})
	if err != nil {
		return nil, awscloud.Outcome(fmt.Errorf("find security group %s: %w", name, awscloud.Classify(err)))
	}
	for i := range out.SecurityGroups {
		if sdkaws.ToString(out.SecurityGroups[i].GroupName) == name {
			return &out.SecurityGroups[i], nil
		}
	}
	return nil, nil
}

// ensureSecurityGroup makes the database's security group in the cluster's VPC: the database's port,
// open to the VPC's addresses (where the cluster's nodes are).
func ensureSecurityGroup(ctx context.Context, awsAPI awscloud.EC2, name string, port int32, rt *api.KubernetesRuntime, o awscloud.Owner) (string, error) {
	sg, err := findSecurityGroup(ctx, awsAPI, name, o)
	if err != nil {
		return "", err
	}
	if sg == nil {
		vpc := rt.Status.Cloud.VPCID
		if vpc == "" {
			out, err := awsAPI.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: rt.Status.Cloud.SubnetIDs[:1]})
			if err != nil || len(out.Subnets) == 0 {
				return "", awscloud.Outcome(fmt.Errorf("find the VPC of subnet %s: %w", rt.Status.Cloud.SubnetIDs[0], awscloud.Classify(err)))
			}
			vpc = sdkaws.ToString(out.Subnets[0].VpcId)
		}
		out, err := awsAPI.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: &name, VpcId: &vpc,
			Description: sdkaws.String("QleetOS: " + o.Kind + " " + o.ID), TagSpecifications: ec2OwnerTags(o, name)})
		if err != nil {
			return "", awscloud.Outcome(fmt.Errorf("create security group %s: %w", name, awscloud.Classify(err)))
		}
		sg = &ec2types.SecurityGroup{GroupId: out.GroupId, VpcId: &vpc}
	}
	if len(sg.IpPermissions) > 0 {
		return sdkaws.ToString(sg.GroupId), nil
	}
	vpcs, err := awsAPI.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{sdkaws.ToString(sg.VpcId)}})
	if err != nil || len(vpcs.Vpcs) == 0 {
		return "", awscloud.Outcome(fmt.Errorf("read VPC %s: %w", sdkaws.ToString(sg.VpcId), awscloud.Classify(err)))
	}
	if _, err := awsAPI.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: sg.GroupId,
		IpPermissions: []ec2types.IpPermission{{IpProtocol: sdkaws.String("tcp"), FromPort: &port, ToPort: &port,
			IpRanges: []ec2types.IpRange{{CidrIp: vpcs.Vpcs[0].CidrBlock, Description: sdkaws.String("the cluster's VPC")}}}}}); err != nil {
		return "", awscloud.Outcome(fmt.Errorf("open port %d in security group %s: %w", port, name, awscloud.Classify(err)))
	}
	return sdkaws.ToString(sg.GroupId), nil
}
