package awscloud

import (
	"context"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// addTracing gives each AWS operation made within a trace (a reconcile's) a client span named for the
// service and the operation, e.g. "aws eks CreateCluster", that covers its retries. Operations outside
// any trace get none, so that background calls make no traces of their own. It runs after the
// operation's own Initialize middleware, which names the service and the operation.
func addTracing(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("qleetTracing",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				return next.HandleInitialize(ctx, in)
			}
			service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			ctx, span := telemetry.Start(ctx, "aws "+strings.ToLower(strings.ReplaceAll(service, " ", ""))+" "+op,
				trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(
					attribute.String("rpc.system", "aws-api"),
					attribute.String("rpc.service", service),
					attribute.String("rpc.method", op),
					attribute.String("cloud.region", awsmiddleware.GetRegion(ctx))))
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				// The SDK's errors name the operation and AWS's code and message; never a credential.
				telemetry.End(span, Classify(err))
				return out, md, err
			}
			span.End()
			return out, md, err
		}), middleware.After)
}
