package reconcile

import (
	"context"
	"fmt"
	"sync"
)

type recorderKey struct{}

// recorder collects the events a reconciler emits during one reconcile; the runtime appends them.
type recorder struct {
	mu     sync.Mutex
	events []emitted
}

type emitted struct{ typ, reason, message string }

// Eventf records an event on the object being reconciled, e.g. Eventf(ctx, api.EventNormal,
// "DriftCorrected", "restored Deployment %q", name). The runtime appends it after the reconcile. Outside a
// reconcile it does nothing.
func Eventf(ctx context.Context, eventType, reason, format string, args ...any) {
	r, ok := ctx.Value(recorderKey{}).(*recorder)
	if !ok {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, emitted{typ: eventType, reason: reason, message: fmt.Sprintf(format, args...)})
	r.mu.Unlock()
}

func withRecorder(ctx context.Context) (context.Context, *recorder) {
	r := &recorder{}
	return context.WithValue(ctx, recorderKey{}, r), r
}

func (r *recorder) drain() []emitted {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}
