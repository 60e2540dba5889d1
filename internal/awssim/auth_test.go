package awssim_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

func TestSignatures(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()

	t.Run("a correctly signed call is answered with the caller's identity", func(t *testing.T) {
		out, err := f.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Equal(t, f.acct.ID, aws.ToString(out.Account))
		require.Equal(t, f.acct.ARN, aws.ToString(out.Arn))
	})

	t.Run("a wrong secret is refused with each protocol's signature error", func(t *testing.T) {
		bad := f.withKeys(f.acct.AccessKeyID, "not-the-secret", "")
		_, err := bad.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.Equal(t, "SignatureDoesNotMatch", errorCode(t, err))
		_, err = bad.eks.ListClusters(ctx, &eks.ListClustersInput{})
		require.Equal(t, "InvalidSignatureException", errorCode(t, err))
		_, err = bad.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		require.Equal(t, "AuthFailure", errorCode(t, err))
		_, err = bad.s3.ListBuckets(ctx, &s3.ListBucketsInput{})
		require.Equal(t, "SignatureDoesNotMatch", errorCode(t, err))
	})

	t.Run("an unknown access key is refused with each protocol's unknown-key error", func(t *testing.T) {
		bad := f.withKeys("AKIAUNKNOWNUNKNOWN00", f.acct.SecretAccessKey, "")
		_, err := bad.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.Equal(t, "InvalidClientTokenId", errorCode(t, err))
		_, err = bad.iam.ListOpenIDConnectProviders(ctx, nil)
		require.Equal(t, "InvalidClientTokenId", errorCode(t, err))
		_, err = bad.eks.ListClusters(ctx, &eks.ListClustersInput{})
		require.Equal(t, "UnrecognizedClientException", errorCode(t, err))
		_, err = bad.s3.ListBuckets(ctx, &s3.ListBucketsInput{})
		require.Equal(t, "InvalidAccessKeyId", errorCode(t, err))
	})

	t.Run("a presigned GetCallerIdentity URL works once, and not with a changed signature", func(t *testing.T) {
		req, err := sts.NewPresignClient(f.sts).PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		status, body := httpDo(t, req.Method, req.URL, req.SignedHeader)
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "<Account>"+f.acct.ID+"</Account>")

		tampered := strings.Replace(req.URL, "X-Amz-Signature=", "X-Amz-Signature=0", 1)
		status, body = httpDo(t, req.Method, tampered, req.SignedHeader)
		require.Equal(t, http.StatusForbidden, status)
		require.Contains(t, body, "<Code>SignatureDoesNotMatch</Code>")
	})

	t.Run("a request without a signature is refused", func(t *testing.T) {
		status, body := httpDo(t, http.MethodPost, f.sim.URL()+"/?Action=GetCallerIdentity&Version=2011-06-15", nil)
		require.Equal(t, http.StatusForbidden, status)
		require.Contains(t, body, "MissingAuthenticationToken")
	})

	t.Run("every answer is in the call log with its caller and result", func(t *testing.T) {
		calls := f.sim.Calls()
		require.NotEmpty(t, calls)
		first := calls[0]
		require.Equal(t, "sts", first.Service)
		require.Equal(t, "GetCallerIdentity", first.Action)
		require.Equal(t, f.acct.ID, first.Account)
		require.Equal(t, f.acct.ARN, first.Principal)
		require.Equal(t, http.StatusOK, first.Status)
		require.Contains(t, actions(calls), "eks:ListClusters:InvalidSignatureException")

		status, body := httpDo(t, http.MethodGet, f.sim.URL()+awssim.AdminPrefix+"calls?service=s3", nil)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, `"action": "ListBuckets"`)
		require.NotContains(t, body, `"service": "sts"`)
		require.Equal(t, awssim.CountByService(calls)["eks"], len(awssim.Filter(calls, "eks", "ListClusters")))
	})
}

func TestAssumeRole(t *testing.T) {
	t.Parallel()
	f := startSim(t, awssim.Config{})
	ctx := context.Background()
	arn, err := f.sim.AddRole(f.acct.ID, "qleet-access", awssim.TrustPolicy(f.acct.ID, "ext-123"))
	require.NoError(t, err)

	t.Run("without the external id the role cannot be assumed", func(t *testing.T) {
		_, err := f.sts.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(arn), RoleSessionName: aws.String("qleet")})
		require.Equal(t, "AccessDenied", errorCode(t, err))
		_, err = f.sts.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(arn), RoleSessionName: aws.String("qleet"), ExternalId: aws.String("wrong")})
		require.Equal(t, "AccessDenied", errorCode(t, err))
	})

	t.Run("another account's user cannot assume it", func(t *testing.T) {
		other, err := f.sim.AddAccount("")
		require.NoError(t, err)
		o := f.withKeys(other.AccessKeyID, other.SecretAccessKey, "")
		_, err = o.sts.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(arn), RoleSessionName: aws.String("qleet"), ExternalId: aws.String("ext-123")})
		require.Equal(t, "AccessDenied", errorCode(t, err))
	})

	t.Run("with the external id it answers temporary keys that act as the role", func(t *testing.T) {
		out, err := f.sts.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(arn), RoleSessionName: aws.String("qleet"), ExternalId: aws.String("ext-123")})
		require.NoError(t, err)
		c := out.Credentials
		require.True(t, strings.HasPrefix(aws.ToString(c.AccessKeyId), "ASIA"))
		require.NotEmpty(t, aws.ToString(c.SessionToken))
		require.True(t, c.Expiration.After(out.Credentials.Expiration.Add(-3700e9)))

		role := f.withKeys(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), aws.ToString(c.SessionToken))
		id, err := role.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Equal(t, "arn:aws:sts::"+f.acct.ID+":assumed-role/qleet-access/qleet", aws.ToString(id.Arn))
		require.Equal(t, aws.ToString(out.AssumedRoleUser.Arn), aws.ToString(id.Arn))

		forged := f.withKeys(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), "forged-token")
		_, err = forged.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.Equal(t, "InvalidClientTokenId", errorCode(t, err))
	})
}

// httpDo sends a plain HTTP request and returns the status and body.
func httpDo(t *testing.T, method, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		if !strings.EqualFold(k, "host") {
			req.Header[k] = v
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
