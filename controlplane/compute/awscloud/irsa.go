package awscloud

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ServiceAccountRoleAnnotation is the ServiceAccount annotation that EKS's pod identity webhook reads: the
// role whose web identity credentials (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and a projected token)
// it gives the service account's pods.
const ServiceAccountRoleAnnotation = "eks.amazonaws.com/role-arn"

// STSAudience is the audience of service account tokens exchanged with STS.
const STSAudience = "sts.amazonaws.com"

// OIDCProviderARN is the ARN of the IAM OpenID Connect provider of an issuer URL
// (https://oidc.eks.<region>.amazonaws.com/id/<id>) in an account.
func OIDCProviderARN(accountID, issuer string) string {
	return fmt.Sprintf("arn:aws:iam::%s:oidc-provider/%s", accountID, issuerHost(issuer))
}

func issuerHost(issuer string) string {
	return strings.TrimSuffix(strings.TrimPrefix(issuer, "https://"), "/")
}

// ServiceAccountSubject is the subject of a Kubernetes service account's tokens.
func ServiceAccountSubject(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// WebIdentityTrust is a role trust policy that lets the service accounts subjects (see
// ServiceAccountSubject) of the cluster whose issuer is registered as providerARN assume the role with
// sts:AssumeRoleWithWebIdentity, and nobody else.
func WebIdentityTrust(providerARN, issuer string, subjects []string) string {
	subs := slices.Clone(subjects)
	slices.Sort(subs)
	host := issuerHost(issuer)
	doc := map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]any{"Federated": providerARN}, "Action": "sts:AssumeRoleWithWebIdentity",
		"Condition": map[string]any{"StringEquals": map[string]any{host + ":aud": STSAudience, host + ":sub": subs}},
	}}}
	b, _ := json.Marshal(doc)
	return string(b)
}

// BucketPolicy is an inline role policy granting the S3 object and listing actions on one bucket only.
func BucketPolicy(bucket string) string {
	doc := map[string]any{"Version": "2012-10-17", "Statement": []any{
		map[string]any{"Effect": "Allow", "Action": []string{"s3:ListBucket", "s3:GetBucketLocation"}, "Resource": "arn:aws:s3:::" + bucket},
		map[string]any{"Effect": "Allow", "Action": []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, "Resource": "arn:aws:s3:::" + bucket + "/*"},
	}}
	b, _ := json.Marshal(doc)
	return string(b)
}
