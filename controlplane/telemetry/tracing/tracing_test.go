package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
)

// These tests set OTEL_* variables and the global tracer provider, so none runs in parallel.

func TestOffByDefaultWithNoBufferAndNoExporter(t *testing.T) {
	tr, err := tracing.Setup(context.Background(), tracing.Config{RecentSpans: -1})
	require.NoError(t, err)
	require.Nil(t, tr.Recent)
	require.Empty(t, tr.Exporting)
	_, span := telemetry.Start(context.Background(), "nothing")
	require.False(t, span.IsRecording(), "no provider is installed: spans are no-ops")
	span.End()
	require.NoError(t, tr.Shutdown(context.Background()))
}

func TestSDKDisabledTurnsEverythingOff(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := tracing.Setup(context.Background(), tracing.Config{})
	require.NoError(t, err)
	require.Nil(t, tr.Recent)
	_, span := telemetry.Start(context.Background(), "nothing")
	require.False(t, span.IsRecording())
	span.End()
}

func TestUnsupportedExporterIsRefusedByName(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, err := tracing.Setup(context.Background(), tracing.Config{})
	require.ErrorContains(t, err, "OTEL_TRACES_EXPORTER")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err = tracing.Setup(context.Background(), tracing.Config{})
	require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL")
}

func TestOTLPEndpointExportsSpansOverHTTP(t *testing.T) {
	var (
		mu    sync.Mutex
		names []string
		svc   string
	)
	collectorSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var req collector.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					svc = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collectorSrv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collectorSrv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "qleet-under-test")

	tr, err := tracing.Setup(context.Background(), tracing.Config{ServiceName: "qleet-default"})
	require.NoError(t, err)
	require.Equal(t, "otlp/http", tr.Exporting)
	require.NotNil(t, tr.Recent, "the recent-span buffer stays on beside the exporter")
	ctx, parent := telemetry.Start(context.Background(), "parent")
	_, child := telemetry.Start(ctx, "child")
	child.End()
	parent.End()
	require.NoError(t, tr.Shutdown(context.Background()), "shutdown flushes the batch")

	mu.Lock()
	defer mu.Unlock()
	require.ElementsMatch(t, []string{"parent", "child"}, names)
	require.Equal(t, "qleet-under-test", svc, "OTEL_SERVICE_NAME wins over the default")
	_, span := otel.Tracer("x").Start(context.Background(), "after")
	require.False(t, span.IsRecording(), "shutdown restores the no-op provider")
}
