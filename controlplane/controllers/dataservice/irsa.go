package dataservice

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/kube"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// WorkloadServiceAccount is the service account of an instance's pods (they name none), whose
// annotation gives them the role of their bucket on eks runtimes (IRSA).
const WorkloadServiceAccount = "default"

// bucketPolicyName is the bucket role's inline policy.
const bucketPolicyName = "s3-bucket"

// trustedSubjects reads the service account subjects a role's trust policy (URL-encoded, as IAM
// answers it) lets assume it.
func trustedSubjects(doc string) []string {
	if d, err := url.QueryUnescape(doc); err == nil {
		doc = d
	}
	var p struct {
		Statement []struct {
			Condition map[string]map[string]any
		}
	}
	if json.Unmarshal([]byte(doc), &p) != nil {
		return nil
	}
	var subs []string
	for _, st := range p.Statement {
		for k, v := range st.Condition["StringEquals"] {
			if len(k) < 4 || k[len(k)-4:] != ":sub" {
				continue
			}
			switch v := v.(type) {
			case string:
				subs = append(subs, v)
			case []any:
				for _, s := range v {
					if s, ok := s.(string); ok {
						subs = append(subs, s)
					}
				}
			}
		}
	}
	slices.Sort(subs)
	return subs
}

// bucketAccess gives the consumers on an eks runtime the bucket with a role of their own (IRSA): the
// role named role, trusted by that cluster only, and their service accounts annotated with it. The home's
// runtime and every other eks runtime a consumer runs on each have one: a role trusts one cluster's
// OpenID Connect provider, and IAM is global, so a role per runtime keeps each trust policy simple.
func bucketAccess(ctx context.Context, cls *awscloud.Clients, cl *kube.Cluster, role, bucket string, rt *api.KubernetesRuntime, consumers []string, o awscloud.Owner) error {
	subjects := make([]string, 0, len(consumers))
	for _, ns := range consumers {
		subjects = append(subjects, awscloud.ServiceAccountSubject(ns, WorkloadServiceAccount))
	}
	arn, err := ensureBucketRole(ctx, cls, role, bucket, rt, subjects, o)
	if err != nil {
		return err
	}
	return annotateServiceAccounts(ctx, cl, consumers, arn)
}

