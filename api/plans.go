package api

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Plan change operations: what a PlanChange asks for.
const (
	// PlanCreate creates an object (as POST /v1/<kind>s would).
	PlanCreate = "create"
	// PlanUpdate replaces an object's labels and spec (as PUT /v1/<kind>s/{id} would).
	PlanUpdate = "update"
	// PlanDelete deletes an object (as DELETE /v1/<kind>s/{id} would, with ?cascade when Cascade is set).
	PlanDelete = "delete"
)

// Plan action types: what would happen.
const (
	// ActionCreate is a requested create.
	ActionCreate = "create"
	// ActionUpdate is a requested update that changes the spec or labels.
	ActionUpdate = "update"
	// ActionDelete is a requested delete, or one a cascade or garbage collection implies.
	ActionDelete = "delete"
	// ActionProvision is a kubernetes_runtime provisioned from a runtime_profile for a placement.
	ActionProvision = "provision"
	// ActionInstall is a support_service a controller would install on a runtime.
	ActionInstall = "install"
	// ActionRemove is a support_service that would be removed (garbage-collected after its grace period)
	// once nothing uses it.
	ActionRemove = "remove"
	// ActionDepend is a dependency created: an edge from a consumer to a provider (a reference, a
	// placement on a runtime, a support service used by a gateway).
	ActionDepend = "depend"
	// ActionRoll is a workload instance whose pods would roll because something it uses changes.
	ActionRoll = "roll"
	// ActionKeep is what outlives the plan's deletes: a runtime provisioned for a deleted instance,
	// which runs on until its profile's reclaim_after (or for good without one), or the data of a
	// database or bucket deleted with retain.
	ActionKeep = "keep"
)

// PlanUnknownPrefix starts a reference to an object known only after apply, e.g. "unknown:" for the
// definition_id of an instance whose definition Terraform has yet to create. Such a reference is
// accepted as valid; nothing is known of its object, and an instance or gateway behind one is placed
// nowhere yet.
const PlanUnknownPrefix = "unknown:"

// PlanChange is one create, update or delete to preview, with the object as it would be written.
type PlanChange struct {
	// Op is "create", "update" or "delete".
	Op string `json:"op"`
	// Kind is the object's singular kind, e.g. "workload_instance".
	Kind string `json:"kind"`
	// ID names the object of an update or delete (else Name does). For a create it is optional: a
	// placeholder that other changes of the same plan may use as a reference (e.g. an instance's
	// definition_id naming a definition created in the same plan); the plan's actions use it as the
	// created object's id. Without one, a created object's id is "planned:<kind>/<name>", and other
	// changes may reference it by that.
	ID string `json:"id,omitempty"`
	// Name is the object's name: required for a create; for an update or delete it may name the object
	// instead of ID.
	Name string `json:"name,omitempty"`
	// Labels are the object's labels (create and update).
	Labels map[string]string `json:"labels,omitempty"`
	// Spec is the object's spec as it would be written (create and update). A reference may name a
	// create of the same plan by its placeholder id, or start with PlanUnknownPrefix.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Cascade, for a delete, also deletes the objects that depend on it (DELETE ?cascade=true). Without
	// it, a delete of an object that others still depend on is refused (409 listing them), as the real
	// delete would be, unless those are deleted in the same plan.
	Cascade bool `json:"cascade,omitempty"`
}

// PlanRequest is a set of changes to preview. POST /v1/plans writes nothing: it answers what applying
// the changes, in dependency order, would make the controllers do.
type PlanRequest struct {
	// Changes are the creates, updates and deletes. Their order does not matter: the plan orders them
	// as Terraform would (creates from providers to consumers, deletes in reverse).
	Changes []PlanChange `json:"changes"`
	// Assume are changes taken as made, in the same order as Changes, without being reported: the plan
	// previews Changes in the world they make. A Terraform plan sends the objects that other resources
	// of the same run create, change or delete (e.g. the runtime_profile that an instance created with
	// it will be provisioned from), so that one resource's preview sees them. Actions requested by an
	// assumed change, or implied by one, are left out of the result, and so are its warnings. A create
	// here may be referenced by its placeholder id, like one in Changes.
	Assume []PlanChange `json:"assume,omitempty"`
}

// PlanAction is one thing that would happen, and why.
type PlanAction struct {
	// Action is create, update, delete, provision, install, remove, depend, roll or keep.
	Action string `json:"action"`
	// Kind is the kind of the object the action is about.
	Kind string `json:"kind"`
	// ID is the object's id: the existing one, or for an object the plan creates, the change's
	// placeholder or "planned:<kind>/<name>".
	ID string `json:"id"`
	// Name is the object's name (for a provisioned runtime or installed support service, the name the
	// controller would give it).
	Name string `json:"name"`
	// Requested is true for the request's own changes, false for the actions they imply.
	Requested bool `json:"requested"`
	// Region is where a runtime is provisioned, or where a placement lands.
	Region string `json:"region,omitempty"`
	// Profile is the runtime_profile a runtime is provisioned from.
	Profile string `json:"profile,omitempty"`
	// Runtime is the runtime a support service is installed on or removed from, or an instance is placed on.
	Runtime string `json:"runtime,omitempty"`
	// SupportType is the type of an installed or removed support service (ingress, cert-manager, ...).
	SupportType string `json:"support_type,omitempty"`
	// Provider is the other end of a "depend" action: the object the consumer (Kind, ID, Name) depends on.
	Provider *ObjectRef `json:"provider,omitempty"`
	// Cause is the object whose change implies this action (absent for requested ones).
	Cause *ObjectRef `json:"cause,omitempty"`
	// Reason says why, in one sentence.
	Reason string `json:"reason"`
}

