package dataservice

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// RDS read replicas: a database whose home is an RDS instance runs its replicas_per_region as RDS read
// replicas in the region of the runtime that hosts them (the home's own region from its identifier,
// another region from its ARN), in that runtime's VPC: a DB subnet group and a security group named
// like the home's would be there (CloudName of the runtime). They hold no data of their own, so they go
// with the database whether or not it is retained, before the home.

// replicaName is the RDS identifier of a data service's i-th read replica (from 1) on a runtime.
func replicaName(id, name, runtimeID string, i int) string {
	return CloudName(id, name, runtimeID) + "-r" + strconv.Itoa(i)
}

// syncReplicas keeps n RDS read replicas of the home in rt's region, deletes those above n, and reports
// them in rs (ReplicaCloudIDs, ReadHost: the first one's endpoint). ready is false while one is not
// available yet.
func (a *AWS) syncReplicas(ctx context.Context, rt *api.KubernetesRuntime, id, name string, svc Service, home *api.DataRuntimeStatus, n int, rs *api.DataRuntimeStatus) (bool, error) {
	cls, _, err := a.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return false, err
	}
	o := awsOwner(id, svc)
	// Those above n go first: replicas turned down, or off.
	var kept []string
	for _, rid := range rs.ReplicaCloudIDs {
		i, _ := strconv.Atoi(strings.TrimPrefix(rid, CloudName(id, name, rt.ID)+"-r"))
		if i >= 1 && i <= n {
			kept = append(kept, rid)
			continue
		}
		if _, err := deleteReplica(ctx, cls.RDS, rid, o); err != nil {
			return false, err
		}
		reconcile.Eventf(ctx, api.EventNormal, "ReplicaDeleted", "deleting RDS read replica %s on kubernetes_runtime %q", rid, rt.Name)
	}
	rs.ReplicaCloudIDs, rs.ReadHost = kept, ""
	if n == 0 {
		return true, nil
	}
	base := CloudName(id, name, rt.ID)
	var source string
	ready := true
	for i := 1; i <= n; i++ {
		rid := replicaName(id, name, rt.ID, i)
		db, err := describeDB(ctx, cls.RDS, rid)
		if err != nil {
			return false, err
		}
		if db == nil {
			if source == "" {
				if source, err = a.replicaSource(ctx, rt, home); err != nil {
					return false, err
				}
				if err := a.replicaNetwork(ctx, cls, base, svc, rt, o); err != nil {
					return false, err
				}
			}
			sg, err := findSecurityGroup(ctx, cls.EC2, base, o)
			if err != nil {
				return false, err
			}
			in := &rds.CreateDBInstanceReadReplicaInput{DBInstanceIdentifier: &rid, SourceDBInstanceIdentifier: &source,
				DBInstanceClass: sdkaws.String(a.instanceClass()), DBSubnetGroupName: &base, PubliclyAccessible: sdkaws.Bool(false), Tags: rdsTags(o)}
			if sg != nil {
				in.VpcSecurityGroupIds = []string{sdkaws.ToString(sg.GroupId)}
			}
			out, err := cls.RDS.CreateDBInstanceReadReplica(ctx, in)
			if err != nil {
				return false, awscloud.Outcome(fmt.Errorf("create RDS read replica %s: %w", rid, awscloud.Classify(err)))
			}
			reconcile.Eventf(ctx, api.EventNormal, "ReplicaCreating", "creating RDS read replica %s of %s on kubernetes_runtime %q", rid, home.CloudID, rt.Name)
			db = out.DBInstance
		} else if !o.Owns(rdsTagMap(db.TagList)) {
			return false, notOurs("RDS instance " + rid)
		}
		if !slices.Contains(rs.ReplicaCloudIDs, rid) {
			rs.ReplicaCloudIDs = append(rs.ReplicaCloudIDs, rid)
		}
		st := sdkaws.ToString(db.DBInstanceStatus)
		if st != "available" || db.Endpoint == nil {
			ready = false
			rs.Message = fmt.Sprintf("RDS read replica %s is %s", rid, st)
			continue
		}
		if i == 1 {
			rs.ReadHost = sdkaws.ToString(db.Endpoint.Address)
		}
	}
	return ready, nil
}

// replicaSource names the home to a replica on rt: its identifier in the same region, else its ARN.
func (a *AWS) replicaSource(ctx context.Context, rt *api.KubernetesRuntime, home *api.DataRuntimeStatus) (string, error) {
	if home.Region == rt.Spec.Region {
		return home.CloudID, nil
	}
	cls, _, err := a.Accounts.Clients(ctx, rt.Spec.CloudAccountID, home.Region)
	if err != nil {
		return "", err
	}
	db, err := describeDB(ctx, cls.RDS, home.CloudID)
	if err != nil {
		return "", err
	}
	if db == nil {
		return "", reconcile.Terminal(fmt.Errorf("its home, RDS instance %s, is not in region %s of kubernetes_runtime %q's cloud account: QleetOS makes read replicas within one account", home.CloudID, home.Region, rt.Name))
	}
	return sdkaws.ToString(db.DBInstanceArn), nil
}

