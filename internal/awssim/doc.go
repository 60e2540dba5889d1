// Package awssim is a local AWS stand-in for tests and demos: one HTTP
// endpoint that speaks the real wire protocols of STS, IAM, EC2, EKS, RDS,
// S3 and Route53 for the calls QleetOS makes, so that the unmodified
// aws-sdk-go-v2 clients, with real SigV4 signing, talk to it.
//
// # Starting it
//
//	sim := awssim.New(awssim.Config{})          // defaults: 127.0.0.1:0, us-east-1, short delays
//	if err := sim.Start(ctx); err != nil { ... }
//	defer sim.Stop(context.Background())
//	acct, _ := sim.AddAccount("")               // 12-digit ID generated; or AddAccount("111122223333")
//
// Point each SDK client at sim.URL() with the account's static keys:
//
//	cfg, _ := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
//		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(acct.AccessKeyID, acct.SecretAccessKey, "")))
//	stsc := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(sim.URL()) })
//	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(sim.URL()); o.UsePathStyle = true })
//
// S3 is path-style only (UsePathStyle = true), and as in AWS a CreateBucket
// signed for a region other than us-east-1 needs that region as its
// LocationConstraint. Requests are routed by the
// service in the SigV4 credential scope (Authorization header, or
// X-Amz-Credential of a presigned URL), so one URL serves every service.
// Route53 is global and signs for us-east-1; the others are regional by the
// signing region.
//
// # Identities
//
// AddAccount gives the account's user "admin" (arn:aws:iam::<id>:user/admin)
// a long-term key (AddAccountWithKey chooses it, for reproducible demos). AddUser adds another user with its own key. AddRole
// creates a role outside QleetOS (e.g. the role a cloud account assumes);
// TrustPolicy(principal, externalID) builds its trust policy. STS AssumeRole
// checks that the role exists, that its trust policy names the caller (its
// account ID, root ARN, ARN or "*") and, when the policy has a
// StringEquals sts:ExternalId condition, the ExternalId; it answers
// temporary ASIA... keys with a session token, which the stand-in checks on
// every later call (and their expiry).
//
// # Signatures
//
// Every request's SigV4 signature is recomputed from the canonical request
// with the key's secret. Failures answer the protocol's error:
// InvalidClientTokenId / SignatureDoesNotMatch (STS, IAM, RDS, Route53),
// UnrecognizedClientException / InvalidSignatureException (EKS),
// AuthFailure (EC2), InvalidAccessKeyId / SignatureDoesNotMatch (S3);
// ExpiredToken for an expired session. Presigned URLs (query-string auth)
// work too, e.g. a GET of a presigned STS GetCallerIdentity.
//
// # The call log and live resources
//
// sim.Calls() returns every request answered, oldest first: service, action,
// region, account, principal, access key, key params (names and IDs, never
// secrets or policies), HTTP status and error code. sim.ResetCalls() empties
// it; awssim.Filter(calls, service, action) and awssim.CountByService(calls)
// slice and count it. sim.Resources() lists what exists now (roles, OIDC
// providers, VPCs, subnets, security groups, clusters, node groups, DB instances and subnet groups, buckets,
// hosted zones), to assert that a teardown left nothing behind.
//
// Admin routes on the same URL need no signature: GET /_awssim/calls
// (?service=eks&action=CreateCluster filter it), GET /_awssim/calls/count,
// GET /_awssim/resources, POST /_awssim/accounts {"id": ""} (answers the account
// with its keys), POST /_awssim/faults (a Fault as JSON), DELETE
// /_awssim/faults.
//
// # Faults
//
//	sim.Throttle("eks", "CreateCluster", 2) // next 2 calls: ThrottlingException (429); the SDK retries
//	sim.Deny("iam", "CreateRole")           // every call: AccessDenied naming iam:CreateRole
//	sim.Inject(awssim.Fault{Service: "rds", Action: "*", Account: id, Deny: true})
//	sim.ClearFaults()
//
// Throttling errors per protocol: Throttling (400; STS, IAM, RDS, Route53),
// ThrottlingException (429; EKS), RequestLimitExceeded (503; EC2), SlowDown
// (503; S3): all are retried by the SDK's standard retryer (3 attempts by
// default). Access denied: AccessDenied (403; STS, IAM, RDS, Route53, S3),
// AccessDeniedException (403; EKS), UnauthorizedOperation (403; EC2), with
// the message "User: <arn> is not authorized to perform: <service>:<Action>
// ...".
//
// # Lifecycles
//
// EKS clusters are CREATING for Config.ClusterDelay (and, with kubesim,
// until their control plane serves), then ACTIVE with endpoint and
// certificateAuthority.data (FAILED, with health.issues saying why, if its
// kubesim does not start); DeleteCluster makes them DELETING for
// Config.DeleteDelay, then they are gone (DescribeCluster answers
// ResourceNotFoundException). Node groups: CREATING/UPDATING for
// Config.NodegroupDelay, then ACTIVE; DELETING then gone. A cluster with node
// groups cannot be deleted (ResourceInUseException). RDS instances: "creating"
// for Config.DBDelay, then "available" with Endpoint.Address and Port (5432
// for postgres, 3306 for mysql/mariadb), "deleting", then gone
// (DBInstanceNotFound). Dependencies are enforced as AWS does: a VPC with
// subnets, a subnet used by a cluster, node group or DB subnet group, a DB
// subnet group used by an instance, a role with policies, a non-empty bucket
// or hosted zone cannot be deleted.
//
// # EKS clusters are Kubernetes clusters
//
// With Config.Kubesim, each EKS cluster is a kubesim cluster (binary from
// Config.KubesimBinary, else $QLEET_KUBESIM_BIN or <repo>/bin/kubesim) with
// one node of its own; a node group adds desiredSize kwok nodes labelled
// eks.amazonaws.com/nodegroup=<name> and follows UpdateNodegroupConfig. The
// cluster's endpoint (https://127.0.0.1:<port>, certificate signed by the CA
// in certificateAuthority.data) is served by the stand-in: it accepts an EKS
// token as `aws eks get-token` makes it ("k8s-aws-v1." + base64url of a
// presigned STS GetCallerIdentity URL for this stand-in that signs the
// x-k8s-aws-id header with the cluster name; the URL's host must be the
// stand-in's port on a loopback name or address), verifies it as STS would
// (the first check of each token is logged as sts GetCallerIdentity with
// params via=eks-token; its identity is then cached until the token
// expires), and accepts it for Config.EKSTokenLifetime after its X-Amz-Date (default
// 15m, whatever X-Amz-Expires says). Any principal of the cluster's account
// is admitted; the request is forwarded to kubesim impersonating the
// principal's ARN (the role ARN for a session) in group system:masters. A
// missing, malformed, expired or badly signed token gets 401; another
// account's principal gets 403. Without Config.Kubesim the endpoint still
// checks tokens and then answers 503.
//
// Supported calls: STS GetCallerIdentity, AssumeRole. IAM CreateRole,
// GetRole, DeleteRole, TagRole, UntagRole, ListRoleTags,
// UpdateAssumeRolePolicy, AttachRolePolicy, DetachRolePolicy,
// ListAttachedRolePolicies, PutRolePolicy, DeleteRolePolicy,
// ListRolePolicies, CreateOpenIDConnectProvider, GetOpenIDConnectProvider,
// TagOpenIDConnectProvider, DeleteOpenIDConnectProvider,
// ListOpenIDConnectProviders. EC2 CreateVpc, DescribeVpcs, DeleteVpc,
// CreateSubnet, DescribeSubnets, DeleteSubnet, CreateSecurityGroup,
// DescribeSecurityGroups, AuthorizeSecurityGroupIngress,
// RevokeSecurityGroupIngress, DeleteSecurityGroup, CreateTags, DeleteTags,
// DescribeAvailabilityZones (TagSpecifications and Filters vpc-id,
// subnet-id, group-id, group-name, tag:<key>, tag-key, cidr-block,
// availability-zone, state). EKS
// CreateCluster, DescribeCluster, ListClusters, DeleteCluster,
// CreateNodegroup, DescribeNodegroup, ListNodegroups, UpdateNodegroupConfig,
// DescribeUpdate, DeleteNodegroup, TagResource, UntagResource,
// ListTagsForResource. RDS CreateDBSubnetGroup, DescribeDBSubnetGroups,
// DeleteDBSubnetGroup, CreateDBInstance, CreateDBInstanceReadReplica (a
// source by identifier in its region, or by ARN across regions), DescribeDBInstances,
// DeleteDBInstance, AddTagsToResource, ListTagsForResource. S3 ListBuckets,
// CreateBucket, HeadBucket, DeleteBucket, PutBucketTagging,
// GetBucketTagging, DeleteBucketTagging, GetBucketLocation, ListObjectsV2,
// PutObject, GetObject, HeadObject, DeleteObject. Route53 CreateHostedZone,
// GetHostedZone, ListHostedZones, ListHostedZonesByName, DeleteHostedZone,
// ChangeResourceRecordSets, ListResourceRecordSets, GetChange,
// ChangeTagsForResource, ListTagsForResource.
//
// The binary internal/awssim/cmd/awssim runs it standalone for make
// demo-aws.
package awssim
