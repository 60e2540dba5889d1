package awscloud

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"k8s.io/client-go/rest"
)

// EKS token format, as `aws eks get-token` and aws-iam-authenticator make it: a presigned STS
// GetCallerIdentity URL that signs the x-k8s-aws-id header (the cluster's name), base64url-encoded
// without padding after the prefix.
const (
	// TokenPrefix starts every EKS token.
	TokenPrefix = "k8s-aws-v1."
	// ClusterIDHeader is the signed header that names the cluster.
	ClusterIDHeader = "x-k8s-aws-id"
	// TokenLifetime is how long EKS accepts a token after it was signed.
	TokenLifetime = 15 * time.Minute
	// presignExpires is the X-Amz-Expires of the presigned URL, as aws-iam-authenticator sets it.
	presignExpires = "60"
)

// TokenSource makes EKS tokens for one cluster and keeps the last one until it is close to expiry, or
// until the cluster refuses it. It is safe for concurrent use.
type TokenSource struct {
	cluster string
	presign *sts.PresignClient
	// RefreshBefore is how long before expiry a token is replaced (default 5 minutes).
	RefreshBefore time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewTokenSource returns a TokenSource for the cluster, signing with cfg's credentials.
func NewTokenSource(cfg sdkaws.Config, cluster string) *TokenSource {
	return &TokenSource{cluster: cluster, presign: sts.NewPresignClient(sts.NewFromConfig(cfg))}
}

// Token returns a valid token, making a new one when the last is within RefreshBefore of expiry.
func (t *TokenSource) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	refresh := t.RefreshBefore
	if refresh == 0 {
		refresh = 5 * time.Minute
	}
	if t.token != "" && now.Add(refresh).Before(t.expires) {
		return t.token, nil
	}
	tok, err := t.generate(ctx)
	if err != nil {
		return "", err
	}
	t.token, t.expires = tok, now.Add(TokenLifetime)
	return tok, nil
}

// Expires is when the current token expires (zero before the first).
func (t *TokenSource) Expires() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.expires
}

// Invalidate drops the current token, so that the next request gets a new one.
func (t *TokenSource) Invalidate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.token, t.expires = "", time.Time{}
}

func (t *TokenSource) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// generate presigns GetCallerIdentity with the cluster's name in the signed x-k8s-aws-id header.
func (t *TokenSource) generate(ctx context.Context) (string, error) {
	req, err := t.presign.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(po *sts.PresignOptions) {
		po.ClientOptions = append(po.ClientOptions, func(o *sts.Options) {
			o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(ClusterIDHeader, t.cluster), addExpires)
		})
	})
	if err != nil {
		return "", fmt.Errorf("make an EKS token for cluster %s: %w", t.cluster, Classify(err))
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), nil
}

// addExpires sets X-Amz-Expires on the request before it is presigned.
func addExpires(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("qleetEKSTokenExpires",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				q := req.URL.Query()
				q.Set("X-Amz-Expires", presignExpires)
				req.URL.RawQuery = q.Encode()
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}

// DecodeToken returns the presigned URL inside an EKS token.
func DecodeToken(token string) (string, error) {
	if len(token) <= len(TokenPrefix) || token[:len(TokenPrefix)] != TokenPrefix {
		return "", errors.New("not an EKS token (no k8s-aws-v1. prefix)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(token[len(TokenPrefix):])
	if err != nil {
		return "", fmt.Errorf("EKS token: %w", err)
	}
	return string(raw), nil
}

// WrapTransport returns a RoundTripper that authenticates each request with the source's token. When
// the cluster answers 401, the token is dropped and the request is sent once more with a new one (when
// its body can be replayed): a token refused early, after a clock skew or a key rotation, heals at once.
func (t *TokenSource) WrapTransport(next http.RoundTripper) http.RoundTripper {
	return &tokenTransport{src: t, next: next}
}

type tokenTransport struct {
	src  *TokenSource
	next http.RoundTripper
}

func (tt *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tt.send(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	tt.src.Invalidate()
	if req.Body != nil && req.GetBody == nil {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
	}
	return tt.send(req)
}

func (tt *tokenTransport) send(req *http.Request) (*http.Response, error) {
	tok, err := tt.src.Token(req.Context())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return tt.next.RoundTrip(r)
}

// RESTConfig is a client-go configuration for an EKS cluster's Kubernetes API: its endpoint, its
// certificate authority (base64 PEM, as DescribeCluster returns it) and the token source's tokens.
func RESTConfig(endpoint, caBase64 string, ts *TokenSource) (*rest.Config, error) {
	ca, err := base64.StdEncoding.DecodeString(caBase64)
	if err != nil {
		return nil, fmt.Errorf("cluster certificate authority: %w", err)
	}
	rc := &rest.Config{Host: endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	rc.Wrap(ts.WrapTransport)
	return rc, nil
}