// replicaNetwork puts a DB subnet group and a security group in rt's VPC for its replicas (the home's
// runtime has them already).
func (a *AWS) replicaNetwork(ctx context.Context, cls *awscloud.Clients, base string, svc Service, rt *api.KubernetesRuntime, o awscloud.Owner) error {
	if rt.Status.Cloud == nil || len(rt.Status.Cloud.SubnetIDs) == 0 {
		return reconcile.Wait(fmt.Sprintf("kubernetes_runtime %q", rt.Name), "no subnets recorded", "RuntimeNotReady", 5*time.Second)
	}
	if err := ensureSubnetGroup(ctx, cls.RDS, base, rt.Status.Cloud.SubnetIDs, o); err != nil {
		return err
	}
	_, err := ensureSecurityGroup(ctx, cls.EC2, base, svc.Port, rt, o)
	return err
}

// removeReplicas deletes the data service's read replicas on rt; gone is false while one still exists.
func (a *AWS) removeReplicas(ctx context.Context, rt *api.KubernetesRuntime, id string, svc Service, rs *api.DataRuntimeStatus) (bool, error) {
	if len(rs.ReplicaCloudIDs) == 0 {
		return true, nil
	}
	cls, _, err := a.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return false, err
	}
	gone := true
	for _, rid := range rs.ReplicaCloudIDs {
		exists, err := deleteReplica(ctx, cls.RDS, rid, awsOwner(id, svc))
		if err != nil {
			return false, err
		}
		if exists {
			gone = false
			rs.Message = fmt.Sprintf("RDS read replica %s is deleting on kubernetes_runtime %q", rid, rt.Name)
		}
	}
	return gone, nil
}

// deleteReplica deletes a read replica that QleetOS made (one without its tags is left alone) and
// reports whether it still exists.
func deleteReplica(ctx context.Context, awsAPI awscloud.RDS, rid string, o awscloud.Owner) (bool, error) {
	db, err := describeDB(ctx, awsAPI, rid)
	if err != nil || db == nil {
		return false, err
	}
	if !o.Owns(rdsTagMap(db.TagList)) {
		reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "RDS instance %s has no QleetOS ownership tags for this database; it was left unchanged", rid)
		return false, nil
	}
	if sdkaws.ToString(db.DBInstanceStatus) != "deleting" {
		if _, err := awsAPI.DeleteDBInstance(ctx, &rds.DeleteDBInstanceInput{DBInstanceIdentifier: &rid, SkipFinalSnapshot: sdkaws.Bool(true),
			DeleteAutomatedBackups: sdkaws.Bool(true)}); err != nil && !awscloud.IsNotFound(err) {
			return false, awscloud.Outcome(fmt.Errorf("delete RDS read replica %s: %w", rid, awscloud.Classify(err)))
		}
	}
	return true, nil
}

func (a *AWS) instanceClass() string {
	if a.DBInstanceClass == "" {
		return "db.t3.micro"
	}
	return a.DBInstanceClass
}

// removeReplicas deletes the read replicas of a data service being deleted, on every eks runtime;
// gone is false while one still exists.
func (r *Reconciler[S, T]) removeReplicas(ctx context.Context, obj *api.Object[S, T], svc Service) (bool, error) {
	if r.AWS == nil {
		return true, nil
	}
	gone := true
	for _, rs := range *r.Kind.Runtimes(&obj.Status) {
		if len(rs.ReplicaCloudIDs) == 0 {
			continue
		}
		rt, err := r.lookups(ctx).Runtimes.Get(ctx, rs.RuntimeID)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, err
		}
		done, err := r.AWS.removeReplicas(ctx, rt, obj.ID, svc, &rs)
		if err != nil {
			return false, err
		}
		if !done {
			gone = false
			client.CommonStatus(obj).Message = rs.Message
		}
	}
	return gone, nil
}

// bucketAccess gives the consumers on rt, an eks runtime that is not the home of an S3 bucket, the
// bucket through a role of this runtime's own (named like a bucket there would be), trusted by its
// cluster only.
func (a *AWS) bucketAccess(ctx context.Context, cl *kube.Cluster, id, name string, svc Service, home *api.DataRuntimeStatus, rt *api.KubernetesRuntime, consumers []string) error {
	cls, _, err := a.Accounts.Clients(ctx, rt.Spec.CloudAccountID, rt.Spec.Region)
	if err != nil {
		return err
	}
	return bucketAccess(ctx, cls, cl, CloudName(id, name, rt.ID), home.CloudID, rt, consumers, awsOwner(id, svc))
}
