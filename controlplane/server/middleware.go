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

	"github.com/qleetos/terraform-provider-qleet/client"
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

// observe logs each request and records its latency, by route pattern.
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
		s.metrics.latency.WithLabelValues(route, r.Method, strconv.Itoa(code)).Observe(d.Seconds())
		level := slog.LevelInfo
		switch {
		case code >= 500:
			level = slog.LevelError
		case route == "/healthz" || route == "/readyz" || route == "/metrics":
			level = slog.LevelDebug
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
				Error *client.Error `json:"error"`
			}{client.Errorf(client.CodeInternal, "internal error")})
		}()
		next.ServeHTTP(w, r)
	})
}
