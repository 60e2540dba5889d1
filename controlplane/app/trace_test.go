package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
	"github.com/qleetos/terraform-provider-qleet/internal/cptest"
	"github.com/qleetos/terraform-provider-qleet/internal/kubesimtest"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// traceOf returns the exported spans of one trace.
func traceOf(exp *tracetest.InMemoryExporter, id trace.TraceID) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// chainOK reports whether the trace holds, in order of parenthood: the API write's server span (the
// root), its store transaction, the outbox publish, the reconcile of objectID, a cluster call made by
// that reconcile, and its status write with the store transaction under it. It also requires every span
// but the root to have its parent in the trace (one connected trace).
func chainOK(spans []tracetest.SpanStub, rootName, storeName, kind, objectID string) (bool, string) {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	var root, tx, publish, rec, k8s, status, statusTx *tracetest.SpanStub
	for i := range spans {
		s := &spans[i]
		parent, hasParent := byID[s.Parent.SpanID()]
		switch {
		case s.Name == rootName && !s.Parent.IsValid():
			root = s
		case s.Name == storeName && hasParent && parent.Name == rootName:
			tx = s
		case s.Name == "outbox publish "+kind && attr(*s, string(telemetry.AttrObjectID)) == objectID && hasParent && parent.Name == storeName:
			publish = s
		case s.Name == telemetry.ReconcileSpanPrefix+kind && attr(*s, string(telemetry.AttrObjectID)) == objectID && hasParent && parent.Name == "outbox publish "+kind:
			rec = s
		}
	}
	if root == nil || tx == nil || publish == nil || rec == nil {
		return false, "missing one of: root, store tx, outbox publish, reconcile"
	}
	for i := range spans {
		s := &spans[i]
		if s.Parent.SpanID() != rec.SpanContext.SpanID() {
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, "k8s "):
			k8s = s
		case s.Name == "PUT /v1/{plural}/{id}/status":
			status = s
		}
	}
	if k8s == nil || status == nil {
		return false, "the reconcile has no cluster call or no status write yet"
	}
	for i := range spans {
		if spans[i].Name == "store.UpdateStatus" && spans[i].Parent.SpanID() == status.SpanContext.SpanID() {
			statusTx = &spans[i]
		}
	}
	if statusTx == nil {
		return false, "the status write has no store transaction"
	}
	for _, s := range spans {
		if s.SpanContext.SpanID() == root.SpanContext.SpanID() {
			continue
		}
		if _, ok := byID[s.Parent.SpanID()]; !ok {
			return false, "span " + s.Name + " has its parent outside the trace"
		}
	}
	return true, ""
}

