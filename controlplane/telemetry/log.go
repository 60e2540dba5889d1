package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"

	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/internal/redact"
)

// LogHandler wraps a slog handler so that every record logged with a context that holds a span
// carries its trace_id and span_id: a log line leads to its trace, and a trace to its logs. It also
// redacts the userinfo of every URL in the message and the attributes (strings, errors, Stringers and
// *url.URL, in groups too): no credential reaches a log line (redact.URLs).
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

// Handle adds the span's ids to r and redacts it.
func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	r = redactRecord(r)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler, and redacts attrs.
func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i], _ = redactAttr(a)
	}
	return logHandler{h.Handler.WithAttrs(out)}
}

// WithGroup keeps the wrapper around the derived handler.
func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }

// redactRecord returns r, or a copy of it with credentials redacted when it holds any.
func redactRecord(r slog.Record) slog.Record {
	msg := redact.URLs(r.Message)
	changed := msg != r.Message
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		a, c := redactAttr(a)
		changed = changed || c
		attrs = append(attrs, a)
		return true
	})
	if !changed {
		return r
	}
	out := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	out.AddAttrs(attrs...)
	return out
}

// redactAttr redacts the URLs in one attribute, and says whether it changed anything. A value that is
// an error, a fmt.Stringer or a URL is logged as its redacted text when it holds a credential.
func redactAttr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := redact.URLs(v.String()); s != v.String() {
			return slog.String(a.Key, s), true
		}
	case slog.KindGroup:
		group := v.Group()
		out := make([]slog.Attr, len(group))
		changed := false
		for i, g := range group {
			var c bool
			out[i], c = redactAttr(g)
			changed = changed || c
		}
		if changed {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
		}
	case slog.KindAny:
		if s, ok := text(v.Any()); ok {
			if r := redact.URLs(s); r != s {
				return slog.String(a.Key, r), true
			}
		}
	}
	return a, false
}

// text is the text of an error, a fmt.Stringer or a URL; a typed nil that panics has none.
func text(x any) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			s, ok = "", false
		}
	}()
	switch x := x.(type) {
	case *url.URL:
		return x.String(), x != nil
	case error:
		return x.Error(), true
	case fmt.Stringer:
		return x.String(), true
	}
	return "", false
}
