package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// Default timeouts of server-side waits.
const (
	defaultWaitReconciled = 60 * time.Second
	defaultWaitGone       = 30 * time.Second
	maxCascadeDepth       = 16
	maxEventsListed       = 200
)

// wait serves GET ?wait=reconciled|gone: it answers as soon as the object is reconciled, Failed or
// Stalled at its current generation (or gone: 404), and with the current object at the timeout.
func (s *Server) wait(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	mode := r.URL.Query().Get("wait")
	timeout := defaultWaitReconciled
	if mode == "gone" {
		timeout = defaultWaitGone
	}
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxWait {
			s.fail(w, r, invalid("timeout", fmt.Sprintf("must be a duration between 0s and %s, e.g. 60s", MaxWait)))
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	done := func(o *store.Object) bool {
		if mode == "gone" {
			return false
		}
		var st api.Status
		_ = json.Unmarshal(o.Status, &st)
		return api.Settled(o.Generation, &st)
	}
	obj, err := s.waitFor(ctx, ki.Kind, id, done)
	if err != nil && ctx.Err() != nil && r.Context().Err() == nil {
		// Timed out: answer with the current object.
		obj, err = s.cfg.Store.Get(r.Context(), ki.Kind, id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, obj)
}

// waitFor re-reads the object whenever this server writes it (and, for writes through other replicas,
// after WaitPollInterval, doubling while nothing changes up to 8 times that) until done reports true,
// the object is gone (store.ErrNotFound) or ctx ends (ctx's error, with the last object read). A fixed
// 500ms poll of 800 waiting clients was 40% of the control plane's CPU (make bench, scale churn).
func (s *Server) waitFor(ctx context.Context, kind, id string, done func(*store.Object) bool) (*store.Object, error) {
	interval := s.cfg.WaitPollInterval
	tick := time.NewTimer(interval)
	defer tick.Stop()
	var last *store.Object
	for {
		woke, release := s.hub.subscribe(id)
		obj, err := s.cfg.Store.Get(ctx, kind, id)
		if err != nil {
			release()
			if ctx.Err() != nil && last != nil {
				return last, ctx.Err()
			}
			return nil, err
		}
		last = obj
		if done(obj) {
			release()
			return obj, nil
		}
		select {
		case <-woke:
		case <-tick.C:
			interval = min(2*interval, 8*s.cfg.WaitPollInterval)
			tick.Reset(interval)
		case <-ctx.Done():
			release()
			return last, ctx.Err()
		}
		release()
	}
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	cascade, err := boolParam(r, "cascade")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	orphan, err := boolParam(r, "orphan")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	detach, err := boolParam(r, "detach")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	opts := store.DeletionOptions{Orphan: orphan}
	ctx := r.Context()
	if cascade {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.CascadeTimeout)
		defer cancel()
	}
	obj, err := s.requestDeletion(ctx, ki.Kind, id, cascade, detach, opts, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.respond(w, r, http.StatusAccepted, obj)
}

// boolParam reads an optional true/false query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid(name, "must be true or false")
	}
	return b, nil
}

// requestDeletion requests deletion of one object. With cascade it first deletes the objects that depend
// on it (recursively, with the same options) and waits until they are gone. Deleting an object already
// being deleted succeeds, and may turn its cleanup into orphaning. With detach, the objects the object's
// own spec attaches it to (KindInfo.UsedBy) do not block its deletion: they lose it, as the caller asked.
func (s *Server) requestDeletion(ctx context.Context, kind, id string, cascade, detach bool, opts store.DeletionOptions, depth int) (*store.Object, error) {
	obj, err := s.cfg.Store.Get(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	if obj.DeletionRequestedAt != nil && (obj.DeletionOrphan || !opts.Orphan) {
		return obj, nil
	}
	if !cascade {
		// Dependents that are garbage (made by a controller for owners that are all gone, and used by
		// nothing) do not block: they go first, as a cascade would take them. A runtime is deleted
		// right after the gateway that installed its support services, without waiting out their grace.
		deps, err := s.dependents(ctx, obj, !detach)
		if err != nil {
			return nil, err
		}
		switch {
		case len(deps) > 0 && s.allGarbage(ctx, deps):
			cascade = true
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.CascadeTimeout)
			defer cancel()
		case len(deps) > 0:
			return nil, &store.DependentsError{Dependents: deps}
		}
	}
	if cascade {
		if depth >= maxCascadeDepth {
			return nil, api.Errorf(api.CodeConflict, "cascading delete deeper than %d levels", maxCascadeDepth)
		}
		deps, err := s.dependents(ctx, obj, !detach)
		if err != nil {
			return nil, err
		}
		for _, d := range deps {
			if _, err := s.requestDeletion(ctx, d.Kind, d.ID, true, false, opts, depth+1); err != nil && !errors.Is(err, store.ErrNotFound) && !api.IsNotFound(err) {
				return nil, err
			}
		}
		for _, d := range deps {
			var blocked string
			_, err := s.waitFor(ctx, d.Kind, d.ID, func(o *store.Object) bool {
				blocked = unreachableBlock(o)
				return blocked != ""
			})
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			left, _ := s.dependents(context.WithoutCancel(ctx), obj, !detach)
			msg := fmt.Sprintf("dependents were asked to delete but are not gone yet (%v); retry later", err)
			if blocked != "" {
				msg = fmt.Sprintf("%s %q cannot finish its deletion: %s", d.Kind, d.Name, blocked)
			}
			return nil, &api.Error{Code: api.CodeConflict, Message: msg, Dependents: storeRefs(left)}
		}
	}
	obj, err = s.cfg.Store.RequestDeletion(ctx, kind, id, opts)
	if err != nil {
		return nil, err
	}
	s.committed(id)
	return obj, nil
}