// TestOneChangeIsOneConnectedTrace is not parallel: it installs the process's tracer provider.
func TestOneChangeIsOneConnectedTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.Setup(context.Background(), tracing.Config{
		ServiceName: "qleet-test", Exporters: []sdktrace.SpanExporter{exp},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Shutdown(context.Background())) })
	require.NotNil(t, tr.Recent)

	cluster := kubesimtest.Start(t)
	kc := cptest.Kubeconfig(t, cluster.Kubeconfig)
	logs := &syncBuffer{}
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))) // the access log is at debug
	_, cl := cptest.Start(t, app.Config{Logger: logger, Traces: tr.Recent, ResyncInterval: time.Hour, DriftInterval: time.Hour})
	ctx := context.Background()
	rts := cl.KubernetesRuntimes()
	// Warm up: the controllers' first resync pass, at start, may notify an object created right after
	// it, and then a reconcile outside the create's trace could write its status first.
	warm, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "warm-up"}, Spec: runtimeSpec(kc)})
	require.NoError(t, err)
	_, err = rts.WaitReconciled(cptest.Wait(t, 60*time.Second), warm.ID)
	require.NoError(t, err)

	t.Run("a create is one trace from the handler through the outbox, broker, lock and reconcile to the status write", func(t *testing.T) {
		obj, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "traced"}, Spec: runtimeSpec(kc)})
		require.NoError(t, err)
		_, err = rts.WaitReconciled(cptest.Wait(t, 60*time.Second), obj.ID)
		require.NoError(t, err)

		createTrace := waitConnected(t, exp, logs, "POST /v1/{plural}", "store.Create", obj.ID)
		spans := traceOf(exp, createTrace)
		names := map[string]bool{}
		for _, s := range spans {
			names[s.Name] = true
		}
		for _, want := range []string{"lock acquire", "GET /v1/{plural}/{id}", "store.Get"} {
			require.True(t, names[want], "the create's trace has %q: %v", want, names)
		}
		t.Logf("the create's trace: %d spans", len(spans))
		slices.SortFunc(spans, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for _, s := range spans {
			t.Logf("  %-40s +%8.2fms %8.2fms", s.Name, float64(s.StartTime.Sub(spans[0].StartTime).Microseconds())/1000, float64(s.EndTime.Sub(s.StartTime).Microseconds())/1000)
		}

		// The API's access log line for the create carries the trace id.
		found := false
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line["msg"] == "http request" && line["method"] == "POST" && line["route"] == "/v1/{plural}" && line["trace_id"] == createTrace.String() {
				found = true
				require.NotEmpty(t, line["span_id"])
			}
		}
		require.True(t, found, "an access log line names the create's trace")
	})

	t.Run("an update is one trace too, from its handler to its status write", func(t *testing.T) {
		obj, err := rts.Create(ctx, &api.KubernetesRuntime{Meta: api.Meta{Name: "updated"}, Spec: runtimeSpec(kc)})
		require.NoError(t, err)
		// Once the create is reconciled: were the update taken over by the create's reconcile (which
		// controller_test's trace test covers), that reconcile could write the update's status itself.
		obj, err = rts.WaitReconciled(cptest.Wait(t, 60*time.Second), obj.ID)
		require.NoError(t, err)
		obj.Spec.Region = "eu-west" // a spec change: a new generation to reconcile, and a status to write
		obj.Spec.Kubeconfig = kc    // write-only: never read back
		obj, err = rts.Update(ctx, obj)
		require.NoError(t, err)
		_, err = rts.WaitReconciled(cptest.Wait(t, 60*time.Second), obj.ID)
		require.NoError(t, err)
		waitConnected(t, exp, logs, "PUT /v1/{plural}/{id}", "store.UpdateSpec", obj.ID)
	})

	t.Run("the server serves the object's last reconcile from its recent-span buffer", func(t *testing.T) {
		obj, err := rts.GetByName(ctx, "traced")
		require.NoError(t, err)
		got, err := cl.LastTrace(ctx, api.KindKubernetesRuntime, obj.ID)
		require.NoError(t, err)
		require.Equal(t, obj.ID, got.ObjectID)
		require.Len(t, got.TraceID, 32)
		var rec *api.TraceSpan
		for i, s := range got.Spans {
			if s.Name == telemetry.ReconcileSpanPrefix+api.KindKubernetesRuntime && s.Attributes[string(telemetry.AttrObjectID)] == obj.ID {
				rec = &got.Spans[i]
			}
			require.GreaterOrEqual(t, s.OffsetMS, 0.0)
			require.GreaterOrEqual(t, s.DurationMS, 0.0)
		}
		require.NotNil(t, rec, "the trace holds the reconcile")
		require.NotEmpty(t, rec.Attributes["qleet.outcome"])

		_, err = cl.LastTrace(ctx, api.KindKubernetesRuntime, "no-such-id")
		require.True(t, api.IsNotFound(err), "an unknown object is not found: %v", err)
	})
}

// describeTraces lists, for a failure message, the traces that hold a span of objectID.
func describeTraces(exp *tracetest.InMemoryExporter, objectID string) string {
	var b strings.Builder
	seen := map[trace.TraceID]bool{}
	for _, s := range exp.GetSpans() {
		if attr(s, string(telemetry.AttrObjectID)) != objectID || seen[s.SpanContext.TraceID()] {
			continue
		}
		seen[s.SpanContext.TraceID()] = true
		b.WriteString("\ntrace " + s.SpanContext.TraceID().String() + ":")
		for _, x := range traceOf(exp, s.SpanContext.TraceID()) {
			b.WriteString("\n  " + x.Name + " " + x.SpanContext.SpanID().String() + " <- " + x.Parent.SpanID().String())
		}
	}
	return b.String()
}

// waitConnected waits for a connected trace whose root is rootName (see chainOK) holding a reconcile of
// objectID, and returns its id. On failure it logs the object's traces and the control plane's logs.
func waitConnected(t *testing.T, exp *tracetest.InMemoryExporter, logs *syncBuffer, rootName, storeName, objectID string) trace.TraceID {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var why string
	for time.Now().Before(deadline) {
		for _, s := range exp.GetSpans() {
			if s.Name != telemetry.ReconcileSpanPrefix+api.KindKubernetesRuntime || attr(s, string(telemetry.AttrObjectID)) != objectID {
				continue
			}
			ok, reason := chainOK(traceOf(exp, s.SpanContext.TraceID()), rootName, storeName, api.KindKubernetesRuntime, objectID)
			if ok {
				return s.SpanContext.TraceID()
			}
			why = reason
		}
		// no signal: spans are exported in batches, with no hook for "this span was exported"
		time.Sleep(50 * time.Millisecond)
	}
	t.Log(describeTraces(exp, objectID))
	t.Log(logs.String())
	t.Fatalf("no connected trace rooted at %q holds a reconcile of %s (last reason: %s)", rootName, objectID, why)
	return trace.TraceID{}
}
