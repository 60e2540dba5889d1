package api_test

import (
	"strings"
	"testing"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/stretchr/testify/require"
)

func TestValidateCloudAccount(t *testing.T) {
	t.Parallel()
	keys := api.CloudAccountSpec{Provider: "aws", Region: "us-east-1", AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG"}
	t.Run("access keys, a role, or both are accepted", func(t *testing.T) {
		require.Empty(t, check(t, api.KindCloudAccount, &keys))
		require.Empty(t, check(t, api.KindCloudAccount, &api.CloudAccountSpec{Provider: "aws", Region: "eu-west-1",
			RoleARN: "arn:aws:iam::123456789012:role/qleetos", ExternalID: "qleet-1234"}))
		both := keys
		both.RoleARN, both.Endpoint = "arn:aws-us-gov:iam::123456789012:role/path/qleetos", "http://127.0.0.1:4566"
		require.Empty(t, check(t, api.KindCloudAccount, &both))
	})
	t.Run("each bad field is named", func(t *testing.T) {
		errs := check(t, api.KindCloudAccount, &api.CloudAccountSpec{Provider: "gcp", Region: "useast1", SecretAccessKey: strings.Repeat("x", 300),
			RoleARN: "arn:aws:iam::12:user/x", Endpoint: "ftp://x"})
		require.Contains(t, errs["spec.provider"], `must be aws, not "gcp"`)
		require.Contains(t, errs["spec.region"], "AWS region")
		require.Contains(t, errs["spec.access_key_id"], "is required with spec.secret_access_key")
		require.Contains(t, errs["spec.secret_access_key"], "at most 256")
		require.Contains(t, errs["spec.role_arn"], "IAM role ARN")
		require.Contains(t, errs["spec.endpoint"], "http(s) URL")
		errs = check(t, api.KindCloudAccount, &api.CloudAccountSpec{Provider: "aws", ExternalID: "x"})
		require.Contains(t, errs["spec.region"], "is required")
		require.Contains(t, errs["spec.access_key_id"], "or spec.role_arn are required")
		require.Contains(t, errs["spec.external_id"], "only valid with spec.role_arn")
		errs = check(t, api.KindCloudAccount, &api.CloudAccountSpec{Provider: "aws", Region: "us-east-1", AccessKeyID: "akia-lower"})
		require.Contains(t, errs["spec.access_key_id"], "upper case letters and digits")
		require.Contains(t, errs["spec.secret_access_key"], "is required with spec.access_key_id")
	})
	t.Run("the secret parts are write-only", func(t *testing.T) {
		ki, ok := api.LookupKind(api.KindCloudAccount)
		require.True(t, ok)
		require.ElementsMatch(t, []string{"secret_access_key", "session_token"}, ki.WriteOnly)
	})
}

func TestValidateEKSRuntime(t *testing.T) {
	t.Parallel()
	t.Run("an eks runtime needs a cloud account and gets a node type and count", func(t *testing.T) {
		s := &api.KubernetesRuntimeSpec{Provider: "eks", Region: "us-east-1", CloudAccountID: "acc", MinNodes: 3, MaxNodes: 5}
		require.Empty(t, check(t, api.KindKubernetesRuntime, s))
		require.Equal(t, api.DefaultEKSNodeType, s.NodeType)
		require.Equal(t, 3, s.Nodes, "nodes default to 2, raised to min_nodes")
		ki, _ := api.LookupKind(api.KindKubernetesRuntime)
		require.Equal(t, []api.FieldRef{{Field: "spec.cloud_account_id", Kind: api.KindCloudAccount, ID: "acc"}}, ki.Refs(s))
		errs := check(t, api.KindKubernetesRuntime, &api.KubernetesRuntimeSpec{Provider: "eks", Region: "us-east-1", NodeType: "huge",
			SubnetIDs: []string{"subnet-0a1b2c3d", "subnet-0a1b2c3d", "vpc-1"}})
		require.Contains(t, errs["spec.cloud_account_id"], "is required with provider eks")
		require.Contains(t, errs["spec.node_type"], "EC2 instance type")
		require.Contains(t, errs["spec.subnet_ids[1]"], "duplicate subnet")
		require.Contains(t, errs["spec.subnet_ids[2]"], "subnet id")
		require.Contains(t, check(t, api.KindKubernetesRuntime, &api.KubernetesRuntimeSpec{Provider: "eks", Region: "us-east-1", CloudAccountID: "a",
			SubnetIDs: []string{"subnet-0a1b2c3d"}})["spec.subnet_ids"], "2 to 16 subnets")
	})
	t.Run("eks fields are refused on other providers", func(t *testing.T) {
		errs := check(t, api.KindKubernetesRuntime, &api.KubernetesRuntimeSpec{Provider: "local", CloudAccountID: "a", NodeType: "t3.small", SubnetIDs: []string{"subnet-0a1b2c3d"}})
		require.Contains(t, errs["spec.cloud_account_id"], "only valid with provider eks")
		require.Contains(t, errs["spec.node_type"], "only valid with provider eks")
		require.Contains(t, errs["spec.subnet_ids"], "only valid with provider eks")
	})
	t.Run("an eks profile needs AWS regions and a cloud account", func(t *testing.T) {
		require.Empty(t, check(t, api.KindRuntimeProfile, &api.RuntimeProfileSpec{Provider: "eks", Regions: []string{"us-east-1"}, CloudAccountID: "a"}))
		errs := check(t, api.KindRuntimeProfile, &api.RuntimeProfileSpec{Provider: "eks", Regions: []string{"us-east"}})
		require.Contains(t, errs["spec.regions[0]"], "AWS region")
		require.Contains(t, errs["spec.cloud_account_id"], "is required with provider eks")
	})
}
