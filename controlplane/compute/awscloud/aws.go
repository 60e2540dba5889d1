// Package awscloud talks to AWS through aws-sdk-go-v2: a configuration per cloud account (access keys or an
// assumed role, an optional endpoint override), small interfaces per service holding only the calls
// QleetOS makes, errors classified as retryable or permanent, and the EKS token that authenticates to an
// EKS cluster's Kubernetes API. Nothing here logs or formats a credential.
package awscloud

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	"github.com/qleetos/terraform-provider-qleet/api"
)

// Ownership tags that QleetOS puts on every AWS resource it creates. A resource without them is never
// changed or deleted.
const (
	// TagOwnerKind names the kind of the QleetOS object that owns the resource, e.g. "kubernetes_runtime".
	TagOwnerKind = "qleet.io/owner-kind"
	// TagOwnerID is the owning object's id.
	TagOwnerID = "qleet.io/owner-id"
	// TagManagedBy is "qleetos".
	TagManagedBy = "qleet.io/managed-by"
	// ManagedBy is the value of TagManagedBy.
	ManagedBy = "qleetos"
)

// Owner is the QleetOS object an AWS resource belongs to.
type Owner struct {
	// Kind is the owner's singular kind.
	Kind string
	// ID is the owner's id.
	ID string
}

// Tags returns the ownership tags of o.
func (o Owner) Tags() map[string]string {
	return map[string]string{TagOwnerKind: o.Kind, TagOwnerID: o.ID, TagManagedBy: ManagedBy}
}

// Owns reports whether tags carry o's ownership.
func (o Owner) Owns(tags map[string]string) bool {
	return tags[TagOwnerKind] == o.Kind && tags[TagOwnerID] == o.ID && tags[TagManagedBy] == ManagedBy
}

// IAMTags returns o's ownership tags in IAM's form, in a fixed order.
func (o Owner) IAMTags() []iamtypes.Tag {
	tags := make([]iamtypes.Tag, 0, 3)
	for _, k := range []string{TagOwnerKind, TagOwnerID, TagManagedBy} {
		tags = append(tags, iamtypes.Tag{Key: sdkaws.String(k), Value: sdkaws.String(o.Tags()[k])})
	}
	return tags
}

// IAMTagMap returns IAM tags as a map, for Owner.Owns.
func IAMTagMap(tags []iamtypes.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[sdkaws.ToString(t.Key)] = sdkaws.ToString(t.Value)
	}
	return m
}

// Account is how QleetOS reaches one AWS account. Its String, GoString and LogValue never show the
// secret parts.
type Account struct {
	// Region is the default region.
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials; empty means the control
	// plane's own (the SDK's default chain).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// RoleARN is a role to assume through STS, with ExternalID when set.
	RoleARN    string
	ExternalID string
	// Endpoint overrides every service's URL (a private cloud, or the local stand-in).
	Endpoint string
	// HTTPClient makes the requests; the SDK's default when nil.
	HTTPClient *http.Client
	// MaxAttempts bounds the SDK's own retries of a call (default 5); throttling is retried with backoff.
	MaxAttempts int
}

// AccountOf turns a cloud_account (read with a controller token, so that it holds its secret parts)
// into an Account.
func AccountOf(ca *api.CloudAccount) Account {
	s := ca.Spec
	return Account{Region: s.Region, AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, SessionToken: s.SessionToken,
		RoleARN: s.RoleARN, ExternalID: s.ExternalID, Endpoint: s.Endpoint}
}

// String describes the account without its secrets.
func (a Account) String() string {
	who := "default credentials"
	if a.AccessKeyID != "" {
		who = "access key " + a.AccessKeyID
	}
	if a.RoleARN != "" {
		who += " assuming " + a.RoleARN
	}
	if a.Endpoint != "" {
		who += " at " + a.Endpoint
	}
	return fmt.Sprintf("aws %s (%s)", a.Region, who)
}

// GoString is String, so that %#v never prints a secret either.
func (a Account) GoString() string { return a.String() }

// LogValue is String, for slog.
func (a Account) LogValue() slog.Value { return slog.StringValue(a.String()) }

// Config returns the SDK configuration of the account in region (the account's default region when
// empty). With RoleARN, credentials come from STS AssumeRole and are cached until shortly before they
// expire.
func (a Account) Config(ctx context.Context, region string) (sdkaws.Config, error) {
	if region == "" {
		region = a.Region
	}
	attempts := a.MaxAttempts
	if attempts == 0 {
		attempts = 5
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithRetryer(func() sdkaws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = attempts })
		}),
		config.WithAPIOptions([]func(*middleware.Stack) error{addTracing}),
	}
	if a.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(a.HTTPClient))
	}
	if a.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(a.AccessKeyID, a.SecretAccessKey, a.SessionToken)))
	}
	if a.Endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(a.Endpoint))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return sdkaws.Config{}, fmt.Errorf("aws configuration: %w", err)
	}
	if a.RoleARN != "" {
		prov := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), a.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = "qleetos"
			if a.ExternalID != "" {
				o.ExternalID = sdkaws.String(a.ExternalID)
			}
		})
		cfg.Credentials = sdkaws.NewCredentialsCache(prov)
	}
	return cfg, nil
}
