package api

import (
	"fmt"
	"net/url"
	"regexp"
)

// KindCloudAccount is credentials, or a role to assume, for a cloud.
const KindCloudAccount = "cloud_account"

// CloudAWS is the provider of AWS cloud accounts.
const CloudAWS = "aws"

// CloudAccountSpec says how QleetOS reaches a cloud account: with access keys, with a role it assumes
// (with the access keys, or else with the control plane's own credentials), or both. The secret parts
// are write-only: encrypted at rest and returned only to controllers.
type CloudAccountSpec struct {
	// Provider is the cloud: "aws".
	Provider string `json:"provider"`
	// Region is the default region of the calls made with the account, e.g. "us-east-1".
	Region string `json:"region"`
	// AccessKeyID is the access key id of static credentials; set together with SecretAccessKey.
	AccessKeyID string `json:"access_key_id,omitempty" ref:"-"`
	// SecretAccessKey is the secret of the access key. Write-only: returned only to controllers.
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	// SessionToken goes with temporary access keys. Write-only: returned only to controllers.
	SessionToken string `json:"session_token,omitempty"`
	// RoleARN is a role QleetOS assumes through STS (with the access keys when they are set, else with
	// the control plane's own credentials), e.g. "arn:aws:iam::123456789012:role/qleetos".
	RoleARN string `json:"role_arn,omitempty"`
	// ExternalID is the external id the role's trust policy asks for; only with RoleARN.
	ExternalID string `json:"external_id,omitempty" ref:"-"`
	// Endpoint overrides the URL of every AWS service the account is used with (a private cloud, or a
	// local stand-in in tests), e.g. "https://aws.internal:4566".
	Endpoint string `json:"endpoint,omitempty"`
}

// CloudAccountStatus is the observed state of a cloud account.
type CloudAccountStatus struct {
	Status
	// AccountID is the AWS account the credentials belong to, from STS GetCallerIdentity.
	AccountID string `json:"account_id,omitempty" ref:"-"`
	// CallerARN is the identity QleetOS acts as (the assumed role's session when RoleARN is set).
	CallerARN string `json:"caller_arn,omitempty"`
}

// CloudAccount is credentials or a role for a cloud.
type CloudAccount = Object[CloudAccountSpec, CloudAccountStatus]