// ensureBucketRole makes a bucket's IAM role on an eks runtime (IRSA): trusted by the cluster's OpenID
// Connect provider for the service accounts of the instances using the bucket there, with an inline
// policy granting S3 on this bucket only. It returns the role's ARN.
func ensureBucketRole(ctx context.Context, cls *awscloud.Clients, name, bucket string, rt *api.KubernetesRuntime, subjects []string, o awscloud.Owner) (string, error) {
	subjects = slices.Sorted(slices.Values(subjects))
	trust := func() (string, error) {
		if rt.Status.Cloud == nil || rt.Status.Cloud.ClusterName == "" {
			return "", reconcile.Wait(fmt.Sprintf("kubernetes_runtime %q", rt.Name), "no EKS cluster recorded", "RuntimeNotReady", 5*time.Second)
		}
		out, err := cls.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &rt.Status.Cloud.ClusterName})
		if err != nil {
			return "", awscloud.Outcome(fmt.Errorf("describe EKS cluster %s: %w", rt.Status.Cloud.ClusterName, awscloud.Classify(err)))
		}
		if out.Cluster.Identity == nil || out.Cluster.Identity.Oidc == nil || sdkaws.ToString(out.Cluster.Identity.Oidc.Issuer) == "" {
			return "", reconcile.Wait(fmt.Sprintf("EKS cluster %s", rt.Status.Cloud.ClusterName), "no OIDC issuer yet", "RuntimeNotReady", 5*time.Second)
		}
		issuer := sdkaws.ToString(out.Cluster.Identity.Oidc.Issuer)
		return awscloud.WebIdentityTrust(awscloud.OIDCProviderARN(rt.Status.Cloud.AccountID, issuer), issuer, subjects), nil
	}
	got, err := cls.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
	switch {
	case awscloud.IsNotFound(err):
		doc, err := trust()
		if err != nil {
			return "", err
		}
		out, err := cls.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: &name, AssumeRolePolicyDocument: &doc, Tags: o.IAMTags(),
			Description: sdkaws.String("QleetOS: " + o.Kind + " " + o.ID + " on kubernetes_runtime " + rt.Name)})
		if err != nil {
			return "", awscloud.Outcome(fmt.Errorf("create IAM role %s: %w", name, awscloud.Classify(err)))
		}
		if err := putBucketPolicy(ctx, cls.IAM, name, bucket); err != nil {
			return "", err
		}
		return sdkaws.ToString(out.Role.Arn), nil
	case err != nil:
		return "", awscloud.Outcome(fmt.Errorf("get IAM role %s: %w", name, awscloud.Classify(err)))
	}
	if !o.Owns(awscloud.IAMTagMap(got.Role.Tags)) {
		return "", notOurs("IAM role " + name)
	}
	if !slices.Equal(trustedSubjects(sdkaws.ToString(got.Role.AssumeRolePolicyDocument)), subjects) {
		doc, err := trust()
		if err != nil {
			return "", err
		}
		if _, err := cls.IAM.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: &name, PolicyDocument: &doc}); err != nil {
			return "", awscloud.Outcome(fmt.Errorf("update the trust policy of IAM role %s: %w", name, awscloud.Classify(err)))
		}
	}
	pols, err := cls.IAM.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: &name})
	if err != nil {
		return "", awscloud.Outcome(fmt.Errorf("list the policies of IAM role %s: %w", name, awscloud.Classify(err)))
	}
	if !slices.Contains(pols.PolicyNames, bucketPolicyName) {
		if err := putBucketPolicy(ctx, cls.IAM, name, bucket); err != nil {
			return "", err
		}
	}
	return sdkaws.ToString(got.Role.Arn), nil
}

func putBucketPolicy(ctx context.Context, svc awscloud.IAM, role, bucket string) error {
	if _, err := svc.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: &role, PolicyName: sdkaws.String(bucketPolicyName),
		PolicyDocument: sdkaws.String(awscloud.BucketPolicy(bucket))}); err != nil {
		return awscloud.Outcome(fmt.Errorf("put the S3 policy of IAM role %s: %w", role, awscloud.Classify(err)))
	}
	return nil
}

// removeBucketRole deletes the bucket's role (its inline policies first) if it carries o's tags.
func removeBucketRole(ctx context.Context, svc awscloud.IAM, name string, o awscloud.Owner) error {
	got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
	if awscloud.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return awscloud.Outcome(fmt.Errorf("get IAM role %s: %w", name, awscloud.Classify(err)))
	}
	if !o.Owns(awscloud.IAMTagMap(got.Role.Tags)) {
		reconcile.Eventf(ctx, api.EventWarning, "LeftAlone", "IAM role %s has no QleetOS ownership tags for this bucket; it was left unchanged", name)
		return nil
	}
	pols, err := svc.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: &name})
	if err != nil {
		return awscloud.Outcome(fmt.Errorf("list the policies of IAM role %s: %w", name, awscloud.Classify(err)))
	}
	for _, p := range pols.PolicyNames {
		if _, err := svc.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: &name, PolicyName: sdkaws.String(p)}); err != nil && !awscloud.IsNotFound(err) {
			return awscloud.Outcome(fmt.Errorf("delete policy %s of IAM role %s: %w", p, name, awscloud.Classify(err)))
		}
	}
	if _, err := svc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: &name}); err != nil && !awscloud.IsNotFound(err) {
		return awscloud.Outcome(fmt.Errorf("delete IAM role %s: %w", name, awscloud.Classify(err)))
	}
	return nil
}

