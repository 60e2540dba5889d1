package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The propagator is fixed to W3C trace context everywhere a trace crosses a process: HTTP between the
// client and the API, the outbox row, and NATS headers. It does not depend on the global one, so that
// a trace stays connected whatever an embedding program installs.
var traceContext = propagation.TraceContext{}

// TraceparentHeader is the W3C header (and NATS header) that carries a span context.
const TraceparentHeader = "traceparent"

// LinkHeader carries, on a NATS notification, the span context of a reconcile that asked for another
// one later (a requeue): the next reconcile starts a trace of its own that links to it.
const LinkHeader = "Qleet-Trace-Link"

// Traceparent returns the W3C traceparent of the span in ctx, or "" when it has none (or tracing is off).
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c[TraceparentHeader]
}

// SpanContext parses a W3C traceparent; it returns an invalid span context for "" or a malformed one.
func SpanContext(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{TraceparentHeader: traceparent})
	return trace.SpanContextFromContext(ctx)
}

// ContextWithRemoteParent returns ctx carrying the span context of traceparent as its remote parent.
func ContextWithRemoteParent(ctx context.Context, traceparent string) context.Context {
	sc := SpanContext(traceparent)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// InjectHTTP writes the span context of ctx into h.
func InjectHTTP(ctx context.Context, h http.Header) {
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractHTTP returns ctx with the span context that h carries, if any, as its remote parent.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}
