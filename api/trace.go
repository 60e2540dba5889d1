package api

import (
	"time"
)

// Trace is one recorded trace of the control plane: the hops of a change, from the API write that made
// it through the outbox, the broker, the lock and the reconcile to the status write. GET
// /v1/<kind>/{id}/trace serves the trace of an object's most recent reconcile from the server's
// recent-span buffer.
type Trace struct {
	// TraceID is the W3C trace id (32 hex digits).
	TraceID string `json:"trace_id"`
	// ObjectID is the object whose reconcile the trace holds.
	ObjectID string `json:"object_id"`
	// Start is when the trace's first recorded span started.
	Start time.Time `json:"start"`
	// Spans are the trace's recorded spans, ordered by start time.
	Spans []TraceSpan `json:"spans"`
}

// TraceSpan is one hop of a Trace.
type TraceSpan struct {
	// SpanID is the span's id (16 hex digits).
	SpanID string `json:"span_id"`
	// ParentID is the parent span's id, or empty for the trace's root.
	ParentID string `json:"parent_id,omitempty"`
	// Name names the hop, e.g. "POST /v1/{plural}", "store.Create", "outbox publish", "reconcile
	// workload_instance", "k8s PATCH deployments".
	Name string `json:"name"`
	// Kind is the OpenTelemetry span kind: server, client, producer, consumer or internal.
	Kind string `json:"kind"`
	// OffsetMS is when the span started, in milliseconds after the trace's Start.
	OffsetMS float64 `json:"offset_ms"`
	// DurationMS is how long the span took, in milliseconds.
	DurationMS float64 `json:"duration_ms"`
	// Error is the span's error message, when it failed.
	Error string `json:"error,omitempty"`
	// Attributes are the span's attributes, as strings.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Links are the trace ids this span links to (the reconcile that requeued it, or notifications it
	// took over).
	Links []string `json:"links,omitempty"`
}