// unreachableBlock returns the message of an object whose deletion waits on a cluster that does not
// answer (its Ready condition's reason is api.ReasonRuntimeUnreachable), or "". A cascade cannot
// finish while it holds, so it stops at once with the message, which says how to orphan instead.
func unreachableBlock(o *store.Object) string {
	if o.DeletionRequestedAt == nil || len(o.Status) == 0 {
		return ""
	}
	var st api.Status
	if json.Unmarshal(o.Status, &st) != nil {
		return ""
	}
	for _, c := range st.Conditions {
		if c.Type == "Ready" && c.Reason == api.ReasonRuntimeUnreachable {
			return c.Message
		}
	}
	return ""
}

// dependents lists the objects that depend on obj: those whose references name it (the store's
// reference rows), then the objects its own spec attaches it to that still exist (KindInfo.UsedBy: the
// instance a database names in spec.instance_id). The second are read outside the deletion's
// transaction: a database attached to an instance at the moment it is deleted may go. withUsers false
// leaves the second out (a delete that detaches).
func (s *Server) dependents(ctx context.Context, obj *store.Object, withUsers bool) ([]store.Ref, error) {
	deps, err := s.cfg.Store.Dependents(ctx, obj.ID)
	if err != nil {
		return nil, fmt.Errorf("dependents of %s %s: %w", obj.Kind, obj.ID, err)
	}
	ki, ok := api.LookupKind(obj.Kind)
	if !ok || ki.UsedBy == nil || !withUsers {
		return deps, nil
	}
	spec := ki.NewSpec()
	if err := json.Unmarshal(obj.Spec, spec); err != nil {
		return nil, fmt.Errorf("decode stored %s spec: %w", obj.Kind, err)
	}
	for _, fr := range ki.UsedBy(spec) {
		if slices.ContainsFunc(deps, func(d store.Ref) bool { return d.ID == fr.ID }) {
			continue
		}
		user, err := s.cfg.Store.Get(ctx, fr.Kind, fr.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("user of %s %s: %w", obj.Kind, obj.ID, err)
		}
		deps = append(deps, store.Ref{Kind: user.Kind, ID: user.ID, Name: user.Name})
	}
	return deps, nil
}

// allGarbage reports whether every dependent was made by a controller for owners that are all gone or
// being deleted, and is itself used by nothing: what garbage collection would remove after its grace.
func (s *Server) allGarbage(ctx context.Context, deps []store.Ref) bool {
	for _, d := range deps {
		obj, err := s.cfg.Store.Get(ctx, d.Kind, d.ID)
		if err != nil || len(obj.Owners) == 0 {
			return false
		}
		for _, o := range obj.Owners {
			owner, err := s.cfg.Store.Get(ctx, o.Kind, o.ID)
			if err == nil && owner.DeletionRequestedAt == nil {
				return false
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return false
			}
		}
		if used, err := s.cfg.Store.Dependents(ctx, d.ID); err != nil || len(used) > 0 {
			return false
		}
	}
	return true
}

