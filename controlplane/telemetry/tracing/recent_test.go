package tracing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
)

// reconcile records one reconcile of id with a child hop (a status write, or a cluster call), on its
// own provider, and returns its trace id.
func reconcile(tp trace.TracerProvider, id string, writesStatus bool) trace.TraceID {
	tr := tp.Tracer("test")
	ctx, root := tr.Start(context.Background(), "PUT /v1/{plural}/{id}")
	rctx, rec := tr.Start(ctx, telemetry.ReconcileSpanPrefix+"workload_instance", trace.WithAttributes(telemetry.AttrObjectID.String(id)))
	hopName, opts := "k8s PATCH deployments", []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	if writesStatus {
		hopName, opts = "PUT /v1/{plural}/{id}/status", []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(telemetry.AttrObjectID.String(id))}
	}
	_, hop := tr.Start(rctx, hopName, opts...)
	time.Sleep(time.Millisecond) // no signal: the hop's duration is under test (positive), and it orders the reconciles' start times
	hop.End()
	rec.End()
	root.End()
	return root.SpanContext().TraceID()
}

func TestRecentKeepsTheLastSpansAndFindsAnObjectsLastReconcile(t *testing.T) {
	t.Parallel()
	recent := tracing.NewRecent(6) // two traces of three spans
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recent))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	t.Run("an object never reconciled has no trace", func(t *testing.T) {
		_, ok := recent.LastReconcile("a")
		require.False(t, ok)
	})
	t.Run("the most recent reconcile of the object is chosen, with every hop of its trace", func(t *testing.T) {
		reconcile(tp, "a", false)
		second := reconcile(tp, "a", false)
		got, ok := recent.LastReconcile("a")
		require.True(t, ok)
		require.Equal(t, second.String(), got.TraceID)
		require.Equal(t, "a", got.ObjectID)
		require.Len(t, got.Spans, 3)
		require.Equal(t, "PUT /v1/{plural}/{id}", got.Spans[0].Name, "ordered by start")
		require.Empty(t, got.Spans[0].ParentID)
		require.Equal(t, got.Spans[0].SpanID, got.Spans[1].ParentID)
		require.Equal(t, got.Spans[1].SpanID, got.Spans[2].ParentID)
		require.Positive(t, got.Spans[2].DurationMS)
		require.GreaterOrEqual(t, got.Spans[2].OffsetMS, got.Spans[1].OffsetMS)
	})
	t.Run("a later re-check that wrote nothing does not hide the reconcile that changed the status", func(t *testing.T) {
		wrote := reconcile(tp, "c", true)
		reconcile(tp, "c", false)
		got, ok := recent.LastReconcile("c")
		require.True(t, ok)
		require.Equal(t, wrote.String(), got.TraceID)
	})
	t.Run("the buffer is bounded: the oldest spans go first", func(t *testing.T) {
		for i := range 2 {
			reconcile(tp, fmt.Sprintf("b%d", i), false)
		}
		_, ok := recent.LastReconcile("a")
		require.False(t, ok, "a's traces were pushed out by newer ones")
		got, ok := recent.LastReconcile("b0")
		require.True(t, ok)
		require.Len(t, got.Spans, 3)
	})
}
