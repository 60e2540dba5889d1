package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

func TestTraceContextCrossesEveryCarrier(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "write")
	defer span.End()

	t.Run("no span, no traceparent", func(t *testing.T) {
		require.Empty(t, telemetry.Traceparent(context.Background()))
		require.False(t, telemetry.SpanContext("").IsValid())
		require.False(t, telemetry.SpanContext("00-garbage").IsValid())
	})
	t.Run("a traceparent string (the outbox row, a NATS header) round-trips the span context", func(t *testing.T) {
		tp := telemetry.Traceparent(ctx)
		require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp)
		sc := telemetry.SpanContext(tp)
		require.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
		require.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
		require.True(t, sc.IsRemote())
		child := trace.SpanContextFromContext(telemetry.ContextWithRemoteParent(context.Background(), tp))
		require.Equal(t, sc.TraceID(), child.TraceID())
	})
	t.Run("HTTP headers carry it from the client to the API", func(t *testing.T) {
		h := http.Header{}
		telemetry.InjectHTTP(ctx, h)
		got := trace.SpanContextFromContext(telemetry.ExtractHTTP(context.Background(), h))
		require.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	})
}

func TestLogLinesCarryTheirSpansIDs(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test").WithGroup("g")
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	log.InfoContext(ctx, "inside", "k", "v")
	span.End()
	log.InfoContext(context.Background(), "outside")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var in, out map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &in))
	require.NoError(t, json.Unmarshal(lines[1], &out))
	g, ok := in["g"].(map[string]any)
	require.True(t, ok, "a derived handler keeps the wrapper: %s", lines[0])
	require.Equal(t, span.SpanContext().TraceID().String(), g["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), g["span_id"])
	require.NotContains(t, string(lines[1]), "trace_id", "no span, no ids")
}
