package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/placement"
	"github.com/qleetos/terraform-provider-qleet/controlplane/requirements"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// maxPlanChanges bounds the changes of one plan.
const maxPlanChanges = 500

// plannedPrefix starts the id of an object a plan creates, unless the change names a placeholder.
const plannedPrefix = "planned:"

// plan serves POST /v1/plans: it validates the changes exactly as their writes would (a 400 naming the
// field under changes[i]., a 409 for a delete that others depend on), applies them to an in-memory view
// of the store, runs the controllers' own pure decisions (placement.Decide, requirements.ForGateway) on
// that view, and answers with the actions and the graph. It writes nothing.
func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	data, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.PlanRequest
	if err := decodeStrict(data, &req, ""); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.preview(r.Context(), &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// planView is the store as it would be after a plan's changes: every object read once, with the plan's
// creates, updates and deletes applied in memory. It is the objectView that check validates against.
type planView struct {
	objs    map[string]*store.Object // by id
	order   []string                 // ids, in the order read and created
	deleted map[string]bool          // ids the plan deletes
	planned map[string]bool          // ids the plan creates (requested or implied)
	changed map[string]bool          // ids whose spec the plan changes (creates and updates)
	rules   *writeRules              // the server's limits on writes
}

func (v *planView) writeRules() *writeRules { return v.rules }

func (v *planView) lookup(_ context.Context, kind, id string) (*store.Object, error) {
	if strings.HasPrefix(id, api.PlanUnknownPrefix) {
		// Known only after apply (Terraform's plan of a resource whose reference is not created yet):
		// it exists, with nothing known about it, and runs nowhere yet.
		return &store.Object{ID: id, Kind: kind, Name: "(known after apply)"}, nil
	}
	o, ok := v.objs[id]
	if !ok || o.Kind != kind {
		return nil, fmt.Errorf("%s %s: %w", kind, id, store.ErrNotFound)
	}
	return o, nil
}

func (v *planView) peers(_ context.Context, ki *api.KindInfo, self string) ([]api.NamedSpec, error) {
	var out []api.NamedSpec
	for _, o := range v.each(ki.Kind) {
		spec := ki.NewSpec()
		if o.Name != self && json.Unmarshal(o.Spec, spec) == nil {
			out = append(out, api.NamedSpec{Name: o.Name, Spec: spec})
		}
	}
	return out, nil
}

// each returns the live objects of a kind (not being deleted, not deleted by the plan), in order.
func (v *planView) each(kind string) []*store.Object {
	var out []*store.Object
	for _, id := range v.order {
		if o := v.objs[id]; o != nil && o.Kind == kind && o.DeletionRequestedAt == nil && !v.deleted[id] {
			out = append(out, o)
		}
	}
	return out
}

func (v *planView) byName(kind, name string) *store.Object {
	for _, id := range v.order {
		if o := v.objs[id]; o != nil && o.Kind == kind && o.Name == name {
			return o
		}
	}
	return nil
}

func (v *planView) add(o *store.Object) {
	v.objs[o.ID] = o
	v.order = append(v.order, o.ID)
	v.planned[o.ID] = true
	v.changed[o.ID] = true
}

func (v *planView) ref(id string) *api.ObjectRef {
	o := v.objs[id]
	if o == nil {
		return nil
	}
	return &api.ObjectRef{Kind: o.Kind, ID: o.ID, Name: o.Name}
}

// dependents returns the ids of the live objects that depend on id: by a spec reference or a status
// reference (a placement, a support service in use), as the store's reference rows would say. Owners do
// not protect what they own.
func (v *planView) dependents(id string) []string {
	// e.From is the object, or the user its own spec attaches it to (KindInfo.UsedBy): either must be live.
	return v.referrers(id, func(from string) bool { return !v.deleted[from] })
}

// users returns the ids of the objects that depend on id, live or not, as the store's reference rows
// name them while a delete runs (Server.dependents, with the users the object's spec attaches it to).
func (v *planView) users(id string) []string {
	return v.referrers(id, func(from string) bool { return from != id })
}

// referrers returns the ids of the objects in the view with a non-owner edge to id that keep accepts.
func (v *planView) referrers(id string, keep func(from string) bool) []string {
	var out []string
	for _, oid := range v.order {
		o := v.objs[oid]
		if o == nil {
			continue
		}
		ki, ok := api.LookupKind(o.Kind)
		if !ok {
			continue
		}
		for _, e := range graphEdges(ki, o) {
			if e.To == id && e.Type != api.EdgeOwner && v.objs[e.From] != nil && keep(e.From) && !slices.Contains(out, e.From) {
				out = append(out, e.From)
			}
		}
	}
	return out
}

// tooDeep walks a cascading delete as Server.requestDeletion does (depth first, each object once it is
// marked, objects already being deleted skipped) and reports whether it reaches maxCascadeDepth.
func (p *planner) tooDeep(id string, depth int, marked map[string]bool, budget *int) bool {
	o := p.view.objs[id]
	if o == nil || o.DeletionRequestedAt != nil || marked[id] || *budget <= 0 {
		return false
	}
	*budget--
	if depth >= maxCascadeDepth {
		return true
	}
	for _, d := range p.view.users(id) {
		if p.tooDeep(d, depth+1, marked, budget) {
			return true
		}
	}
	marked[id] = true
	return false
}

// gone reports whether an object is absent, being deleted or deleted by the plan.
func (v *planView) gone(id string) bool {
	o := v.objs[id]
	return o == nil || o.DeletionRequestedAt != nil || v.deleted[id]
}

// planner builds one plan.
type planner struct {
	view    *planView
	actions []api.PlanAction
	edges   []api.GraphEdge // edges the plan adds that the view's objects do not show (placements, uses)
	// placed are the runtimes each instance the plan (re)places runs on.
	placed map[string][]api.PlacementStatus
	// homed are the data services whose home the plan has previewed.
	homed map[string]bool
	// uses are the support services each gateway the plan touches would use.
	uses map[string][]string
	// warnings say what the controllers could not do.
	warnings []string
	// assumed are the ids of the request's assumed changes: what they do is not reported.
	assumed map[string]bool
}

// warn records a warning about an object, unless an assumed change made it.
func (p *planner) warn(about string, msg string) {
	if !p.assumed[about] {
		p.warnings = append(p.warnings, msg)
	}
}

// decodedChange is a change that decoded: its kind, spec and target.
type decodedChange struct {
	at   string // where the request holds it: "changes[i]" or "assume[i]"
	ch   *api.PlanChange
	ki   *api.KindInfo
	spec any // a pointer to the kind's spec type (create and update)
	id   string
	cur  *store.Object // the object an update or delete targets
}

// preview computes the plan for req.
func (s *Server) preview(ctx context.Context, req *api.PlanRequest) (*api.PlanResult, error) {
	if n := len(req.Changes) + len(req.Assume); n > maxPlanChanges {
		return nil, invalid("changes", fmt.Sprintf("at most %d changes per plan, assumed ones included (got %d)", maxPlanChanges, n))
	}
	view := &planView{objs: map[string]*store.Object{}, deleted: map[string]bool{}, planned: map[string]bool{}, changed: map[string]bool{},
		rules: s.writeRules()}
	for _, ki := range api.Kinds() {
		if err := s.eachObject(ctx, ki, func(o *store.Object) {
			view.objs[o.ID] = o
			view.order = append(view.order, o.ID)
		}); err != nil {
			return nil, err
		}
	}
	p := &planner{view: view, placed: map[string][]api.PlacementStatus{}, homed: map[string]bool{}, uses: map[string][]string{}, assumed: map[string]bool{}}
	changes, err := p.decode(req.Changes, req.Assume)
	if err != nil {
		return nil, err
	}
	for _, dc := range changes {
		if strings.HasPrefix(dc.at, "assume") {
			p.assumed[dc.id] = true
		}
	}
	var fes []api.FieldError
	var deletes []*decodedChange
	for _, dc := range orderWrites(changes) {
		if dc.ch.Op == api.PlanDelete {
			deletes = append(deletes, dc)
			continue
		}
		if err := p.write(ctx, dc); err != nil {
			var ce *api.Error
			if errors.As(err, &ce) && ce.Code == api.CodeInvalid {
				fes = append(fes, ce.Fields...)
				if dc.cur == nil {
					// Its references resolve, so that what refers to it reports only its own errors.
					view.objs[dc.id] = &store.Object{ID: dc.id, Kind: dc.ki.Kind, Name: dc.ch.Name}
				}
				continue
			}
			return nil, err
		}
	}
	if len(fes) > 0 {
		return nil, api.Invalid(fes...)
	}
	if err := p.deleteAll(deletes); err != nil {
		return nil, err
	}
	p.place()
	p.follow()
	p.gateways()
	p.autoscalers()
	p.rolls(changes)
	p.removals()
	p.keeps()
	return &api.PlanResult{Actions: p.reported(), Graph: p.graph(), Warnings: p.warnings}, nil
}

// reported are the actions the result shows: all of them, but for those of assumed changes (requested
// by one, or implied by one, through any chain of causes).
func (p *planner) reported() []api.PlanAction {
	cause := map[string]string{}
	for _, a := range p.actions {
		// Only what an action brings about or takes away has a cause of its own to follow.
		made := a.Action == api.ActionProvision || a.Action == api.ActionInstall || a.Action == api.ActionDelete || a.Action == api.ActionRemove
		if a.Cause != nil && !a.Requested && made {
			if _, ok := cause[a.ID]; !ok {
				cause[a.ID] = a.Cause.ID
			}
		}
	}
	fromAssumed := func(id string) bool {
		for range len(cause) + 1 {
			if p.assumed[id] {
				return true
			}
			next, ok := cause[id]
			if !ok {
				return false
			}
			id = next
		}
		return false
	}
	out := []api.PlanAction{}
	for _, a := range p.actions {
		if a.Requested && p.assumed[a.ID] || a.Cause != nil && fromAssumed(a.Cause.ID) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// inChange puts a change's errors under changes[i]: its fields, or its message.
func inChange(prefix string, err error) error {
	var ce *api.Error
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Code == api.CodeInvalid && len(ce.Fields) > 0 {
		fields := make([]api.FieldError, len(ce.Fields))
		for k, f := range ce.Fields {
			fields[k] = api.FieldError{Field: prefix + "." + f.Field, Message: f.Message}
		}
		return api.Invalid(fields...)
	}
	out := *ce
	if out.Field != "" {
		out.Field = prefix + "." + out.Field
	}
	if out.Code == api.CodeInvalid && out.Field != "" {
		return api.Invalid(api.FieldError{Field: out.Field, Message: ce.Message})
	}
	out.Message = prefix + ": " + ce.Message
	return &out
}

// decode checks each change's shape: op, kind, target, and the object strictly decoded as its write would be.
// Assumed changes come first, as they are taken as made before the changes.
func (p *planner) decode(changes, assume []api.PlanChange) ([]*decodedChange, error) {
	var out []*decodedChange
	var fes []api.FieldError
	created := map[string]bool{}
	type listed struct {
		at string
		ch *api.PlanChange
	}
	var all []listed
	for i := range assume {
		all = append(all, listed{fmt.Sprintf("assume[%d]", i), &assume[i]})
	}
	for i := range changes {
		all = append(all, listed{fmt.Sprintf("changes[%d]", i), &changes[i]})
	}
	for _, l := range all {
		dc, err := p.decodeOne(l.at, l.ch, created)
		if err != nil {
			var ce *api.Error
			if errors.As(err, &ce) && ce.Code == api.CodeInvalid {
				fes = append(fes, ce.Fields...)
				continue
			}
			return nil, err
		}
		out = append(out, dc)
	}
	if len(fes) > 0 {
		return nil, api.Invalid(fes...)
	}
	return out, nil
}

func (p *planner) decodeOne(at string, ch *api.PlanChange, created map[string]bool) (*decodedChange, error) {
	field := func(f, msg string) error {
		return api.Invalid(api.FieldError{Field: at + "." + f, Message: msg})
	}
	ki, ok := api.LookupKind(ch.Kind)
	if !ok {
		ki, ok = api.LookupPlural(ch.Kind)
	}
	if !ok {
		return nil, field("kind", fmt.Sprintf("unknown kind %q", ch.Kind))
	}
	dc := &decodedChange{at: at, ch: ch, ki: ki}
	switch ch.Op {
	case api.PlanCreate:
		dc.id = ch.ID
		if dc.id == "" {
			dc.id = plannedPrefix + ki.Kind + "/" + ch.Name
		}
		if _, exists := p.view.objs[dc.id]; exists {
			return nil, field("id", fmt.Sprintf("%q is the id of an existing object; a create's id is a placeholder for the new one", ch.ID))
		}
		if created[dc.id] {
			return nil, field("id", fmt.Sprintf("%q is the id of another create in this plan", dc.id))
		}
		created[dc.id] = true
	case api.PlanUpdate, api.PlanDelete:
		switch {
		case ch.ID != "":
			dc.cur = p.view.objs[ch.ID]
			if dc.cur != nil && dc.cur.Kind != ki.Kind {
				dc.cur = nil
			}
		case ch.Name != "":
			dc.cur = p.view.byName(ki.Kind, ch.Name)
		default:
			return nil, field("id", "is required for an update or delete (or name the object)")
		}
		if dc.cur == nil {
			return nil, inChange(at, api.Errorf(api.CodeNotFound, "%s %q not found", ki.Kind, cmpOr(ch.ID, ch.Name)))
		}
		dc.id = dc.cur.ID
		if ch.Op == api.PlanDelete {
			return dc, nil
		}
		if ch.Name != "" && ch.Name != dc.cur.Name {
			return nil, field("name", fmt.Sprintf("is immutable (the object is named %q)", dc.cur.Name))
		}
	default:
		return nil, field("op", fmt.Sprintf("must be %q, %q or %q, not %q", api.PlanCreate, api.PlanUpdate, api.PlanDelete, ch.Op))
	}
	name := ch.Name
	if ch.Op == api.PlanUpdate {
		name = dc.cur.Name
	}
	body, err := json.Marshal(writeBody{Name: name, Labels: ch.Labels, Spec: ch.Spec})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", at, err)
	}
	var wb writeBody
	spec, err := decodeWrite(ki, body, &wb)
	if err != nil {
		return nil, inChange(at, err)
	}
	dc.spec = spec
	return dc, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// orderWrites orders creates so that each comes after the creates it references (as Terraform would
// apply them), then updates, then deletes, each in request order otherwise.
func orderWrites(changes []*decodedChange) []*decodedChange {
	creates := map[string]*decodedChange{}
	for _, dc := range changes {
		if dc.ch.Op == api.PlanCreate {
			creates[dc.id] = dc
		}
	}
	var out []*decodedChange
	done := map[*decodedChange]bool{}
	visiting := map[*decodedChange]bool{}
	var visit func(dc *decodedChange)
	visit = func(dc *decodedChange) {
		if done[dc] || visiting[dc] {
			return // a cycle: its reference fails as not found, as a write would
		}
		visiting[dc] = true
		if dc.spec != nil {
			for _, r := range dc.ki.Refs(dc.spec) {
				if dep := creates[r.ID]; dep != nil {
					visit(dep)
				}
			}
		}
		done[dc] = true
		out = append(out, dc)
	}
	for _, op := range []string{api.PlanCreate, api.PlanUpdate, api.PlanDelete} {
		for _, dc := range changes {
			if dc.ch.Op == op {
				visit(dc)
			}
		}
	}
	return out
}

// write validates a create or update against the view, as the write would, and applies it there.
func (p *planner) write(ctx context.Context, dc *decodedChange) error {
	v, ch, ki := p.view, dc.ch, dc.ki
	name := ch.Name
	if dc.cur != nil {
		name = dc.cur.Name
		if dc.cur.DeletionRequestedAt != nil {
			return inChange(dc.at, api.Errorf(api.CodeConflict, "%s %q is being deleted", ki.Kind, name))
		}
	}
	subj := subject{id: dc.id, name: name}
	if dc.cur != nil {
		subj = subjectOf(dc.cur)
	}
	c, err := checkIn(ctx, v, ki, subj, ch.Labels, dc.spec)
	if err != nil {
		return inChange(dc.at, err)
	}
	self := &api.ObjectRef{Kind: ki.Kind, ID: dc.id, Name: name}
	before := map[string]bool{}
	if dc.cur == nil {
		if other := v.byName(ki.Kind, name); other != nil {
			return inChange(dc.at, api.Errorf(api.CodeConflict, "%s name %q already taken", ki.Kind, name))
		}
		status, err := initialStatus(ki)
		if err != nil {
			return err
		}
		v.add(&store.Object{ID: dc.id, Kind: ki.Kind, Name: name, Labels: ch.Labels, Generation: 1, Spec: c.spec, Status: status, CreatedAt: time.Now().UTC()})
		p.actions = append(p.actions, api.PlanAction{Action: api.ActionCreate, Kind: ki.Kind, ID: dc.id, Name: name, Requested: true,
			Reason: "requested"})
	} else {
		for _, r := range ki.Refs(decodeSpec(ki, dc.cur.Spec)) {
			before[r.ID] = true
		}
		specChanged := !sameJSON(ki, dc.cur.Spec, c.spec)
		labelsChanged := !sameLabels(dc.cur.Labels, ch.Labels)
		if !specChanged && !labelsChanged {
			return nil
		}
		next := *dc.cur
		next.Spec, next.Labels = c.spec, ch.Labels
		reason := "labels change"
		if specChanged {
			next.Generation++
			reason = fmt.Sprintf("spec changes (generation %d → %d)", dc.cur.Generation, next.Generation)
			v.changed[dc.id] = true
		}
		v.objs[dc.id] = &next
		p.actions = append(p.actions, api.PlanAction{Action: api.ActionUpdate, Kind: ki.Kind, ID: dc.id, Name: name, Requested: true, Reason: reason})
	}
	for _, r := range ki.Refs(dc.spec) {
		if before[r.ID] {
			continue
		}
		p.depend(self, v.ref(r.ID), "", fmt.Sprintf("%s references it", r.Field), api.EdgeReference, r.Field, self)
	}
	return nil
}

// depend records a dependency created: consumer → provider.
func (p *planner) depend(consumer, provider *api.ObjectRef, region, reason, edgeType, why string, cause *api.ObjectRef) {
	if provider == nil {
		return
	}
	a := api.PlanAction{Action: api.ActionDepend, Kind: consumer.Kind, ID: consumer.ID, Name: consumer.Name, Provider: provider,
		Region: region, Reason: reason, Cause: cause}
	if provider.Kind == api.KindKubernetesRuntime {
		a.Runtime = provider.Name
	}
	p.actions = append(p.actions, a)
	p.edges = append(p.edges, api.GraphEdge{From: consumer.ID, To: provider.ID, Type: edgeType, Why: why})
}

func decodeSpec(ki *api.KindInfo, raw json.RawMessage) any {
	spec := ki.NewSpec()
	_ = json.Unmarshal(raw, spec)
	return spec
}

// sameJSON compares two specs of a kind in their canonical encoding.
func sameJSON(ki *api.KindInfo, a, b json.RawMessage) bool {
	ea, err1 := json.Marshal(decodeSpec(ki, a))
	eb, err2 := json.Marshal(decodeSpec(ki, b))
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// deleteAll applies the deletes: an object others still depend on (beyond what the plan deletes too, and
// what garbage collection would take) is refused with 409 listing them, unless the change cascades.
// Consumers are deleted before their providers.
func (p *planner) deleteAll(deletes []*decodedChange) error {
	v := p.view
	cascade := map[string]bool{}
	requested := map[string]bool{}
	for _, dc := range deletes {
		v.deleted[dc.id] = true
		requested[dc.id] = true
		if dc.ch.Cascade {
			cascade[dc.id] = true
		}
	}
	// Cascades and garbage take the dependents with them.
	implied := map[string]*api.ObjectRef{} // id -> the object whose delete takes it
	var queue []string
	for _, dc := range deletes {
		queue = append(queue, dc.id)
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		deps := v.dependents(id)
		if len(deps) == 0 {
			continue
		}
		if !cascade[id] && !p.allGarbage(deps) {
			dc := deleteChange(deletes, id, implied)
			refs := make([]api.ObjectRef, 0, len(deps))
			for _, d := range deps {
				refs = append(refs, *v.ref(d))
			}
			msg := "object has dependents; delete them first or delete with cascade=true"
			if dc != nil {
				msg = fmt.Sprintf("%s: %s", dc.at, msg)
			}
			return &api.Error{Code: api.CodeConflict, Message: msg, Dependents: refs}
		}
		for _, d := range deps {
			v.deleted[d] = true
			implied[d] = v.ref(id)
			if cascade[id] {
				cascade[d] = true
			}
			queue = append(queue, d)
		}
	}
	// The real cascade walks the dependents depth first and refuses to go deeper than maxCascadeDepth.
	marked, budget := map[string]bool{}, 100000
	for _, dc := range deletes {
		if dc.ch.Cascade && p.tooDeep(dc.id, 0, marked, &budget) {
			return &api.Error{Code: api.CodeConflict, Message: fmt.Sprintf("%s: cascading delete deeper than %d levels", dc.at, maxCascadeDepth)}
		}
	}
	// Emit consumers before providers.
	emitted := map[string]bool{}
	var emit func(id string)
	emit = func(id string) {
		if emitted[id] {
			return
		}
		emitted[id] = true
		for _, oid := range v.order {
			if !v.deleted[oid] || emitted[oid] {
				continue
			}
			if o := v.objs[oid]; o != nil && dependsOn(o, id) {
				emit(oid)
			}
		}
		o := v.objs[id]
		a := api.PlanAction{Action: api.ActionDelete, Kind: o.Kind, ID: id, Name: o.Name, Requested: requested[id], Reason: "requested"}
		if o.DeletionRequestedAt != nil {
			a.Reason = "already being deleted"
		}
		if by := implied[id]; by != nil && !requested[id] {
			a.Cause = by
			a.Reason = fmt.Sprintf("it depends on %s, which is deleted with cascade", by)
			if !cascade[id] {
				a.Reason = fmt.Sprintf("made for owners that are gone, and used by nothing: it goes before %s, which it depends on", by)
			}
			if o.Kind == api.KindSupportService {
				a.Action = api.ActionRemove
				a.SupportType = decodeSpec(mustKind(o.Kind), o.Spec).(*api.SupportServiceSpec).Type
				a.Runtime = p.runtimeName(decodeSpec(mustKind(o.Kind), o.Spec).(*api.SupportServiceSpec).RuntimeID)
			}
		}
		p.actions = append(p.actions, a)
	}
	for _, id := range v.order {
		if v.deleted[id] && requested[id] {
			emit(id)
		}
	}
	return nil
}

func mustKind(kind string) *api.KindInfo {
	ki, _ := api.LookupKind(kind)
	return ki
}

func deleteChange(deletes []*decodedChange, id string, implied map[string]*api.ObjectRef) *decodedChange {
	for range len(implied) + 1 {
		for _, dc := range deletes {
			if dc.id == id {
				return dc
			}
		}
		by := implied[id]
		if by == nil {
			return nil
		}
		id = by.ID
	}
	return nil
}

// dependsOn reports whether o references id (spec or status; not as an owner).
func dependsOn(o *store.Object, id string) bool {
	ki, ok := api.LookupKind(o.Kind)
	if !ok {
		return false
	}
	for _, e := range graphEdges(ki, o) {
		if e.To == id && e.Type != api.EdgeOwner {
			return true
		}
	}
	return false
}

// allGarbage is Server.allGarbage on the view: every dependent was made by a controller for owners that
// are all gone, and is itself used by nothing.
func (p *planner) allGarbage(deps []string) bool {
	for _, d := range deps {
		o := p.view.objs[d]
		if o == nil || len(o.Owners) == 0 {
			return false
		}
		for _, ow := range o.Owners {
			if !p.view.gone(ow.ID) {
				return false
			}
		}
		if len(p.view.dependents(d)) > 0 {
			return false
		}
	}
	return true
}

func (p *planner) runtimeName(id string) string {
	if o := p.view.objs[id]; o != nil {
		return o.Name
	}
	return id
}

// runtimeObject decodes a runtime of the view.
func runtimeObject(o *store.Object) *api.KubernetesRuntime {
	rt := &api.KubernetesRuntime{Meta: api.Meta{ID: o.ID, Kind: o.Kind, Name: o.Name, Labels: o.Labels, Generation: o.Generation,
		DeletionRequestedAt: o.DeletionRequestedAt}}
	_ = json.Unmarshal(o.Spec, &rt.Spec)
	_ = json.Unmarshal(o.Status, &rt.Status)
	return rt
}

// place runs the instance controller's placement decision (placement.Decide, fed what the controller
// reads: every runtime and live profile, and the instance's current placements) for every instance the
// plan creates or changes, in order, provisioning runtimes into the view as the controller would, so that
// a later instance finds them.
func (p *planner) place() {
	v := p.view
	for _, inst := range v.each(api.KindWorkloadInstance) {
		if !v.changed[inst.ID] {
			continue
		}
		var spec api.WorkloadInstanceSpec
		var status api.WorkloadInstanceStatus
		_ = json.Unmarshal(inst.Spec, &spec)
		_ = json.Unmarshal(inst.Status, &status)
		self := v.ref(inst.ID)
		current := map[string]bool{}
		for _, c := range status.Placements {
			if c.Phase != api.PhaseDeleting {
				current[c.RuntimeID] = true
			}
		}
		if spec.Placement == nil {
			if rt := v.objs[spec.RuntimeID]; rt != nil {
				p.placed[inst.ID] = []api.PlacementStatus{{RuntimeID: rt.ID, Runtime: rt.Name, Region: runtimeObject(rt).Spec.Region}}
			}
			continue
		}
		in := placement.Input{Placement: spec.Placement, Current: status.Placements, Now: time.Now()}
		for _, o := range v.each(api.KindKubernetesRuntime) {
			in.Runtimes = append(in.Runtimes, placement.FromObject(runtimeObject(o)))
		}
		for _, o := range v.each(api.KindRuntimeProfile) {
			pr := placement.Profile{ID: o.ID, Name: o.Name}
			_ = json.Unmarshal(o.Spec, &pr.Spec)
			in.Profiles = append(in.Profiles, pr)
		}
		for _, t := range placement.Decide(in) {
			switch {
			case t.Problem != "":
				p.warn(inst.ID, fmt.Sprintf("workload_instance %q: %s", inst.Name, t.Problem))
			case t.Provision != nil:
				rt := p.provision(inst, t.Provision)
				p.placed[inst.ID] = append(p.placed[inst.ID], api.PlacementStatus{RuntimeID: rt.ID, Runtime: rt.Name, Region: t.Region, Profile: t.Provision.Profile.Name})
				p.depend(self, v.ref(rt.ID), t.Region, fmt.Sprintf("placed in %s on the runtime provisioned for it", t.Region), api.EdgePlacement, "status.placements", self)
			case t.Runtime != nil:
				p.placed[inst.ID] = append(p.placed[inst.ID], api.PlacementStatus{RuntimeID: t.Runtime.ID, Runtime: t.Runtime.Name, Region: t.Region})
				if !current[t.Runtime.ID] {
					p.depend(self, v.ref(t.Runtime.ID), t.Region, fmt.Sprintf("placed in %s on a runtime that matches", t.Region), api.EdgePlacement, "status.placements", self)
				}
			}
		}
	}
}

// follow runs, for the instances the plan places, the instance controller's placement of the instances
// they use with placement with_consumers (on each of their runtimes where it is not yet), and the data
// services' choice of a home for a database or bucket that has none yet (the primary placement of its
// consumer, or its spec's region or runtime), as the controllers would.
func (p *planner) follow() {
	v := p.view
	for _, instID := range slices.Sorted(maps.Keys(p.placed)) {
		inst := v.objs[instID]
		if inst == nil || len(p.placed[instID]) == 0 {
			continue
		}
		var spec api.WorkloadInstanceSpec
		_ = json.Unmarshal(inst.Spec, &spec)
		self := v.ref(instID)
		for _, u := range spec.Uses {
			if u.Placement != api.UseWithConsumers || v.objs[u.InstanceID] == nil {
				continue
			}
			have := p.placements(u.InstanceID)
			for _, pl := range p.placed[instID] {
				if slices.ContainsFunc(have, func(h api.PlacementStatus) bool { return h.RuntimeID == pl.RuntimeID }) {
					continue
				}
				have = append(have, api.PlacementStatus{RuntimeID: pl.RuntimeID, Runtime: pl.Runtime, Region: pl.Region})
				p.depend(v.ref(u.InstanceID), v.ref(pl.RuntimeID), pl.Region,
					fmt.Sprintf("placed in %s, where workload_instance %q runs (placement with_consumers)", pl.Region, inst.Name), api.EdgePlacement, "status.placements", self)
			}
			p.placed[u.InstanceID] = have
		}
		primary := p.placed[instID][0]
		if spec.Placement != nil && len(spec.Placement.Regions) > 0 {
			if i := slices.IndexFunc(p.placed[instID], func(pl api.PlacementStatus) bool { return pl.Region == spec.Placement.Regions[0] }); i >= 0 {
				primary = p.placed[instID][i]
			}
		}
		for _, id := range append(slices.Clone(spec.Databases), spec.Buckets...) {
			p.home(id, inst, primary)
		}
	}
}

// home previews where a data service without a home yet will live: its spec's runtime, else a runtime
// of its consumer in its spec's region, else its consumer's primary placement.
func (p *planner) home(id string, consumer *store.Object, primary api.PlacementStatus) {
	v := p.view
	ds := v.objs[id]
	if ds == nil || p.homed[id] {
		return
	}
	var status struct {
		Home *api.DataHome `json:"home"`
	}
	var spec struct {
		RuntimeID string `json:"runtime_id"`
		Region    string `json:"region"`
	}
	_ = json.Unmarshal(ds.Status, &status)
	_ = json.Unmarshal(ds.Spec, &spec)
	if status.Home != nil {
		return
	}
	p.homed[id] = true
	at, why := primary, fmt.Sprintf("its home: the primary region of workload_instance %q, its first consumer", consumer.Name)
	switch {
	case spec.RuntimeID != "":
		rt := v.objs[spec.RuntimeID]
		if rt == nil {
			return
		}
		at, why = api.PlacementStatus{RuntimeID: rt.ID, Runtime: rt.Name, Region: runtimeObject(rt).Spec.Region}, "its home: spec.runtime_id"
	case spec.Region != "":
		i := slices.IndexFunc(p.placed[consumer.ID], func(pl api.PlacementStatus) bool { return pl.Region == spec.Region })
		if i < 0 {
			return // a runtime of the region that the plan cannot name
		}
		at, why = p.placed[consumer.ID][i], "its home: spec.region"
	}
	p.depend(v.ref(id), v.ref(at.RuntimeID), at.Region, why, api.EdgePlacement, "status.home", v.ref(consumer.ID))
}

// provision adds the runtime the instance controller would create from a profile (workload's provision:
// the profile's labels, region and provider, owned by the profile) to the view, and the action.
func (p *planner) provision(inst *store.Object, pr *placement.Provision) *store.Object {
	labels := map[string]string{}
	for k, val := range pr.Profile.Spec.RuntimeLabels {
		labels[k] = val
	}
	labels[api.LabelProfile] = pr.Profile.Name
	labels[api.LabelRegion] = pr.Region
	labels[api.LabelProvisionedFor] = inst.Name
	spec, _ := json.Marshal(api.KubernetesRuntimeSpec{Provider: pr.Profile.Spec.Provider, Region: pr.Region, Nodes: pr.Profile.Spec.Nodes,
		MinNodes: pr.Profile.Spec.MinNodes, MaxNodes: pr.Profile.Spec.MaxNodes, KubernetesVersion: pr.Profile.Spec.KubernetesVersion})
	status, _ := initialStatus(mustKind(api.KindKubernetesRuntime))
	rt := &store.Object{ID: plannedPrefix + api.KindKubernetesRuntime + "/" + pr.Name, Kind: api.KindKubernetesRuntime, Name: pr.Name,
		Labels: labels, Generation: 1, Spec: spec, Status: status, CreatedAt: time.Now().UTC(),
		Owners: []store.Ref{{Kind: api.KindRuntimeProfile, ID: pr.Profile.ID, Name: pr.Profile.Name}}}
	p.view.add(rt)
	p.actions = append(p.actions, api.PlanAction{Action: api.ActionProvision, Kind: api.KindKubernetesRuntime, ID: rt.ID, Name: rt.Name,
		Region: pr.Region, Profile: pr.Profile.Name, Cause: p.view.ref(inst.ID),
		Reason: fmt.Sprintf("workload_instance %q's placement needs a runtime in %s and none matches", inst.Name, pr.Region)})
	p.edges = append(p.edges, api.GraphEdge{From: rt.ID, To: pr.Profile.ID, Type: api.EdgeOwner, Why: "owners"})
	return rt
}

// placements are the runtimes an instance runs on after the plan.
func (p *planner) placements(instID string) []api.PlacementStatus {
	if ps, ok := p.placed[instID]; ok {
		return ps
	}
	o := p.view.objs[instID]
	if o == nil {
		return nil
	}
	var status api.WorkloadInstanceStatus
	_ = json.Unmarshal(o.Status, &status)
	var out []api.PlacementStatus
	for _, ps := range status.Placements {
		if ps.Phase != api.PhaseDeleting {
			out = append(out, ps)
		}
	}
	return out
}

// gateways runs the gateway controller's decision (requirements.ForGateway) for every gateway the plan
// creates or changes, or whose instance it places anew: on each runtime the instance runs on, a support
// service of each needed type is used where one exists, else installed, named and owned as the
// controller would.
func (p *planner) gateways() {
	v := p.view
	for _, gw := range v.each(api.KindGateway) {
		var spec api.GatewaySpec
		var status api.GatewayStatus
		_ = json.Unmarshal(gw.Spec, &spec)
		_ = json.Unmarshal(gw.Status, &status)
		_, replaced := p.placed[spec.InstanceID]
		if !v.changed[gw.ID] && !replaced {
			continue
		}
		inZone := false
		for _, d := range v.each(api.KindDomainName) {
			var ds api.DomainNameSpec
			_ = json.Unmarshal(d.Spec, &ds)
			if slices.ContainsFunc(spec.Hosts, func(h string) bool { return api.InZone(h, ds.Zone) }) {
				inZone = true
			}
		}
		using := map[string]bool{}
		for _, r := range status.SupportServices {
			using[r.ID] = true
		}
		self := v.ref(gw.ID)
		for _, pl := range p.placements(spec.InstanceID) {
			for _, typ := range requirements.ForGateway(&spec, inZone) {
				ss := p.supportService(pl.RuntimeID, typ)
				if ss == nil {
					ss = p.install(gw, pl, typ, fmt.Sprintf("gateway %q needs %s on kubernetes_runtime %q, which has none", gw.Name, typ, pl.Runtime))
				} else if !using[ss.ID] {
					p.depend(self, v.ref(ss.ID), "", fmt.Sprintf("the gateway needs %s on kubernetes_runtime %q, which has it", typ, pl.Runtime),
						api.EdgePlacement, "status.support_services", self)
				}
				p.uses[gw.ID] = append(p.uses[gw.ID], ss.ID)
			}
		}
	}
}

// supportService is the live support service of a type on a runtime, as the gateway controller finds it.
func (p *planner) supportService(runtimeID, typ string) *store.Object {
	for _, o := range p.view.each(api.KindSupportService) {
		var ss api.SupportServiceSpec
		_ = json.Unmarshal(o.Spec, &ss)
		if ss.RuntimeID == runtimeID && ss.Type == typ {
			return o
		}
	}
	return nil
}

// autoscalers runs the instance controller's decision (requirements.ForInstance) for every instance the
// plan places: on each runtime it is placed on anew, a support service of each needed type is used
// where one exists, else installed, owned by the instance, as the controller would (a cluster that
// serves the metrics API itself, which only the controller sees, gets none).
func (p *planner) autoscalers() {
	v := p.view
	for _, instID := range slices.Sorted(maps.Keys(p.placed)) {
		inst := v.objs[instID]
		if inst == nil {
			continue
		}
		var spec api.WorkloadInstanceSpec
		_ = json.Unmarshal(inst.Spec, &spec)
		def := v.objs[spec.DefinitionID]
		if def == nil {
			continue
		}
		var ds api.WorkloadDefinitionSpec
		_ = json.Unmarshal(def.Spec, &ds)
		for _, pl := range p.placed[instID] {
			for _, typ := range requirements.ForInstance(&ds) {
				if p.supportService(pl.RuntimeID, typ) == nil {
					p.install(inst, pl, typ, fmt.Sprintf("workload_instance %q autoscales: its autoscaler reads the metrics API, which %s serves, on kubernetes_runtime %q (unless the cluster serves that API itself)", inst.Name, typ, pl.Runtime))
				}
			}
		}
	}
}

// install adds a support service of a type on a runtime, owned by the object that needs it.
func (p *planner) install(owner *store.Object, pl api.PlacementStatus, typ, reason string) *store.Object {
	name := requirements.Name(typ, pl.Runtime)
	spec, _ := json.Marshal(api.SupportServiceSpec{RuntimeID: pl.RuntimeID, Type: typ})
	status, _ := initialStatus(mustKind(api.KindSupportService))
	ss := &store.Object{ID: plannedPrefix + api.KindSupportService + "/" + name, Kind: api.KindSupportService, Name: name,
		Labels: map[string]string{"qleet.io/support-type": typ}, Generation: 1, Spec: spec, Status: status, CreatedAt: time.Now().UTC(),
		Owners: []store.Ref{{Kind: owner.Kind, ID: owner.ID, Name: owner.Name}}}
	p.view.add(ss)
	p.actions = append(p.actions, api.PlanAction{Action: api.ActionInstall, Kind: api.KindSupportService, ID: ss.ID, Name: name,
		Runtime: pl.Runtime, Region: pl.Region, SupportType: typ, Cause: p.view.ref(owner.ID), Reason: reason})
	why := "status.support_services"
	if owner.Kind == api.KindWorkloadInstance {
		why = "meta.owners"
	}
	p.edges = append(p.edges,
		api.GraphEdge{From: owner.ID, To: ss.ID, Type: api.EdgePlacement, Why: why},
		api.GraphEdge{From: ss.ID, To: pl.RuntimeID, Type: api.EdgeReference, Why: "spec.runtime_id"})
	return ss
}

// rolls lists the existing instances whose pods roll because something they use changes: their
// definition's spec, a secret serving them, a database or bucket they use (created, changed or deleted).
func (p *planner) rolls(changes []*decodedChange) {
	v := p.view
	rolled := map[string]bool{}
	roll := func(instID string, cause *api.ObjectRef, reason string) {
		inst := v.objs[instID]
		if inst == nil || inst.Kind != api.KindWorkloadInstance || v.planned[instID] || v.gone(instID) || rolled[instID] {
			return
		}
		if slices.ContainsFunc(changes, func(dc *decodedChange) bool {
			return dc.id == instID && dc.ch.Op == api.PlanUpdate && v.changed[instID]
		}) {
			return // its own update rolls it
		}
		rolled[instID] = true
		p.actions = append(p.actions, api.PlanAction{Action: api.ActionRoll, Kind: api.KindWorkloadInstance, ID: instID, Name: inst.Name,
			Cause: cause, Reason: reason})
	}
	for _, dc := range changes {
		o := v.objs[dc.id]
		if o == nil {
			continue
		}
		ref := v.ref(dc.id)
		verb := map[string]string{api.PlanCreate: "is created", api.PlanUpdate: "changes", api.PlanDelete: "is deleted"}[dc.ch.Op]
		if dc.ch.Op == api.PlanUpdate && !v.changed[dc.id] {
			continue // labels only
		}
		switch o.Kind {
		case api.KindWorkloadDefinition:
			if dc.ch.Op != api.PlanUpdate {
				continue
			}
			for _, inst := range v.each(api.KindWorkloadInstance) {
				var s api.WorkloadInstanceSpec
				_ = json.Unmarshal(inst.Spec, &s)
				if s.DefinitionID == dc.id {
					roll(inst.ID, ref, fmt.Sprintf("its workload_definition %q changes (generation %d → %d)", o.Name, o.Generation-1, o.Generation))
				}
			}
		case api.KindSecret:
			var s api.SecretSpec
			_ = json.Unmarshal(o.Spec, &s)
			ids := s.InstanceIDs
			if dc.cur != nil && dc.ch.Op == api.PlanUpdate {
				var old api.SecretSpec
				_ = json.Unmarshal(dc.cur.Spec, &old)
				ids = append(ids, old.InstanceIDs...)
			}
			for _, id := range ids {
				roll(id, ref, fmt.Sprintf("secret %q %s: its values are delivered into the pods", o.Name, verb))
			}
		case api.KindDatabase, api.KindBucket:
			var s struct {
				InstanceID string `json:"instance_id"`
			}
			_ = json.Unmarshal(o.Spec, &s)
			roll(s.InstanceID, ref, fmt.Sprintf("%s %q %s: its connection details are injected into the pods", o.Kind, o.Name, verb))
			for _, inst := range v.each(api.KindWorkloadInstance) {
				var is api.WorkloadInstanceSpec
				_ = json.Unmarshal(inst.Spec, &is)
				if slices.Contains(is.Databases, dc.id) || slices.Contains(is.Buckets, dc.id) {
					roll(inst.ID, ref, fmt.Sprintf("%s %q %s: its connection details are injected into the pods", o.Kind, o.Name, verb))
				}
			}
		}
	}
}

// removals lists what garbage collection would remove once the plan is applied (the reconcile
// runtime's collect): objects a controller made for owners that all go, because of the plan, and that
// nothing uses any more, e.g. the support services of a deleted gateway, or the runtimes of a deleted
// profile that nothing runs on.
func (p *planner) removals() {
	v := p.view
	for _, id := range slices.Clone(v.order) {
		o := v.objs[id]
		if o == nil || len(o.Owners) == 0 || v.planned[id] || v.gone(id) {
			continue
		}
		var owner *api.ObjectRef
		for _, ow := range o.Owners {
			if !v.gone(ow.ID) {
				owner = nil
				break
			}
			if v.deleted[ow.ID] && owner == nil {
				owner = &api.ObjectRef{Kind: ow.Kind, ID: ow.ID, Name: ow.Name}
			}
		}
		if owner == nil || len(v.dependents(id)) > 0 || p.usedByPlan(id) {
			continue
		}
		a := api.PlanAction{Action: api.ActionDelete, Kind: o.Kind, ID: id, Name: o.Name, Cause: owner,
			Reason: fmt.Sprintf("made for %s, which is deleted, and used by nothing else: garbage-collected after its grace period", owner)}
		if o.Kind == api.KindSupportService {
			var ss api.SupportServiceSpec
			_ = json.Unmarshal(o.Spec, &ss)
			a.Action, a.SupportType, a.Runtime = api.ActionRemove, ss.Type, p.runtimeName(ss.RuntimeID)
			a.Reason = fmt.Sprintf("installed for %s, which is deleted, and used by nothing else: garbage-collected after its grace period", owner)
		}
		p.actions = append(p.actions, a)
	}
}

// keeps lists what outlives the plan's deletes: a runtime provisioned for a deleted instance that
// nothing else runs on, which its profile's reclaim_after removes (or nothing, without one); the data
// of a database or bucket deleted with retain.
func (p *planner) keeps() {
	v := p.view
	kept := map[string]bool{}
	for _, id := range v.order {
		o := v.objs[id]
		if o == nil || !v.deleted[id] {
			continue
		}
		switch o.Kind {
		case api.KindWorkloadInstance:
			var status api.WorkloadInstanceStatus
			_ = json.Unmarshal(o.Status, &status)
			for _, pl := range status.Placements {
				if kept[pl.RuntimeID] {
					continue
				}
				if a, ok := p.keepRuntime(o, pl.RuntimeID); ok {
					kept[pl.RuntimeID] = true
					p.actions = append(p.actions, a)
				}
			}
		case api.KindDatabase, api.KindBucket:
			var data struct {
				Spec struct {
					Retain bool `json:"retain"`
				}
				Status struct {
					Runtimes []struct {
						Runtime string `json:"runtime"`
					} `json:"runtimes"`
				}
			}
			_ = json.Unmarshal(o.Spec, &data.Spec)
			_ = json.Unmarshal(o.Status, &data.Status)
			if !data.Spec.Retain {
				continue
			}
			where := "where it ran"
			var rts []string
			for _, r := range data.Status.Runtimes {
				if r.Runtime != "" && !slices.Contains(rts, r.Runtime) {
					rts = append(rts, r.Runtime)
				}
			}
			if len(rts) > 0 {
				where = fmt.Sprintf("on kubernetes_runtime %s", strings.Join(quoteAll(rts), ", "))
			}
			p.actions = append(p.actions, api.PlanAction{Action: api.ActionKeep, Kind: o.Kind, ID: id, Name: o.Name, Cause: v.ref(id),
				Reason: fmt.Sprintf("deleted with retain: its volume and credentials stay %s, and keep a runtime that may be reclaimed from being reclaimed; a %s named %q created later takes them back", where, o.Kind, o.Name)})
		}
	}
}

// keepRuntime is the keep action of a runtime a deleted instance ran on, when the runtime was
// provisioned from a profile that stays, and nothing else runs on it or will.
func (p *planner) keepRuntime(inst *store.Object, rtID string) (api.PlanAction, bool) {
	v := p.view
	rt := v.objs[rtID]
	if rt == nil || v.gone(rtID) || len(v.dependents(rtID)) > 0 || p.usedByPlan(rtID) {
		return api.PlanAction{}, false
	}
	var profile *store.Object
	for _, ow := range rt.Owners {
		if ow.Kind == api.KindRuntimeProfile && !v.gone(ow.ID) {
			profile = v.objs[ow.ID]
		}
	}
	if profile == nil {
		return api.PlanAction{}, false // declared by a user, or garbage once its profile goes
	}
	var ps api.RuntimeProfileSpec
	_ = json.Unmarshal(profile.Spec, &ps)
	reason := fmt.Sprintf("provisioned from runtime_profile %q, nothing runs on it once workload_instance %q is deleted, and the profile has no reclaim_after: it keeps running until it is deleted, or its profile is", profile.Name, inst.Name)
	if ps.ReclaimAfter != "" {
		reason = fmt.Sprintf("provisioned from runtime_profile %q, nothing runs on it once workload_instance %q is deleted: it keeps running until it has been idle for the profile's reclaim_after (%s), unless it holds data", profile.Name, inst.Name, ps.ReclaimAfter)
	}
	return api.PlanAction{Action: api.ActionKeep, Kind: rt.Kind, ID: rt.ID, Name: rt.Name, Runtime: rt.Name, Region: runtimeObject(rt).Spec.Region,
		Profile: profile.Name, Cause: v.ref(inst.ID), Reason: reason}, true
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// usedByPlan reports whether the plan's controllers would use the object: a gateway's support service,
// or an instance's runtime.
func (p *planner) usedByPlan(id string) bool {
	for gw, ids := range p.uses {
		if !p.view.gone(gw) && slices.Contains(ids, id) {
			return true
		}
	}
	for inst, ps := range p.placed {
		if !p.view.gone(inst) && slices.ContainsFunc(ps, func(pl api.PlacementStatus) bool { return pl.RuntimeID == id }) {
			return true
		}
	}
	return false
}

// graph is the part of the graph the plan touches: the objects of its actions and their direct
// providers, with the edges between them (those the view's objects show, and those the plan adds).
func (p *planner) graph() api.Graph {
	v := p.view
	keep := map[string]bool{}
	for _, a := range p.actions {
		keep[a.ID] = true
		if a.Provider != nil {
			keep[a.Provider.ID] = true
		}
	}
	var edges []api.GraphEdge
	for _, id := range v.order {
		o := v.objs[id]
		if !keep[id] || o == nil {
			continue
		}
		if ki, ok := api.LookupKind(o.Kind); ok {
			edges = append(edges, graphEdges(ki, o)...)
		}
	}
	edges = append(edges, p.edges...)
	for _, e := range edges {
		if keep[e.From] && v.objs[e.To] != nil {
			keep[e.To] = true
		}
	}
	g := api.Graph{Nodes: []api.GraphNode{}, Edges: []api.GraphEdge{}}
	for _, id := range v.order {
		if o := v.objs[id]; keep[id] && o != nil {
			n := graphNode(o)
			n.Deleting = n.Deleting || v.deleted[id]
			g.Nodes = append(g.Nodes, n)
		}
	}
	seen := map[[2]string]bool{}
	for _, e := range edges {
		k := [2]string{e.From, e.To}
		if keep[e.From] && keep[e.To] && !seen[k] {
			seen[k] = true
			g.Edges = append(g.Edges, e)
		}
	}
	sort.SliceStable(g.Nodes, func(i, j int) bool {
		if g.Nodes[i].Kind != g.Nodes[j].Kind {
			return g.Nodes[i].Kind < g.Nodes[j].Kind
		}
		return g.Nodes[i].Name < g.Nodes[j].Name
	})
	return g
}
