// Package tracing installs the OpenTelemetry SDK behind package telemetry's spans: export by the
// standard OTEL_* variables (OTLP over HTTP or gRPC), and a bounded buffer of the most recent spans
// (Recent) so that `qleet describe --trace` works with no collector. Only cmd/ and tests call Setup;
// without it, every span is OpenTelemetry's no-op.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultRecentSpans is how many finished spans Setup keeps in memory by default.
const DefaultRecentSpans = 4096

// Config configures Setup. Zero values take the documented defaults.
type Config struct {
	// ServiceName is the service.name resource attribute when OTEL_SERVICE_NAME does not set it
	// (default "qleet").
	ServiceName string
	// RecentSpans is how many finished spans are kept in memory for Recent (default DefaultRecentSpans).
	// A negative value keeps none; with no exporter configured either, tracing is then off.
	RecentSpans int
	// Exporters are extra span exporters (tests use an in-memory one), each behind a synchronous
	// processor.
	Exporters []sdktrace.SpanExporter
}

// Tracing is the installed tracer provider.
type Tracing struct {
	// Recent holds the most recent finished spans, or is nil when none are kept.
	Recent *Recent
	// Exporting names the configured exporter ("otlp/http", "otlp/grpc"), or is empty.
	Exporting string

	tp *sdktrace.TracerProvider
}

// Setup installs a tracer provider as the global one, with the W3C trace-context propagator, and
// returns it. Tracing is off (the no-op provider stays, and Setup returns a Tracing with nothing in it)
// when OTEL_SDK_DISABLED is true, or when no exporter is configured and cfg.RecentSpans is negative.
// OTLP export is on when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; the exporter reads the other
// OTEL_EXPORTER_OTLP_* variables itself (protocol http/protobuf by default, or grpc). Sampling follows
// OTEL_TRACES_SAMPLER (default: parent-based, always on).
func Setup(ctx context.Context, cfg Config) (*Tracing, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "qleet"
	}
	if cfg.RecentSpans == 0 {
		cfg.RecentSpans = DefaultRecentSpans
	}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return &Tracing{}, nil
	}
	exp, name, err := otlpExporter(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	t := &Tracing{Exporting: name}
	var opts []sdktrace.TracerProviderOption
	if exp != nil {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if cfg.RecentSpans > 0 {
		t.Recent = NewRecent(cfg.RecentSpans)
		opts = append(opts, sdktrace.WithSpanProcessor(t.Recent))
	}
	for _, e := range cfg.Exporters {
		opts = append(opts, sdktrace.WithSyncer(e))
	}
	if len(opts) == 0 {
		return t, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithHost(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t.tp = sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res))...)
	otel.SetTracerProvider(t.tp)
	return t, nil
}

// Shutdown flushes the exporters and restores the no-op tracer provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// otlpExporter returns the OTLP exporter the environment asks for, or nil.
func otlpExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, string, error) {
	switch exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exporter {
	case "none":
		return nil, "", nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, "", nil
		}
	case "otlp":
	default:
		return nil, "", fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER %q is not supported (otlp or none)", exporter)
	}
	protocol := cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	switch protocol {
	case "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("telemetry: otlp/http exporter: %w", err)
		}
		return exp, "otlp/http", nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("telemetry: otlp/grpc exporter: %w", err)
		}
		return exp, "otlp/grpc", nil
	default:
		return nil, "", fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported (http/protobuf or grpc)", protocol)
	}
}