func (s *Server) updateStatus(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	rv, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := ki.NewStatus()
	if err := decodeStrict(data, status, "status"); err != nil {
		s.fail(w, r, err)
		return
	}
	raw, err := json.Marshal(status)
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode status: %w", err))
		return
	}
	// The status is checked against the generation of the row the update locks: no read before the
	// write (a status write is most of what controllers send).
	params := &store.UpdateStatusParams{Kind: ki.Kind, ID: id, IfMatch: rv, Status: raw,
		Check: func(generation int64) error { return checkStatus(status, generation) }}
	if ki.StatusRefs != nil {
		refs := []store.Ref{}
		for _, fr := range ki.StatusRefs(status) {
			refs = append(refs, store.Ref{Kind: fr.Kind, ID: fr.ID})
		}
		params.Refs = &refs
	}
	obj, err := s.cfg.Store.UpdateStatus(r.Context(), params)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.committed(id)
	s.respond(w, r, http.StatusOK, obj)
}

var phases = map[api.Phase]bool{
	api.PhasePending: true, api.PhaseReconciling: true, api.PhaseReady: true,
	api.PhaseFailed: true, api.PhaseDeleting: true,
}

// checkStatus validates the common status fields against the object's generation.
func checkStatus(status any, generation int64) error {
	acc, ok := status.(api.StatusAccessor)
	if !ok {
		return nil
	}
	st := acc.Common()
	var fes []api.FieldError
	if st.Phase != "" && !phases[st.Phase] {
		fes = append(fes, api.FieldError{Field: "status.phase", Message: fmt.Sprintf("must be one of Pending, Reconciling, Ready, Failed, Deleting, not %q", st.Phase)})
	}
	if st.ObservedGeneration < 0 || st.ObservedGeneration > generation {
		fes = append(fes, api.FieldError{Field: "status.observed_generation", Message: fmt.Sprintf("must be between 0 and the object's generation %d, not %d", generation, st.ObservedGeneration)})
	}
	for i, c := range st.Conditions {
		if c.Type == "" {
			fes = append(fes, api.FieldError{Field: fmt.Sprintf("status.conditions[%d].type", i), Message: "is required"})
		}
		switch c.Status {
		case api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown:
		default:
			fes = append(fes, api.FieldError{Field: fmt.Sprintf("status.conditions[%d].status", i), Message: fmt.Sprintf("must be True, False or Unknown, not %q", c.Status)})
		}
	}
	if len(fes) > 0 {
		return api.Invalid(fes...)
	}
	return nil
}

