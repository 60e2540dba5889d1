package cluster

import (
	"github.com/qleetos/terraform-provider-qleet/api"

	"context"
	"fmt"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
)

// Issuer is the service account issuer of an EKS cluster ("" before EKS reports it).
func Issuer(c *ekstypes.Cluster) string {
	if c == nil || c.Identity == nil || c.Identity.Oidc == nil {
		return ""
	}
	return sdkaws.ToString(c.Identity.Oidc.Issuer)
}

// ensureOIDCProvider registers the cluster's issuer as an IAM OpenID Connect provider for STS, tagged
// with the runtime's ownership, so that roles can trust its service accounts (IRSA). A provider of
// that issuer without the tags is not QleetOS's: it is refused.
func ensureOIDCProvider(ctx context.Context, svc awscloud.IAM, accountID, issuer string, o awscloud.Owner) error {
	arn := awscloud.OIDCProviderARN(accountID, issuer)
	got, err := svc.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: &arn})
	switch {
	case err == nil:
		if !o.Owns(awscloud.IAMTagMap(got.Tags)) {
			return notOurs("IAM OpenID Connect provider " + arn)
		}
		return nil
	case !awscloud.IsNotFound(err):
		return awscloud.Outcome(fmt.Errorf("get IAM OpenID Connect provider %s: %w", arn, awscloud.Classify(err)))
	}
	if _, err := svc.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: sdkaws.String(issuer),
		ClientIDList: []string{awscloud.STSAudience}, Tags: o.IAMTags()}); err != nil {
		return awscloud.Outcome(fmt.Errorf("create IAM OpenID Connect provider for %s: %w", issuer, awscloud.Classify(err)))
	}
	reconcile.Eventf(ctx, api.EventNormal, "OIDCProviderCreated", "registered the cluster's service account issuer %s with IAM", issuer)
	return nil
}

// removeOIDCProviders deletes the OpenID Connect providers of EKS issuers tagged with the runtime's
// ownership. They are listed rather than derived from the cluster, so that a deletion that resumes
// after the cluster is gone still finds them.
func removeOIDCProviders(ctx context.Context, svc awscloud.IAM, o awscloud.Owner) error {
	out, err := svc.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	if err != nil {
		return awscloud.Outcome(fmt.Errorf("list IAM OpenID Connect providers: %w", awscloud.Classify(err)))
	}
	for _, p := range out.OpenIDConnectProviderList {
		arn := sdkaws.ToString(p.Arn)
		if !strings.Contains(arn, ":oidc-provider/oidc.eks.") {
			continue
		}
		got, err := svc.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: &arn})
		if awscloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return awscloud.Outcome(fmt.Errorf("get IAM OpenID Connect provider %s: %w", arn, awscloud.Classify(err)))
		}
		if !o.Owns(awscloud.IAMTagMap(got.Tags)) {
			continue
		}
		if _, err := svc.DeleteOpenIDConnectProvider(ctx, &iam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: &arn}); err != nil && !awscloud.IsNotFound(err) {
			return awscloud.Outcome(fmt.Errorf("delete IAM OpenID Connect provider %s: %w", arn, awscloud.Classify(err)))
		}
	}
	return nil
}
