package awscloud_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
)

const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

func account() awscloud.Account {
	return awscloud.Account{Region: "us-east-1", AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: secret, SessionToken: "sess-token-secret"}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	op := func(svc, name string, err error) error {
		return &smithy.OperationError{ServiceID: svc, OperationName: name, Err: err}
	}
	svc := func(code string, fault smithy.ErrorFault) error {
		return &smithy.GenericAPIError{Code: code, Message: "the message", Fault: fault}
	}
	t.Run("throttling is retryable", func(t *testing.T) {
		for _, code := range []string{"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "SlowDown"} {
			err := awscloud.Classify(op("EKS", "CreateCluster", svc(code, smithy.FaultClient)))
			require.True(t, awscloud.IsRetryable(err), code)
			require.False(t, awscloud.IsAccessDenied(err), code)
		}
	})
	t.Run("access denied is permanent and names the action", func(t *testing.T) {
		err := awscloud.Classify(op("EKS", "CreateCluster", svc("AccessDeniedException", smithy.FaultClient)))
		require.False(t, awscloud.IsRetryable(err))
		require.True(t, awscloud.IsAccessDenied(err))
		require.Contains(t, err.Error(), "access denied to eks:CreateCluster")
		err = awscloud.Classify(op("Route 53", "ChangeResourceRecordSets", svc("AccessDenied", smithy.FaultClient)))
		require.Contains(t, err.Error(), "route53:ChangeResourceRecordSets")
		err = awscloud.Classify(op("STS", "GetCallerIdentity", fmt.Errorf("get credentials: %w", op("STS", "AssumeRole", svc("AccessDenied", smithy.FaultClient)))))
		require.Contains(t, err.Error(), "access denied to sts:AssumeRole", "the innermost operation is named")
		err = awscloud.Classify(op("EC2", "CreateVpc", svc("UnauthorizedOperation", smithy.FaultClient)))
		require.True(t, awscloud.IsAccessDenied(err))
	})
	t.Run("bad credentials and bad input are permanent", func(t *testing.T) {
		for _, code := range []string{"InvalidClientTokenId", "SignatureDoesNotMatch", "ValidationError", "InvalidParameterException"} {
			require.False(t, awscloud.IsRetryable(awscloud.Classify(op("STS", "GetCallerIdentity", svc(code, smithy.FaultClient)))), code)
		}
	})
	t.Run("server faults, resources in use and the network are retryable", func(t *testing.T) {
		require.True(t, awscloud.IsRetryable(awscloud.Classify(op("IAM", "DeleteRole", svc("DeleteConflict", smithy.FaultClient)))))
		require.True(t, awscloud.IsRetryable(awscloud.Classify(op("RDS", "CreateDBInstance", svc("SomethingNew", smithy.FaultServer)))))
		require.True(t, awscloud.IsRetryable(awscloud.Classify(op("EKS", "DescribeCluster", errors.New("dial tcp: connection refused")))))
	})
	t.Run("not found is recognised", func(t *testing.T) {
		require.True(t, awscloud.IsNotFound(op("IAM", "GetRole", svc("NoSuchEntity", smithy.FaultClient))))
		require.True(t, awscloud.IsNotFound(op("EKS", "DescribeCluster", svc("ResourceNotFoundException", smithy.FaultClient))))
		require.False(t, awscloud.IsNotFound(op("EKS", "DescribeCluster", svc("AccessDeniedException", smithy.FaultClient))))
	})
	t.Run("classified errors unwrap and nil stays nil", func(t *testing.T) {
		require.NoError(t, awscloud.Classify(nil))
		inner := svc("Throttling", smithy.FaultClient)
		err := awscloud.Classify(fmt.Errorf("wrapped: %w", op("EKS", "CreateCluster", inner)))
		var ae smithy.APIError
		require.ErrorAs(t, err, &ae)
		require.Same(t, err, awscloud.Classify(err))
	})
}

func TestAccountNeverShowsSecrets(t *testing.T) {
	t.Parallel()
	a := account()
	a.RoleARN = "arn:aws:iam::123456789012:role/qleetos"
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("connect", "account", a)
	for _, s := range []string{a.String(), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), buf.String()} {
		require.NotContains(t, s, secret)
		require.NotContains(t, s, "sess-token-secret")
		require.Contains(t, s, "AKIAIOSFODNN7EXAMPLE")
	}
}

func TestEKSToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := account().Config(ctx, "")
	require.NoError(t, err)
	t.Run("is a presigned GetCallerIdentity that signs the cluster name", func(t *testing.T) {
		ts := awscloud.NewTokenSource(cfg, "prod-us")
		tok, err := ts.Token(ctx)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(tok, awscloud.TokenPrefix))
		raw, err := awscloud.DecodeToken(tok)
		require.NoError(t, err)
		u, err := url.Parse(raw)
		require.NoError(t, err)
		q := u.Query()
		require.Equal(t, "sts.us-east-1.amazonaws.com", u.Host)
		require.Equal(t, "GetCallerIdentity", q.Get("Action"))
		require.Equal(t, "60", q.Get("X-Amz-Expires"))
		require.Contains(t, strings.Split(q.Get("X-Amz-SignedHeaders"), ";"), "x-k8s-aws-id")
		require.True(t, strings.HasPrefix(q.Get("X-Amz-Credential"), "AKIAIOSFODNN7EXAMPLE/"))
		require.NotEmpty(t, q.Get("X-Amz-Signature"))
		require.NotContains(t, raw, secret)
	})
	t.Run("is kept until close to expiry, then replaced", func(t *testing.T) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		ts := awscloud.NewTokenSource(cfg, "c")
		ts.Now = func() time.Time { return now }
		_, err := ts.Token(ctx)
		require.NoError(t, err)
		first := ts.Expires()
		require.Equal(t, now.Add(awscloud.TokenLifetime), first)
		now = now.Add(9 * time.Minute)
		_, err = ts.Token(ctx)
		require.NoError(t, err)
		require.Equal(t, first, ts.Expires(), "a token with 6 minutes left is kept")
		now = now.Add(2 * time.Minute)
		_, err = ts.Token(ctx)
		require.NoError(t, err)
		require.Equal(t, now.Add(awscloud.TokenLifetime), ts.Expires(), "a token with 4 minutes left is replaced")
	})
	t.Run("a refused token is replaced and the request sent again", func(t *testing.T) {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			require.True(t, strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "+awscloud.TokenPrefix))
			if n == 1 {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, "ok")
		}))
		defer srv.Close()
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		ts := awscloud.NewTokenSource(cfg, "c")
		ts.Now = func() time.Time { return now }
		_, err := ts.Token(ctx)
		require.NoError(t, err)
		now = now.Add(time.Minute)
		rc, err := awscloud.RESTConfig(srv.URL, "", ts)
		require.NoError(t, err)
		hc := &http.Client{Transport: rc.WrapTransport(http.DefaultTransport)}
		resp, err := hc.Get(srv.URL + "/version")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.EqualValues(t, 2, calls.Load())
		require.Equal(t, now.Add(awscloud.TokenLifetime), ts.Expires(), "the refused token was replaced")
	})
}
