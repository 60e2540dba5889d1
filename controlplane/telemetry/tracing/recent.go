package tracing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// Recent is a span processor that keeps the most recent finished spans in memory, bounded, so that a
// server with no collector can still show an object's last reconcile. It is safe for concurrent use.
type Recent struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan // a ring of cap spans
	next  int
	full  bool
}

// NewRecent returns a buffer of the last n finished spans.
func NewRecent(n int) *Recent {
	return &Recent{spans: make([]sdktrace.ReadOnlySpan, n)}
}

// OnStart does nothing: only finished spans are kept.
func (r *Recent) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps s, dropping the oldest span when the buffer is full.
func (r *Recent) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	r.spans[r.next] = s
	r.next++
	if r.next == len(r.spans) {
		r.next, r.full = 0, true
	}
	r.mu.Unlock()
}

// Shutdown does nothing.
func (r *Recent) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing: spans are kept as they end.
func (r *Recent) ForceFlush(context.Context) error { return nil }

// snapshot returns the kept spans, oldest first.
func (r *Recent) snapshot() []sdktrace.ReadOnlySpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return slices.Clone(r.spans[:r.next])
	}
	return append(slices.Clone(r.spans[r.next:]), r.spans[:r.next]...)
}

// LastReconcile returns the trace of the most recent reconcile of objectID that changed its status (the
// one that made it what it is now, rather than a later re-check that found nothing to do), or else of
// its most recent reconcile: every kept span of that trace. ok is false when the buffer holds no
// reconcile of it.
func (r *Recent) LastReconcile(objectID string) (t *api.Trace, ok bool) {
	spans := r.snapshot()
	wroteStatus := map[trace.SpanID]bool{}
	for _, s := range spans {
		if strings.HasSuffix(s.Name(), "/status") && s.SpanKind() == trace.SpanKindServer && attrOf(s, telemetry.AttrObjectID) == objectID {
			wroteStatus[s.Parent().SpanID()] = true
		}
	}
	var last, lastWrite sdktrace.ReadOnlySpan
	for _, s := range spans {
		if !isReconcileOf(s, objectID) {
			continue
		}
		if last == nil || s.StartTime().After(last.StartTime()) {
			last = s
		}
		if wroteStatus[s.SpanContext().SpanID()] && (lastWrite == nil || s.StartTime().After(lastWrite.StartTime())) {
			lastWrite = s
		}
	}
	if lastWrite != nil {
		last = lastWrite
	}
	if last == nil {
		return nil, false
	}
	return traceOf(spans, last.SpanContext().TraceID(), objectID), true
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, a := range s.Attributes() {
		if a.Key == key {
			return a.Value.AsString()
		}
	}
	return ""
}

func isReconcileOf(s sdktrace.ReadOnlySpan, objectID string) bool {
	return strings.HasPrefix(s.Name(), telemetry.ReconcileSpanPrefix) && attrOf(s, telemetry.AttrObjectID) == objectID
}

// traceOf converts the spans of one trace for the API.
func traceOf(all []sdktrace.ReadOnlySpan, id trace.TraceID, objectID string) *api.Trace {
	var spans []sdktrace.ReadOnlySpan
	for _, s := range all {
		if s.SpanContext().TraceID() == id {
			spans = append(spans, s)
		}
	}
	slices.SortStableFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	t := &api.Trace{TraceID: id.String(), ObjectID: objectID, Start: spans[0].StartTime().UTC(), Spans: make([]api.TraceSpan, 0, len(spans))}
	for _, s := range spans {
		ts := api.TraceSpan{
			SpanID:     s.SpanContext().SpanID().String(),
			Name:       s.Name(),
			Kind:       s.SpanKind().String(),
			OffsetMS:   ms(s.StartTime().Sub(t.Start)),
			DurationMS: ms(s.EndTime().Sub(s.StartTime())),
		}
		if p := s.Parent(); p.IsValid() {
			ts.ParentID = p.SpanID().String()
		}
		if s.Status().Code == codes.Error {
			ts.Error = s.Status().Description
		}
		for _, a := range s.Attributes() {
			if ts.Attributes == nil {
				ts.Attributes = map[string]string{}
			}
			ts.Attributes[string(a.Key)] = a.Value.Emit()
		}
		for _, l := range s.Links() {
			ts.Links = append(ts.Links, fmt.Sprintf("%s/%s", l.SpanContext.TraceID(), l.SpanContext.SpanID()))
		}
		t.Spans = append(t.Spans, ts)
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
