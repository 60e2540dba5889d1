package awssim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// fixture is a started stand-in with one account and SDK clients for it.
type fixture struct {
	sim  *awssim.Sim
	acct awssim.Account
	cfg  aws.Config
	sts  *sts.Client
	iam  *iam.Client
	ec2  *ec2.Client
	eks  *eks.Client
	rds  *rds.Client
	s3   *s3.Client
	r53  *route53.Client
}

// startSim starts a stand-in for the test with short lifecycle delays.
func startSim(t *testing.T, cfg awssim.Config) *fixture {
	t.Helper()
	if cfg.ClusterDelay == 0 {
		cfg.ClusterDelay = 200 * time.Millisecond
	}
	cfg.NodegroupDelay = 100 * time.Millisecond
	cfg.DBDelay = 100 * time.Millisecond
	cfg.DeleteDelay = 100 * time.Millisecond
	sim := awssim.New(cfg)
	require.NoError(t, sim.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, sim.Stop(ctx))
	})
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	f := &fixture{sim: sim, acct: acct}
	f.cfg = awsConfig(acct.AccessKeyID, acct.SecretAccessKey, "")
	f.clients()
	return f
}

// awsConfig is an SDK config with static keys and fast retries.
func awsConfig(id, secret, token string) aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, token),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
			})
		},
	}
}

func (f *fixture) clients() {
	u := aws.String(f.sim.URL())
	f.sts = sts.NewFromConfig(f.cfg, func(o *sts.Options) { o.BaseEndpoint = u })
	f.iam = iam.NewFromConfig(f.cfg, func(o *iam.Options) { o.BaseEndpoint = u })
	f.ec2 = ec2.NewFromConfig(f.cfg, func(o *ec2.Options) { o.BaseEndpoint = u })
	f.eks = eks.NewFromConfig(f.cfg, func(o *eks.Options) { o.BaseEndpoint = u })
	f.rds = rds.NewFromConfig(f.cfg, func(o *rds.Options) { o.BaseEndpoint = u })
	f.s3 = s3.NewFromConfig(f.cfg, func(o *s3.Options) { o.BaseEndpoint = u; o.UsePathStyle = true })
	f.r53 = route53.NewFromConfig(f.cfg, func(o *route53.Options) { o.BaseEndpoint = u })
}

// withKeys returns a copy of the fixture whose clients sign with other keys.
func (f *fixture) withKeys(id, secret, token string) *fixture {
	g := *f
	g.cfg = awsConfig(id, secret, token)
	g.clients()
	return &g
}

// errorCode returns the API error code of err, failing the test if there is none.
func errorCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	require.True(t, errors.As(err, &ae), "want an API error, got %v", err)
	return ae.ErrorCode()
}

// actions lists the service:action:error of the calls in the log.
func actions(calls []awssim.Call) []string {
	var out []string
	for _, c := range calls {
		s := c.Service + ":" + c.Action
		if c.Error != "" {
			s += ":" + c.Error
		}
		out = append(out, s)
	}
	return out
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