// annotateServiceAccounts gives the workload service account of each namespace the role (the annotation
// EKS's pod identity webhook reads). A namespace the instance has not made yet is skipped (looked at
// again on the next reconcile); an annotation naming another role (an instance with several buckets:
// a service account has one role) is left, with a warning. The webhook acts when a pod is made, so a
// Deployment of the service account is restarted once for the role (one that started after the role was
// given is restarted too: one rollout more, rather than pods left without the role).
func annotateServiceAccounts(ctx context.Context, cl *kube.Cluster, namespaces []string, roleARN string) error {
	for _, ns := range namespaces {
		if err := annotateServiceAccount(ctx, cl, ns, roleARN); err != nil {
			return err
		}
	}
	return nil
}

// RestartedForRole is the pod template annotation with which a Deployment is restarted when its service
// account gets a role, so that its pods get the role's credentials.
const RestartedForRole = "qleet.io/restarted-for-role"

func annotateServiceAccount(ctx context.Context, cl *kube.Cluster, ns, roleARN string) error {
	sas := cl.Clientset.CoreV1().ServiceAccounts
	sa, err := sas(ns).Get(ctx, WorkloadServiceAccount, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: WorkloadServiceAccount, Namespace: ns,
			Annotations: map[string]string{awscloud.ServiceAccountRoleAnnotation: roleARN}}}
		_, err := sas(ns).Create(ctx, sa, metav1.CreateOptions{})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err):
			return nil // no namespace yet, or made meanwhile: the next reconcile looks again
		case err != nil:
			return fmt.Errorf("create service account %s/%s: %w", ns, WorkloadServiceAccount, err)
		}
		return restartForRole(ctx, cl, ns, roleARN)
	}
	if err != nil {
		return fmt.Errorf("read service account %s/%s: %w", ns, WorkloadServiceAccount, err)
	}
	switch cur := sa.Annotations[awscloud.ServiceAccountRoleAnnotation]; cur {
	case roleARN:
		return restartForRole(ctx, cl, ns, roleARN) // a restart that a crash left undone
	case "":
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{awscloud.ServiceAccountRoleAnnotation: roleARN}}})
		if _, err := sas(ns).Patch(ctx, WorkloadServiceAccount, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("annotate service account %s/%s: %w", ns, WorkloadServiceAccount, err)
		}
		return restartForRole(ctx, cl, ns, roleARN)
	default:
		reconcile.Eventf(ctx, api.EventWarning, "RoleInUse", "service account %s/%s already has role %s; its pods do not get %s", ns, WorkloadServiceAccount, cur, roleARN)
	}
	return nil
}

// restartForRole restarts the namespace's Deployments whose pods run as the workload service account
// (as kubectl rollout restart does: a pod template annotation), so that their new pods get the role.
func restartForRole(ctx context.Context, cl *kube.Cluster, ns, roleARN string) error {
	deps, err := cl.Clientset.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list the deployments of %s: %w", ns, err)
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{RestartedForRole: roleARN}}}}})
	for _, d := range deps.Items {
		sa := d.Spec.Template.Spec.ServiceAccountName
		if sa != "" && sa != WorkloadServiceAccount || d.Spec.Template.Annotations[RestartedForRole] == roleARN {
			continue
		}
		if _, err := cl.Clientset.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("restart deployment %s/%s for its role: %w", ns, d.Name, err)
		}
	}
	return nil
}

// unannotateServiceAccounts removes the role's annotation wherever a service account carries it.
func unannotateServiceAccounts(ctx context.Context, cl *kube.Cluster, roleARN string) error {
	list, err := cl.Clientset.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list service accounts: %w", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + awscloud.ServiceAccountRoleAnnotation + `":null}}}`)
	for _, sa := range list.Items {
		if sa.Annotations[awscloud.ServiceAccountRoleAnnotation] != roleARN {
			continue
		}
		if _, err := cl.Clientset.CoreV1().ServiceAccounts(sa.Namespace).Patch(ctx, sa.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove the role of service account %s/%s: %w", sa.Namespace, sa.Name, err)
		}
	}
	return nil
}
