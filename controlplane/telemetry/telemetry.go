// Package telemetry is QleetOS's tracing vocabulary: one change's hops (API handler, store
// transaction, outbox relay, broker publish and consume, lock, reconcile, cluster calls, status write)
// form one trace. The trace context is written in the outbox row, carried as a W3C traceparent NATS
// header, and continued by the reconcile that handles the change; a requeued or taken-over reconcile
// links to the original instead.
//
// Spans go to the global tracer provider, which package tracing installs. Without it, the global
// provider is OpenTelemetry's no-op: spans cost a few nanoseconds and record nothing. This package
// depends on the OpenTelemetry API only.
package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/internal/redact"
)

// ScopeName is the instrumentation scope of every QleetOS span.
const ScopeName = "github.com/qleetos/terraform-provider-qleet/controlplane"

// Span attributes QleetOS sets, so that spans can be found by object.
const (
	// AttrKind is the object kind a span works on, e.g. "workload_instance".
	AttrKind = attribute.Key("qleet.kind")
	// AttrObjectID is the id of the object a span works on.
	AttrObjectID = attribute.Key("qleet.object.id")
)

// ReconcileSpanPrefix starts the name of every reconcile span ("reconcile <kind>").
const ReconcileSpanPrefix = "reconcile "

// Tracer returns QleetOS's tracer from the current global provider. It is looked up on every call, so
// that a provider installed later (or by a test) is used.
func Tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(ScopeName) }

// Start starts a span from the global provider; see trace.Tracer.Start.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, opts...)
}

// End records err (when not nil) on span and ends it. A URL's userinfo in err is redacted, since
// traces are shown to viewers (redact.URLs).
func End(span trace.Span, err error) {
	if err != nil {
		if msg := redact.URLs(err.Error()); msg != err.Error() {
			err = errors.New(msg)
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