func (s *Server) finalize(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	if err := s.cfg.Store.Finalize(r.Context(), ki.Kind, id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.committed(id)
	w.WriteHeader(http.StatusNoContent)
}

// requestReconcile asks the object's controller to reconcile it now (an outbox row), without changing
// it: for agents that see the cluster change, and for users who want a drift check at once.
func (s *Server) requestReconcile(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	if err := s.cfg.Store.Enqueue(r.Context(), ki.Kind, id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.committed(id)
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	if _, err := s.cfg.Store.Get(r.Context(), ki.Kind, id); err != nil {
		s.fail(w, r, err)
		return
	}
	evs, err := s.cfg.Store.ListEvents(r.Context(), id, maxEventsListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Items []api.Event `json:"items"`
	}{Items: make([]api.Event, 0, len(evs))}
	for _, e := range evs {
		out.Items = append(out.Items, wireEvent(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func wireEvent(e *store.Event) api.Event {
	return api.Event{
		ID: e.ID, ObjectID: e.ObjectID, Kind: e.Kind, Type: e.Type, Reason: e.Reason, Message: e.Message,
		Generation: e.Generation, DurationMS: e.DurationMS, Source: e.Source, CreatedAt: e.CreatedAt,
		Count: e.Count, FirstTimestamp: &e.CreatedAt, LastTimestamp: &e.LastSeenAt,
	}
}

// Bounds of an event's text fields.
const (
	maxEventReason  = 128
	maxEventMessage = 4096
)

func (s *Server) recordEvent(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	data, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var ev api.Event
	if err := decodeStrict(data, &ev, ""); err != nil {
		s.fail(w, r, err)
		return
	}
	if ev.Type == "" {
		ev.Type = api.EventNormal
	}
	var fes []api.FieldError
	if ev.Type != api.EventNormal && ev.Type != api.EventWarning {
		fes = append(fes, api.FieldError{Field: "type", Message: fmt.Sprintf("must be Normal or Warning, not %q", ev.Type)})
	}
	if ev.Reason == "" || len(ev.Reason) > maxEventReason || strings.ContainsAny(ev.Reason, " \t\n") {
		fes = append(fes, api.FieldError{Field: "reason", Message: fmt.Sprintf("must be a CamelCase word of at most %d characters", maxEventReason)})
	}
	if len(ev.Message) > maxEventMessage {
		fes = append(fes, api.FieldError{Field: "message", Message: fmt.Sprintf("must be at most %d bytes", maxEventMessage)})
	}
	if ev.DurationMS < 0 {
		fes = append(fes, api.FieldError{Field: "duration_ms", Message: "must not be negative"})
	}
	if len(fes) > 0 {
		s.fail(w, r, api.Invalid(fes...))
		return
	}
	// The append checks that the object exists as this kind, and gives a generation of 0 the object's.
	se := &store.Event{
		ObjectID: id, Kind: ki.Kind, Type: ev.Type, Reason: ev.Reason, Message: ev.Message,
		Generation: ev.Generation, DurationMS: ev.DurationMS, Source: ev.Source,
	}
	if err := s.cfg.Store.AppendEvent(r.Context(), se); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, wireEvent(se))
}

// imageRequest is the body of the CI hook POST /v1/workload_definitions/{id}/image.
type imageRequest struct {
	// Container names the container whose image changes.
	Container string `json:"container"`
	// Image is the new image reference.
	Image string `json:"image"`
}

// imageResponse answers the CI hook.
type imageResponse struct {
	// Definition is the updated definition.
	Definition *api.RawObject `json:"definition"`
	// UpdatedInstances are the instances of the definition, which roll out the new image.
	UpdatedInstances []api.ObjectRef `json:"updated_instances"`
}

// setImage is the CI hook: it sets one container's image in a workload definition.
func (s *Server) setImage(w http.ResponseWriter, r *http.Request) {
	ki, id := kindFrom(r), chi.URLParam(r, "id")
	if ki.Kind != api.KindWorkloadDefinition {
		s.fail(w, r, api.Errorf(api.CodeNotFound, "the image hook exists only for workload_definitions"))
		return
	}
	rv, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req imageRequest
	if err := decodeStrict(data, &req, ""); err != nil {
		s.fail(w, r, err)
		return
	}
	var fes []api.FieldError
	if req.Container == "" {
		fes = append(fes, api.FieldError{Field: "container", Message: "is required"})
	}
	if err := api.ValidateImage(req.Image); err != nil {
		fes = append(fes, api.FieldError{Field: "image", Message: err.Error()})
	}
	if len(fes) > 0 {
		s.fail(w, r, api.Invalid(fes...))
		return
	}
	obj, err := s.updateImage(r.Context(), id, rv, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	deps, err := s.cfg.Store.Dependents(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := imageResponse{UpdatedInstances: []api.ObjectRef{}}
	for _, d := range deps {
		if d.Kind == api.KindWorkloadInstance {
			out.UpdatedInstances = append(out.UpdatedInstances, api.ObjectRef{Kind: d.Kind, ID: d.ID, Name: d.Name})
		}
	}
	if out.Definition, err = s.wire(r, obj); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// updateImage rewrites the container's image. Without If-Match it retries on a concurrent write, each time
// against the latest spec, so no other change is lost.
func (s *Server) updateImage(ctx context.Context, id string, rv int64, req imageRequest) (*store.Object, error) {
	for attempt := 0; ; attempt++ {
		cur, err := s.cfg.Store.Get(ctx, api.KindWorkloadDefinition, id)
		if err != nil {
			return nil, err
		}
		var spec api.WorkloadDefinitionSpec
		if err := json.Unmarshal(cur.Spec, &spec); err != nil {
			return nil, fmt.Errorf("decode stored spec: %w", err)
		}
		found := false
		for i := range spec.Containers {
			if spec.Containers[i].Name == req.Container {
				spec.Containers[i].Image = req.Image
				found = true
			}
		}
		if !found {
			return nil, invalid("container", fmt.Sprintf("workload_definition %q has no container %q", cur.Name, req.Container))
		}
		match := rv
		if match == 0 {
			match = cur.ResourceVersion
		}
		obj, err := s.storeSpec(ctx, cur, match, cur.Labels, &spec)
		if rv == 0 && attempt < 3 && errors.Is(err, store.ErrStale) {
			continue
		}
		return obj, err
	}
}
