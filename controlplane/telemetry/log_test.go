package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

type hostName struct{ u string }

func (h hostName) String() string { return h.u }

func TestLogHandlerRedactsURLCredentials(t *testing.T) {
	t.Parallel()
	const pass = "hunter2-s3cret"
	server := "https://admin:" + pass + "@10.0.0.1:6443"
	u, err := url.Parse(server)
	require.NoError(t, err)
	var nilURL *url.URL
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		want string
	}{
		{"in the message", func(l *slog.Logger) { l.Info("connecting to " + server) }, "connecting to https://admin:xxxxx@10.0.0.1:6443"},
		{"in a string attribute", func(l *slog.Logger) { l.Info("connect", "server", server) }, "server=https://admin:xxxxx@10.0.0.1:6443"},
		{"in an error", func(l *slog.Logger) {
			l.Warn("fetch failed", "err", fmt.Errorf("list nodes: %w", errors.New(`Get "`+server+`/api/v1/nodes": EOF`)))
		}, `list nodes: Get \"https://admin:xxxxx@10.0.0.1:6443/api/v1/nodes\": EOF`},
		{"in a *url.URL", func(l *slog.Logger) { l.Info("connect", "url", u) }, "url=https://admin:xxxxx@10.0.0.1:6443"},
		{"in a Stringer", func(l *slog.Logger) { l.Info("connect", "host", hostName{server}) }, "host=https://admin:xxxxx@10.0.0.1:6443"},
		{"in a group", func(l *slog.Logger) { l.Info("connect", slog.Group("db", "url", "postgres://q:"+pass+"@db/q")) }, "db.url=postgres://q:xxxxx@db/q"},
		{"in attributes bound with With", func(l *slog.Logger) { l.With("server", server).Info("connect") }, "server=https://admin:xxxxx@10.0.0.1:6443"},
		{"in a nested group bound with WithGroup", func(l *slog.Logger) { l.WithGroup("rt").Info("connect", "server", server) }, "rt.server=https://admin:xxxxx@10.0.0.1:6443"},
		{"a user-only userinfo (a token) goes whole", func(l *slog.Logger) { l.Info("clone", "repo", "https://"+pass+"@github.com/o/r") }, "repo=https://xxxxx@github.com/o/r"},
		{"a typed nil is logged as slog logs it", func(l *slog.Logger) { l.Info("connect", "url", nilURL) }, "url=<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(slog.New(telemetry.LogHandler(slog.NewTextHandler(&buf, nil))))
			require.NotContains(t, buf.String(), pass)
			require.Contains(t, buf.String(), tc.want)
		})
	}
	t.Run("a line without credentials is logged as it was, with its trace ids", func(t *testing.T) {
		tp := sdktrace.NewTracerProvider()
		defer func() { _ = tp.Shutdown(context.Background()) }()
		ctx, span := tp.Tracer("test").Start(context.Background(), "reconcile")
		defer span.End()
		var buf bytes.Buffer
		slog.New(telemetry.LogHandler(slog.NewTextHandler(&buf, nil))).InfoContext(ctx, "ready", "endpoint", "https://10.0.0.1:6443", "n", 3, "err", errors.New("mail ops@example.com"))
		require.Contains(t, buf.String(), `msg=ready endpoint=https://10.0.0.1:6443 n=3 err="mail ops@example.com" trace_id=`+span.SpanContext().TraceID().String())
	})
}

func TestEndRecordsTheErrorWithoutCredentials(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, span := tp.Tracer("test").Start(context.Background(), "apply")
	telemetry.End(span, fmt.Errorf("apply: %w", errors.New(`Get "https://admin:hunter2@10.0.0.1:6443/api": EOF`)))
	ended := rec.Ended()
	require.Len(t, ended, 1)
	require.Equal(t, `apply: Get "https://admin:xxxxx@10.0.0.1:6443/api": EOF`, ended[0].Status().Description)
	for _, ev := range ended[0].Events() {
		for _, a := range ev.Attributes {
			require.NotContains(t, a.Value.Emit(), "hunter2")
		}
	}
}