var (
	accessKeyIDRE = regexp.MustCompile(`^[A-Z0-9]{16,128}$`)
	roleARNRE     = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$`)
	externalIDRE  = regexp.MustCompile(`^[A-Za-z0-9+=,.@:/_-]+$`)
)

func validateCloudAccount(s *CloudAccountSpec) []FieldError {
	var fe fieldErrors
	switch s.Provider {
	case CloudAWS:
	case "":
		fe.add("spec.provider", "is required (aws)")
	default:
		fe.add("spec.provider", "must be aws, not %q", s.Provider)
	}
	switch {
	case s.Region == "":
		fe.add("spec.region", "is required: the default region, such as us-east-1")
	case !awsRegionRE.MatchString(s.Region):
		fe.add("spec.region", "must be an AWS region such as us-east-1, not %q", s.Region)
	}
	keys := s.AccessKeyID != "" || s.SecretAccessKey != "" || s.SessionToken != ""
	switch {
	case !keys && s.RoleARN == "":
		fe.add("spec.access_key_id", "access keys (access_key_id and secret_access_key) or spec.role_arn are required")
	case keys && s.AccessKeyID == "":
		fe.add("spec.access_key_id", "is required with spec.secret_access_key and spec.session_token")
	case keys && !accessKeyIDRE.MatchString(s.AccessKeyID):
		fe.add("spec.access_key_id", "must be 16 to 128 upper case letters and digits, such as AKIAIOSFODNN7EXAMPLE")
	}
	if s.AccessKeyID != "" && s.SecretAccessKey == "" {
		fe.add("spec.secret_access_key", "is required with spec.access_key_id")
	}
	if len(s.SecretAccessKey) > 256 {
		fe.add("spec.secret_access_key", "must be at most 256 characters")
	}
	if len(s.SessionToken) > 8192 {
		fe.add("spec.session_token", "must be at most 8192 characters")
	}
	if s.RoleARN != "" && !roleARNRE.MatchString(s.RoleARN) {
		fe.add("spec.role_arn", "must be an IAM role ARN such as arn:aws:iam::123456789012:role/qleetos, not %q", s.RoleARN)
	}
	switch {
	case s.ExternalID != "" && s.RoleARN == "":
		fe.add("spec.external_id", "is only valid with spec.role_arn")
	case s.ExternalID != "" && (len(s.ExternalID) < 2 || len(s.ExternalID) > 1224 || !externalIDRE.MatchString(s.ExternalID)):
		fe.add("spec.external_id", "must be 2 to 1224 letters, digits and +=,.@:/_-")
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			fe.add("spec.endpoint", "must be an http(s) URL without credentials, such as https://aws.internal:4566, not %q", s.Endpoint)
		}
	}
	return fe
}

// cloudAccountRef is the reference from a spec's cloud_account_id field, when set.
func cloudAccountRef(id string) []FieldRef {
	if id == "" {
		return nil
	}
	return []FieldRef{{Field: "spec.cloud_account_id", Kind: KindCloudAccount, ID: id}}
}

// kubernetesRuntimeRefs are the objects a runtime references: its cloud account.
func kubernetesRuntimeRefs(s *KubernetesRuntimeSpec) []FieldRef {
	return cloudAccountRef(s.CloudAccountID)
}

// runtimeProfileRefs are the objects a profile references: its cloud account.
func runtimeProfileRefs(s *RuntimeProfileSpec) []FieldRef { return cloudAccountRef(s.CloudAccountID) }

// Defaults of EKS runtimes.
const (
	// DefaultEKSNodeType is the instance type of an EKS runtime's managed node group.
	DefaultEKSNodeType = "t3.medium"
	// defaultEKSNodes is the desired node count of an EKS runtime's node group.
	defaultEKSNodes = 2
)

var (
	instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	subnetIDRE     = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
)

// validateEKSFields checks the fields that only eks runtimes and profiles have.
func validateEKSFields(fe *fieldErrors, provider, account, nodeType string, subnets []string) {
	if provider != ProviderEKS {
		if account != "" {
			fe.add("spec.cloud_account_id", "is only valid with provider eks")
		}
		if nodeType != "" {
			fe.add("spec.node_type", "is only valid with provider eks")
		}
		if len(subnets) > 0 {
			fe.add("spec.subnet_ids", "are only valid with provider eks")
		}
		return
	}
	if account == "" {
		fe.add("spec.cloud_account_id", "is required with provider eks: the cloud_account to provision with")
	}
	if nodeType != "" && !instanceTypeRE.MatchString(nodeType) {
		fe.add("spec.node_type", "must be an EC2 instance type such as t3.medium, not %q", nodeType)
	}
	if n := len(subnets); n == 1 || n > 16 {
		fe.add("spec.subnet_ids", "must list 2 to 16 subnets in at least two zones (or none, to make a VPC), not %d", n)
	}
	seen := map[string]bool{}
	for i, id := range subnets {
		p := fmt.Sprintf("spec.subnet_ids[%d]", i)
		if !subnetIDRE.MatchString(id) {
			fe.add(p, "must be a subnet id such as subnet-0a1b2c3d, not %q", id)
		} else if seen[id] {
			fe.add(p, "duplicate subnet %q", id)
		}
		seen[id] = true
	}
}

// defaultEKSRuntime fills in an eks runtime's node type and node count (2, within min and max).
func defaultEKSRuntime(s *KubernetesRuntimeSpec) {
	if s.Provider != ProviderEKS {
		return
	}
	if s.NodeType == "" {
		s.NodeType = DefaultEKSNodeType
	}
	if s.Nodes == 0 {
		s.Nodes = max(defaultEKSNodes, s.MinNodes)
		if s.MaxNodes > 0 {
			s.Nodes = min(s.Nodes, s.MaxNodes)
		}
	}
}

// CloudResources are what QleetOS made in the cloud for a runtime, each tagged with its ownership
// (qleet.io/owner-kind and qleet.io/owner-id), and the provisioning step in progress.
type CloudResources struct {
	// Step names the step in progress, e.g. "cluster: waiting for ACTIVE (CREATING)"; empty when done.
	Step string `json:"step,omitempty"`
	// AccountID is the AWS account.
	AccountID string `json:"account_id,omitempty" ref:"-"`
	// ClusterRoleARN is the EKS cluster's IAM role.
	ClusterRoleARN string `json:"cluster_role_arn,omitempty"`
	// NodeRoleARN is the node group's IAM role.
	NodeRoleARN string `json:"node_role_arn,omitempty"`
	// VPCID is the VPC QleetOS made (empty when the spec gave subnets).
	VPCID string `json:"vpc_id,omitempty" ref:"-"`
	// SubnetIDs are the cluster's subnets.
	SubnetIDs []string `json:"subnet_ids,omitempty" ref:"-"`
	// ClusterName is the EKS cluster's name.
	ClusterName string `json:"cluster_name,omitempty"`
	// ClusterARN is the EKS cluster's ARN.
	ClusterARN string `json:"cluster_arn,omitempty"`
	// NodeGroup is the managed node group's name.
	NodeGroup string `json:"node_group,omitempty"`
}

func init() {
	RegisterKind(KindDef[CloudAccountSpec, CloudAccountStatus]{
		Kind:        KindCloudAccount,
		Title:       "cloud account",
		ShortNames:  []string{"account"},
		Description: "Credentials, or a role to assume, for a cloud (AWS), used by `eks` runtimes and runtime profiles and by the RDS databases and S3 buckets that serve apps on them. It is Ready once STS GetCallerIdentity has accepted the credentials; the account id is in `account_id`. The secret access key and session token are write-only: encrypted at rest, returned to controllers only, never logged. See the AWS guide for the IAM policy QleetOS needs.",
		Validate:    validateCloudAccount,
		WriteOnly:   []string{"secret_access_key", "session_token"},
	})
}
