package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

type requestIDKey struct{}

// requestInfo is filled in by inner handlers for the access log.
type requestInfo struct{ role string }

type requestInfoKey struct{}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestIDHeader carries the request id in both directions.
const requestIDHeader = "X-Request-Id"

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID takes a well-formed X-Request-Id from the caller or makes one, and echoes it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !requestIDRE.MatchString(id) {
			id = uuid.NewString()
		}
		w.Header().Set(requestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// traceRequests gives each request a server span, the child of the caller's traceparent when it sends
// one (a reconcile's reads and status writes join its trace). The span is named for the route pattern
// once routing has matched it, e.g. "PUT /v1/{plural}/{id}/status".
func traceRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := telemetry.ExtractHTTP(r.Context(), r.Header)
		ctx, span := telemetry.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.IsRecording() {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		r = r.WithContext(ctx)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		code := ww.Status()
		if code == 0 {
			code = http.StatusOK
		}
		if r.Context().Err() != nil {
			code = statusClientGone // not a failure of the server: see observe
		}
		span.SetName(r.Method + " " + route)
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", route),
			attribute.String("url.path", r.URL.Path),
			attribute.Int("http.response.status_code", code),
			attribute.String("qleet.request_id", requestID(r.Context())))
		if ki := kindFrom(r); ki != nil {
			span.SetAttributes(telemetry.AttrKind.String(ki.Kind))
		}
		if id := chi.URLParam(r, "id"); id != "" {
			span.SetAttributes(telemetry.AttrObjectID.String(id))
		}
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}

// statusClientGone is the status the access log and the latency metric give a request whose caller
// went away before it was answered (nginx's 499, "client closed request"): whatever the handler then
// wrote (a cancelled wait answers 503) reached no one.
const statusClientGone = 499

// observe logs each request and records its latency, by route pattern. The log is for a person: a
// server error (5xx) is logged at error; every other request, and one whose caller went away (a long
// poll ended on purpose, as the provider's waits do every few seconds), at debug.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		info := &requestInfo{}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		next.ServeHTTP(ww, r)
		d := time.Since(start)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		code := ww.Status()
		if code == 0 {
			code = http.StatusOK
		}
		gone := r.Context().Err() != nil
		if gone {
			code = statusClientGone
		}
		s.metrics.latency.WithLabelValues(route, r.Method, strconv.Itoa(code)).Observe(d.Seconds())
		level := slog.LevelDebug
		if code >= 500 {
			level = slog.LevelError
		}
		s.log.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("path", r.URL.Path),
			slog.Int("status", code),
			slog.Duration("duration", d),
			slog.Int("bytes", ww.BytesWritten()),
			slog.String("role", info.role),
			slog.String("request_id", requestID(r.Context())))
	})
}

// recoverPanics turns a handler panic into a 500 and logs its stack.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if err, ok := rec.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(rec)
			}
			s.log.ErrorContext(r.Context(), "panic serving request",
				slog.Any("panic", rec),
				slog.String("stack", string(debug.Stack())),
				slog.String("request_id", requestID(r.Context())))
			writeJSON(w, http.StatusInternalServerError, struct {
				Error *api.Error `json:"error"`
			}{api.Errorf(api.CodeInternal, "internal error")})
		}()
		next.ServeHTTP(w, r)
	})
}
