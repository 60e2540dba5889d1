package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/reconcile"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry/tracing"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
)

// seen is what one reconcile saw of its own span.
type seen struct {
	name  string
	sc    trace.SpanContext
	links []sdktrace.Link
}

// linkedTo returns the link of the given reason, if any.
func (s seen) linkedTo(reason string) (trace.SpanContext, bool) {
	for _, l := range s.links {
		for _, a := range l.Attributes {
			if a == attribute.String("qleet.link", reason) {
				return l.SpanContext, true
			}
		}
	}
	return trace.SpanContext{}, false
}

// TestRequeuedAndTakenOverReconcilesLinkToTheOriginal is not parallel: it installs the process's tracer
// provider.
func TestRequeuedAndTakenOverReconcilesLinkToTheOriginal(t *testing.T) {
	tr, err := tracing.Setup(context.Background(), tracing.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	b := setup(t, setupOpts{})

	var (
		mu       sync.Mutex
		calls    []seen
		requeued bool
		block    = make(chan struct{})
		blocked  = make(chan struct{}, 1)
	)
	ctrl, _ := b.runWith(t, b.client, recFunc(func(ctx context.Context, obj *defObj) (reconcile.Result, error) {
		span := trace.SpanFromContext(ctx)
		rw, ok := span.(sdktrace.ReadWriteSpan)
		require.True(t, ok, "the reconcile runs in a recorded span")
		mu.Lock()
		calls = append(calls, seen{name: obj.Name, sc: span.SpanContext(), links: rw.Links()})
		first := obj.Name == "requeued" && !requeued
		requeued = requeued || obj.Name == "requeued"
		mu.Unlock()
		switch {
		case first:
			return reconcile.Result{RequeueAfter: 20 * time.Millisecond}, nil
		case obj.Name == "busy" && obj.Generation == 1:
			select {
			case blocked <- struct{}{}:
				<-block
			default:
			}
		}
		return reconcile.Result{}, nil
	}), reconcile.Config{Workers: 4, LockRetry: time.Hour, ResyncInterval: time.Hour})
	// Warm up: the controller's first resync pass may notify objects created right after it starts.
	_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), b.createDef(t, "warm-up").ID)
	require.NoError(t, err)
	reset := func() {
		mu.Lock()
		calls = nil
		mu.Unlock()
	}
	// snapshot returns the reconciles of one object so far.
	snapshot := func(name string) []seen {
		mu.Lock()
		defer mu.Unlock()
		var out []seen
		for _, c := range calls {
			if c.name == name {
				out = append(out, c)
			}
		}
		return out
	}

	t.Run("a requeued reconcile starts a trace of its own that links to the one that requeued it", func(t *testing.T) {
		reset()
		ctx, span := telemetry.Start(context.Background(), "test create")
		obj, err := b.client.WorkloadDefinitions().Create(ctx, &defObj{Meta: defMeta("requeued", nil),
			Spec: api.WorkloadDefinitionSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}})
		span.End()
		require.NoError(t, err)
		_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
		require.NoError(t, err)
		// The requeue's notification comes 20ms later (or is taken over, if the first reconcile still
		// holds the object): either way its reconcile links to the one that asked for it.
		var got []seen
		linked := func() bool {
			got = snapshot("requeued")
			if len(got) < 2 {
				return false
			}
			for _, c := range got[1:] {
				if l, ok := c.linkedTo("requeued by"); ok && l.SpanID() == got[0].sc.SpanID() {
					return true
				}
			}
			return false
		}
		if err := await.Until(context.Background(), 10*time.Second, func(context.Context) error {
			if !linked() {
				return await.ErrNotYet
			}
			return nil
		}); err != nil {
			for _, c := range got {
				t.Logf("%s %s links %v", c.name, c.sc.SpanID(), c.links)
			}
			t.Fatal("no reconcile links to the one that requeued it")
		}
		require.Equal(t, span.SpanContext().TraceID(), got[0].sc.TraceID(), "the first reconcile continues the create's trace")
		for _, c := range got[1:] {
			if _, ok := c.linkedTo("requeued by"); ok {
				require.NotEqual(t, got[0].sc.TraceID(), c.sc.TraceID(), "the requeued reconcile is a trace of its own")
			}
		}
	})

	t.Run("a change taken over by a running reconcile continues the change's trace and links to it", func(t *testing.T) {
		reset()
		obj := b.createDef(t, "busy")
		select {
		case <-blocked:
		case <-time.After(10 * time.Second):
			t.Fatal("the first reconcile never started")
		}
		ctx, span := telemetry.Start(context.Background(), "test update")
		obj.Spec.Containers[0].Image = "nginx:1.28"
		_, err := b.client.WorkloadDefinitions().Update(ctx, obj)
		span.End()
		require.NoError(t, err)
		await.True(t, 10*time.Second, func() bool { return ctrl.HandedOver(obj.ID) >= 1 }, "the update's notification handed to the worker that holds the object")
		close(block)
		_, err = b.client.WorkloadDefinitions().WaitReconciled(waitCtx(t, 10*time.Second), obj.ID)
		require.NoError(t, err)
		got := snapshot("busy")
		require.GreaterOrEqual(t, len(got), 2)
		last := got[len(got)-1]
		require.Equal(t, span.SpanContext().TraceID(), last.sc.TraceID(), "the reconcile of the update is in the update's trace")
		link, ok := last.linkedTo("taken over by")
		require.True(t, ok, "links: %v", last.links)
		require.Equal(t, got[0].sc.SpanID(), link.SpanID())
	})
}
