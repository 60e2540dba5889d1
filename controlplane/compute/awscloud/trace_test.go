package awscloud_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/qleetos/terraform-provider-qleet/controlplane/compute/awscloud"
	"github.com/qleetos/terraform-provider-qleet/internal/awssim"
)

// Not parallel: it installs the process's tracer provider while it runs.
func TestOperationsWithinATraceGetASpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	ctx := context.Background()
	sim := awssim.New(awssim.Config{})
	require.NoError(t, sim.Start(ctx))
	t.Cleanup(func() { _ = sim.Stop(context.Background()) })
	acct, err := sim.AddAccount("")
	require.NoError(t, err)
	cfg, err := awscloud.Account{Region: "us-east-1", AccessKeyID: acct.AccessKeyID, SecretAccessKey: acct.SecretAccessKey, Endpoint: sim.URL()}.Config(ctx, "")
	require.NoError(t, err)
	stsc := sts.NewFromConfig(cfg)

	t.Run("an operation outside any trace makes no span", func(t *testing.T) {
		_, err := stsc.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Empty(t, exp.GetSpans())
	})

	t.Run("an operation within a trace is a child span named for the service and operation", func(t *testing.T) {
		exp.Reset()
		pctx, parent := tp.Tracer("test").Start(ctx, "reconcile kubernetes_runtime")
		_, err := stsc.GetCallerIdentity(pctx, &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		parent.End()
		var got []string
		for _, s := range exp.GetSpans() {
			if s.Name == "aws sts GetCallerIdentity" {
				require.Equal(t, parent.SpanContext().SpanID(), s.Parent.SpanID())
				require.Equal(t, codes.Unset, s.Status.Code)
			}
			got = append(got, s.Name)
		}
		require.Contains(t, got, "aws sts GetCallerIdentity")
	})

	t.Run("a failed operation's span is failed, naming the action and holding no secret", func(t *testing.T) {
		exp.Reset()
		sim.Deny("sts", "GetCallerIdentity")
		t.Cleanup(sim.ClearFaults)
		pctx, parent := tp.Tracer("test").Start(ctx, "reconcile kubernetes_runtime")
		_, err := stsc.GetCallerIdentity(pctx, &sts.GetCallerIdentityInput{})
		require.Error(t, err)
		parent.End()
		var failed []tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if s.Name == "aws sts GetCallerIdentity" {
				failed = append(failed, s)
			}
		}
		require.Len(t, failed, 1, "one span for the operation")
		require.Equal(t, codes.Error, failed[0].Status.Code)
		require.Contains(t, failed[0].Status.Description, "sts:GetCallerIdentity")
		require.NotContains(t, failed[0].Status.Description, acct.SecretAccessKey)
	})
}
