// Package api holds the QleetOS v1 wire types, the kind registry (each kind described once) and the
// validation that needs no database. It imports nothing from Kubernetes; the HTTP client is package client.
//
// Every object shares one envelope (Meta, a kind-specific Spec, and a Status that embeds the common
// Status fields). The provider, the CLI, the controllers and the agent all use this package.
package api

import (
	"encoding/json"
	"time"
)

// Phase is the coarse lifecycle state of an object, as reported by its controller.
type Phase string

// The phases an object moves through. An object is reconciled when its phase is PhaseReady and its
// status.observed_generation equals its generation.
const (
	PhasePending     Phase = "Pending"
	PhaseReconciling Phase = "Reconciling"
	PhaseReady       Phase = "Ready"
	PhaseFailed      Phase = "Failed"
	PhaseDeleting    Phase = "Deleting"
)

// ConditionStatus is the truth value of a condition.
type ConditionStatus string

// Condition truth values.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition explains one aspect of an object's state: what it is, whether it holds, why, and, when the
// object waits on another, which one and since when.
type Condition struct {
	// Type names the aspect, e.g. "Ready", "Connected", "DependenciesReady".
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status"`
	// Reason is a CamelCase machine-readable cause.
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation.
	Message string `json:"message,omitempty"`
	// WaitingOn names the dependency this condition waits on, as `<kind singular> "<name>"`.
	WaitingOn string `json:"waiting_on,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time `json:"last_transition_time"`
}

// Status holds the status fields common to every kind. Kind-specific status types embed it.
type Status struct {
	// Phase is the coarse lifecycle state.
	Phase Phase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the controller last acted on.
	ObservedGeneration int64 `json:"observed_generation"`
	// Message explains the phase in one line.
	Message string `json:"message,omitempty"`
	// Conditions detail the state, one entry per aspect.
	Conditions []Condition `json:"conditions,omitempty"`
	// LastReconciledAt is when the controller last finished a reconcile of this object.
	LastReconciledAt *time.Time `json:"last_reconciled_at,omitempty"`
}

// Common returns the common status fields. Kind-specific status types inherit it by embedding Status.
func (s *Status) Common() *Status { return s }

// StatusAccessor is satisfied by a pointer to any status type that embeds Status.
type StatusAccessor interface {
	Common() *Status
}

// SetCondition adds or replaces the condition of the same type, keeping LastTransitionTime when the
// status does not change.
func (s *Status) SetCondition(c Condition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type != c.Type {
			continue
		}
		if s.Conditions[i].Status == c.Status && c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = s.Conditions[i].LastTransitionTime
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = time.Now().UTC()
		}
		s.Conditions[i] = c
		return
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = time.Now().UTC()
	}
	s.Conditions = append(s.Conditions, c)
}

// RemoveCondition drops the condition of the given type, if present.
func (s *Status) RemoveCondition(t string) {
	out := s.Conditions[:0]
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
}

// ConditionStalled is the condition type of an object whose rollout made no progress within its
// progress deadline (e.g. pods that cannot be scheduled). The object stays Reconciling, since the world
// may still heal, but waiters (WaitReconciled, the provider, the CLI) stop and report the reason.
const ConditionStalled = "Stalled"

// ConditionCleanupBlocked is the condition type of an object whose deletion cannot clean up what it made
// in the compute space (its cluster cannot be reached). Its message names what would be left behind; a
// delete with orphan abandons it. `terraform destroy` does so, and warns.
const ConditionCleanupBlocked = "CleanupBlocked"

// ReasonRuntimeUnreachable is the Ready condition's reason of an object whose deletion waits on a runtime
// whose cluster does not answer (its Connected condition is False). Its message names the runtime and
// how to orphan instead; a cascading delete that meets it stops at once with that message.
const ReasonRuntimeUnreachable = "RuntimeUnreachable"

// StalledCondition returns the Stalled condition when it is True at the given generation, else nil.
func StalledCondition(generation int64, s *Status) *Condition {
	if s.ObservedGeneration != generation {
		return nil
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == ConditionStalled && s.Conditions[i].Status == ConditionTrue {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Settled reports whether a waiter can stop: the object is reconciled, Failed, or Stalled at its
// current generation.
func Settled(generation int64, s *Status) bool {
	return s.ObservedGeneration == generation && (s.Phase == PhaseReady || s.Phase == PhaseFailed) ||
		StalledCondition(generation, s) != nil
}

// Meta is the identity and bookkeeping part of the object envelope.
type Meta struct {
	// ID is the server-assigned immutable identifier.
	ID string `json:"id,omitempty"`
	// Kind is the singular kind name, e.g. "kubernetes_runtime".
	Kind string `json:"kind,omitempty"`
	// Name is unique per kind and a DNS-1123 label.
	Name string `json:"name"`
	// Labels are free-form key/value pairs used by selectors.
	Labels map[string]string `json:"labels,omitempty"`
	// Generation increases on every spec change.
	Generation int64 `json:"generation,omitempty"`
	// ResourceVersion increases on every write. Send it as If-Match for optimistic concurrency.
	ResourceVersion int64 `json:"resource_version,omitempty"`
	// CreatedAt is when the object was created.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// UpdatedAt is when the object was last written.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// DeletionRequestedAt is set once deletion was requested; controllers then clean up.
	DeletionRequestedAt *time.Time `json:"deletion_requested_at,omitempty"`
	// DeletionOrphan is set when the deletion abandons what the object made in the compute space
	// (DELETE ?orphan=true) instead of cleaning it up.
	DeletionOrphan bool `json:"deletion_orphan,omitempty"`
	// Owners are the objects this one was created for, by a controller (a runtime provisioned for an
	// instance, say), set at creation. Once none of them remains and nothing depends on the object, it
	// is garbage-collected after a grace period. An object without owners, which a user declared, never is.
	Owners []ObjectRef `json:"owners,omitempty"`
}

// Object is the v1 envelope: identity, the desired state (Spec) and the observed state (Status).
type Object[S any, T any] struct {
	Meta
	// Spec is the desired state, written by users.
	Spec S `json:"spec"`
	// Status is the observed state, written only by controllers.
	Status T `json:"status"`
}

// RawObject is an object whose spec and status are left as JSON; the CLI and generic tools use it.
type RawObject = Object[json.RawMessage, json.RawMessage]

// Reconciled reports whether a status shows the object reconciled at the given generation: the exact
// test used by the provider, the CLI and WaitReconciled.
func Reconciled(generation int64, s *Status) bool {
	return s.Phase == PhaseReady && s.ObservedGeneration == generation
}

// List is one page of a list response.
type List[S any, T any] struct {
	// Items are the objects in this page.
	Items []Object[S, T] `json:"items"`
	// Continue is the token for the next page; empty on the last page.
	Continue string `json:"continue,omitempty"`
}

// Count is how many objects a list with the same filters returns over all its pages
// (GET /v1/{plural}/count).
type Count struct {
	// Count is the number of objects.
	Count int `json:"count"`
}

// Event records something that happened to an object and why.
type Event struct {
	// ID is the server-assigned identifier.
	ID int64 `json:"id"`
	// ObjectID is the object the event is about.
	ObjectID string `json:"object_id"`
	// Kind is the object's singular kind.
	Kind string `json:"kind"`
	// Type is "Normal" or "Warning".
	Type string `json:"type"`
	// Reason is a CamelCase machine-readable cause.
	Reason string `json:"reason"`
	// Message is a human-readable explanation.
	Message string `json:"message"`
	// Generation is the object's generation when the event happened.
	Generation int64 `json:"generation"`
	// DurationMS is how long the action took, when it is a reconcile.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Source names the reporter, e.g. "controller/kubernetes_runtime" or "agent".
	Source string `json:"source,omitempty"`
	// CreatedAt is when the event was recorded: when it first happened.
	CreatedAt time.Time `json:"created_at"`
	// Count is how many times the event happened. An identical event (same type, reason, message,
	// source and generation) within 10 minutes of the last one is counted here, as Kubernetes does,
	// rather than recorded again. Set by the server.
	Count int64 `json:"count,omitempty"`
	// FirstTimestamp is when the event first happened (equal to CreatedAt). Set by the server.
	FirstTimestamp *time.Time `json:"first_timestamp,omitempty"`
	// LastTimestamp is when the event last happened. Set by the server.
	LastTimestamp *time.Time `json:"last_timestamp,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)