// String renders the action as one line, e.g. `provision kubernetes_runtime "default-eu-west" in
// eu-west from runtime_profile "default"`.
func (a PlanAction) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %q", a.Action, a.Kind, a.Name)
	switch a.Action {
	case ActionProvision:
		fmt.Fprintf(&b, " in %s from runtime_profile %q", a.Region, a.Profile)
	case ActionInstall, ActionRemove:
		fmt.Fprintf(&b, " (%s) on kubernetes_runtime %q", a.SupportType, a.Runtime)
	case ActionDepend:
		if a.Provider != nil {
			fmt.Fprintf(&b, " on %s", a.Provider)
		}
	}
	if a.Reason != "" {
		b.WriteString(": ")
		b.WriteString(a.Reason)
	}
	return b.String()
}

// PlanResult is what a plan would do.
type PlanResult struct {
	// Actions are in the order they would happen: providers before consumers, deletes of consumers
	// before their providers.
	Actions []PlanAction `json:"actions"`
	// Graph is the part of the dependency graph the plan touches, as it would be after the changes:
	// existing objects with their state, planned ones (ids from Actions) with phase Pending, and the
	// edges between them, new ones included.
	Graph Graph `json:"graph"`
	// Warnings say what the controllers could not do, e.g. a placement region that no runtime and no
	// runtime_profile serves (the instance would wait there).
	Warnings []string `json:"warnings,omitempty"`
}

// Implied returns the actions beyond the request's own changes (Requested false).
func (p *PlanResult) Implied() []PlanAction {
	var out []PlanAction
	for _, a := range p.Actions {
		if !a.Requested {
			out = append(out, a)
		}
	}
	return out
}

// ChangeOf builds a change for a typed object: its id, name, labels and spec, as the write would send them.
func ChangeOf[S any, T any](op, kind string, o *Object[S, T]) (PlanChange, error) {
	ch := PlanChange{Op: op, Kind: kind, ID: o.ID, Name: o.Name, Labels: o.Labels}
	if op == PlanDelete {
		return ch, nil
	}
	spec, err := json.Marshal(o.Spec)
	if err != nil {
		return PlanChange{}, fmt.Errorf("encode %s %q spec: %w", kind, o.Name, err)
	}
	ch.Spec = spec
	return ch, nil
}

// Summary describes the implied actions in lines such as `will provision kubernetes_runtime
// "default-eu-west" in eu-west from runtime_profile "default"` and `will install support_service ingress,
// cert-manager on kubernetes_runtime "default-eu-west"` (grouped by runtime), followed by the warnings.
// Requested changes and dependencies are left out.
func (p *PlanResult) Summary() []string {
	type group struct {
		action, runtime string
		types           []string
	}
	var lines []any // a string, or a *group rendered at the end
	groups := map[string]*group{}
	for _, a := range p.Actions {
		if a.Requested {
			continue
		}
		switch a.Action {
		case ActionProvision:
			lines = append(lines, fmt.Sprintf("will provision %s %q in %s from runtime_profile %q", a.Kind, a.Name, a.Region, a.Profile))
		case ActionInstall, ActionRemove:
			key := a.Action + "/" + a.Runtime
			if g, ok := groups[key]; ok {
				g.types = append(g.types, a.SupportType)
				continue
			}
			g := &group{action: a.Action, runtime: a.Runtime, types: []string{a.SupportType}}
			groups[key] = g
			lines = append(lines, g)
		case ActionRoll:
			lines = append(lines, fmt.Sprintf("will roll %s %q (%s)", a.Kind, a.Name, a.Reason))
		case ActionDelete:
			lines = append(lines, fmt.Sprintf("will delete %s %q (%s)", a.Kind, a.Name, a.Reason))
		case ActionKeep:
			lines = append(lines, fmt.Sprintf("will keep %s %q: %s", a.Kind, a.Name, a.Reason))
		}
	}
	var out []string
	for _, l := range lines {
		switch l := l.(type) {
		case string:
			out = append(out, l)
		case *group:
			prep := "on"
			if l.action == ActionRemove {
				prep = "from"
			}
			out = append(out, fmt.Sprintf("will %s %s %s %s kubernetes_runtime %q", l.action, KindSupportService, strings.Join(l.types, ", "), prep, l.runtime))
		}
	}
	for _, w := range p.Warnings {
		out = append(out, "note: "+w)
	}
	return out
}
