// Package reconcile is the one reconcile runtime every controller uses. It owns the queue (a durable
// JetStream consumer per kind), per-object locks, fetching the latest object, status writes with
// observed generation and If-Match, backoff, panic recovery, per-reconcile timeouts, heartbeats, resync
// and events. Controller packages hold business logic only: they implement Reconciler.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/qleetos/terraform-provider-qleet/api"
)

// Result tells the runtime what to do after a successful reconcile.
type Result struct {
	// RequeueAfter, when non-zero, reconciles the object again after this delay. The object's phase stays
	// Reconciling (unless the reconciler set another), because work remains.
	RequeueAfter time.Duration
	// Recheck, when non-zero with a zero RequeueAfter, reconciles the object again after this delay while
	// it stays Ready: for work that watches the world rather than converging to a spec (node autoscaling,
	// reclaiming an idle runtime, retrying a cleanup on a cluster that was unreachable).
	Recheck time.Duration
	// Stalled, when set, says the object's rollout made no progress within its deadline. The runtime
	// records a Stalled condition (and a Warning event when it is new), which makes waiters stop with
	// the reason; the object stays Reconciling and is still requeued. Any outcome without it clears the
	// condition.
	Stalled *Stall
	// Notify names objects to notify once the reconcile's status is written (or found unchanged): those
	// that read what it writes and that nothing else tells of the change, such as the data services an
	// instance uses, which serve it on the runtimes its status lists. Notified before, they could read
	// the old status and miss the change. Notified through the API (its outbox), so that no notification
	// is lost with the broker.
	Notify []api.ObjectRef
}

// Stall explains a stalled rollout.
type Stall struct {
	// Reason is a CamelCase cause, e.g. "Unschedulable" or "ProgressDeadlineExceeded".
	Reason string
	// Message says what is stuck and why, e.g. the scheduler's message.
	Message string
}

// Reconciler converges the world to one object's spec. The runtime passes the latest object fetched from
// the API; Reconcile may update obj.Status's kind-specific fields and conditions, and the runtime writes
// them back together with phase, observed generation and message. It must be idempotent.
//
// Returning nil with a zero Result means done: the object becomes Ready. A plain error is retried with
// exponential backoff; a Terminal error marks the object Failed until its spec changes; a Wait error
// says the object waits on a dependency.
type Reconciler[S any, T any] interface {
	Reconcile(ctx context.Context, obj *api.Object[S, T]) (Result, error)
}

// Finalizer is implemented by reconcilers that must clean up before an object is deleted. Finalize is
// called (with the same outcome rules) while deletion is requested; on nil with a zero Result the runtime
// releases the object and the row goes. Reconcilers without it have their objects released at once.
type Finalizer[S any, T any] interface {
	Finalize(ctx context.Context, obj *api.Object[S, T]) (Result, error)
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc[S any, T any] func(ctx context.Context, obj *api.Object[S, T]) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc[S, T]) Reconcile(ctx context.Context, obj *api.Object[S, T]) (Result, error) {
	return f(ctx, obj)
}

// terminalError marks an error as permanent.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal wraps err so that the object goes Failed with err's message and is not retried until its
// spec changes.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err was marked Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// WaitError says the object cannot progress until a dependency does. The runtime records a condition
// naming the dependency and how long it has waited, keeps the phase Reconciling, and requeues.
type WaitError struct {
	// On names the dependency, e.g. `kubernetes_runtime "us-east"`.
	On string
	// State is the dependency's state, e.g. its phase "Provisioning".
	State string
	// Reason is a CamelCase cause, e.g. "RuntimeNotReady".
	Reason string
	// After is when to look again (default 5s). Dependency status changes also requeue at once. A
	// negative After (OnNotification) looks again only when notified: the object waits on something whose
	// change notifies it (a dependency it references), and no timer runs while it waits.
	After time.Duration
	// Kinds, when set, also end the wait as soon as an object of one of these kinds is written: created,
	// its spec or labels changed, its deletion requested, or an object it owns changed readiness. It
	// serves a wait on something that no object references yet, whose change therefore notifies nobody
	// (a runtime in a region that none serves). The controller must follow these kinds (Config.WakeOn);
	// After still applies, as a fallback for what no write announces.
	Kinds []string
}

// OnNotification is a WaitError.After that sets no timer: the wait ends when the dependency's status
// change notifies the waiting object.
const OnNotification time.Duration = -1

func (e *WaitError) Error() string { return fmt.Sprintf("waiting for %s (%s)", e.On, e.state()) }

// message is the status message of the wait, with how long it has lasted.
func (e *WaitError) message(since time.Duration) string {
	return fmt.Sprintf("waiting for %s (%s, %s)", e.On, e.state(), since)
}

// state is State as a waiting message may say it: a wait is never on something that is Ready, so a
// dependency's phase passed as it stands says what holds it instead. A bare "Ready" is a phase of an
// older generation (its latest change is not reconciled yet); "Ready on ..." is how it stands elsewhere
// (reconciled there); an empty state is a dependency that has not been reconciled at all.
func (e *WaitError) state() string {
	st := strings.TrimSpace(e.State)
	rest, ready := cutWord(st, string(api.PhaseReady))
	switch {
	case st == "":
		return "not reconciled yet"
	case ready && rest == "":
		return "its latest change is not reconciled yet"
	case ready:
		return "reconciled" + rest
	}
	return st
}

// cutWord cuts word from the start of s, whatever its case, when a letter does not follow it.
func cutWord(s, word string) (string, bool) {
	if len(s) < len(word) || !strings.EqualFold(s[:len(word)], word) {
		return s, false
	}
	rest := s[len(word):]
	if rest != "" && unicode.IsLetter(rune(rest[0])) {
		return s, false
	}
	return rest, true
}

// Wait returns a *WaitError.
func Wait(on, state, reason string, after time.Duration) error {
	return &WaitError{On: on, State: state, Reason: reason, After: after}
}
