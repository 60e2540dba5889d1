package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// List paging bounds.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// writeBody is the body of POST and PUT, and the document a merge patch applies to.
type writeBody struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Owners []api.ObjectRef   `json:"owners,omitempty"`
	Spec   json.RawMessage   `json:"spec"`
}

// updateBody is the body of PUT: a write body, plus the read-only parts of the envelope that GET
// returns, so that an object can be sent back as it was read. A read-only field sent must equal the
// object's (it is then ignored), or the write is refused naming it; resource_version is a precondition,
// like If-Match.
type updateBody struct {
	Name                string            `json:"name"`
	Labels              map[string]string `json:"labels,omitempty"`
	Owners              []api.ObjectRef   `json:"owners,omitempty"`
	Spec                json.RawMessage   `json:"spec"`
	ID                  *string           `json:"id,omitempty"`
	Kind                *string           `json:"kind,omitempty"`
	Generation          *int64            `json:"generation,omitempty"`
	ResourceVersion     *int64            `json:"resource_version,omitempty"`
	CreatedAt           *time.Time        `json:"created_at,omitempty"`
	UpdatedAt           *time.Time        `json:"updated_at,omitempty"`
	DeletionRequestedAt *time.Time        `json:"deletion_requested_at,omitempty"`
	DeletionOrphan      *bool             `json:"deletion_orphan,omitempty"`
	Status              json.RawMessage   `json:"status,omitempty"`
}

// readOnlyChanged returns the first read-only field of an update body that differs from the object's,
// as a 400 naming it; nil when every one sent is unchanged.
func (b *updateBody) readOnlyChanged(cur *store.Object) error {
	sameTime := func(sent *time.Time, have *time.Time) bool {
		return sent == nil || have != nil && sent.Equal(*have)
	}
	var field string
	switch {
	case b.ID != nil && *b.ID != cur.ID:
		field = "id"
	case b.Kind != nil && *b.Kind != cur.Kind:
		field = "kind"
	case b.Generation != nil && *b.Generation != cur.Generation:
		field = "generation"
	case !sameTime(b.CreatedAt, &cur.CreatedAt):
		field = "created_at"
	case !sameTime(b.UpdatedAt, &cur.UpdatedAt):
		field = "updated_at"
	case !sameTime(b.DeletionRequestedAt, cur.DeletionRequestedAt):
		field = "deletion_requested_at"
	case b.DeletionOrphan != nil && *b.DeletionOrphan != cur.DeletionOrphan:
		field = "deletion_orphan"
	case len(b.Status) > 0 && string(b.Status) != "null" && !sameStatus(b.Status, cur.Status):
		return invalid("status", "is written only by controllers, through PUT /v1/<kind>/{id}/status; send it unchanged or leave it out")
	default:
		return nil
	}
	return invalid(field, "is read-only and differs from the object's; send it unchanged or leave it out")
}

// sameStatus reports whether a sent status holds the same value as the stored one.
func sameStatus(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	if vb == nil {
		vb = map[string]any{} // a stored empty status reads as {}
	}
	return reflect.DeepEqual(va, vb)
}

// keepWriteOnly gives the write-only fields that an update leaves out their stored values: GET hides
// them from all but controllers, so that what GET returned can be sent back.
func keepWriteOnly(ki *api.KindInfo, spec any, stored json.RawMessage) error {
	if len(ki.WriteOnly) == 0 {
		return nil
	}
	prev := ki.NewSpec()
	if err := json.Unmarshal(stored, prev); err != nil {
		return fmt.Errorf("decode stored %s spec: %w", ki.Kind, err)
	}
	nv, pv := reflect.ValueOf(spec).Elem(), reflect.ValueOf(prev).Elem()
	for _, f := range structFields(nv.Type()) {
		if !slices.Contains(ki.WriteOnly, f.name) {
			continue
		}
		if fv := nv.FieldByIndex(f.index); fv.IsZero() {
			fv.Set(pv.FieldByIndex(f.index))
		}
	}
	return nil
}

// patchBody is the part of an object a merge patch may change.
type patchBody struct {
	Labels map[string]string `json:"labels"`
	Spec   json.RawMessage   `json:"spec"`
}

// decodeWrite strictly decodes a write body and its spec into the kind's spec type.
func decodeWrite(ki *api.KindInfo, data []byte, into any) (any, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("body", "must be a JSON object")
	}
	if fe := checkShape(obj["spec"], reflect.TypeOf(ki.NewSpec()), "spec"); fe != nil {
		return nil, api.Invalid(*fe)
	}
	delete(obj, "spec")
	if fe := checkShape(obj, reflect.TypeOf(into).Elem(), ""); fe != nil {
		return nil, api.Invalid(*fe)
	}
	// The document is parsed and its shape checked, spec included: what is left is to decode it, once.
	if err := decodeChecked(data, into, ""); err != nil {
		return nil, err
	}
	spec := ki.NewSpec()
	raw := reflect.ValueOf(into).Elem().FieldByName("Spec").Bytes()
	if len(raw) == 0 || string(raw) == "null" {
		return spec, nil
	}
	if err := decodeChecked(raw, spec, "spec"); err != nil {
		return nil, err
	}
	return spec, nil
}

// owners resolves the owners of a new object: each must name a known kind and an existing object that
// is not being deleted.
func (s *Server) owners(ctx context.Context, refs []api.ObjectRef) ([]store.Ref, error) {
	var out []store.Ref
	var fes []api.FieldError
	for i, o := range refs {
		field := fmt.Sprintf("owners[%d]", i)
		if _, ok := api.LookupKind(o.Kind); !ok {
			fes = append(fes, api.FieldError{Field: field + ".kind", Message: fmt.Sprintf("unknown kind %q", o.Kind)})
			continue
		}
		got, err := s.cfg.Store.Get(ctx, o.Kind, o.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fes = append(fes, api.FieldError{Field: field + ".id", Message: fmt.Sprintf("%s %q not found", o.Kind, o.ID)})
			continue
		case err != nil:
			return nil, fmt.Errorf("resolve %s: %w", field, err)
		case got.DeletionRequestedAt != nil:
			fes = append(fes, api.FieldError{Field: field + ".id", Message: fmt.Sprintf("%s %q is being deleted", o.Kind, got.Name)})
			continue
		}
		out = append(out, store.Ref{Kind: o.Kind, ID: o.ID, Name: got.Name})
	}
	if len(fes) > 0 {
		return nil, api.Invalid(fes...)
	}
	return out, nil
}

// sameOwners reports whether an update's owners (nil when not sent) leave the object's unchanged.
func sameOwners(sent []api.ObjectRef, cur []store.Ref) bool {
	if sent == nil {
		return true
	}
	if len(sent) != len(cur) {
		return false
	}
	for i := range sent {
		if sent[i].Kind != cur[i].Kind || sent[i].ID != cur[i].ID {
			return false
		}
	}
	return true
}

// wireRefs converts store refs to the wire form; nil for none.
func wireRefs(refs []store.Ref) []api.ObjectRef {
	if len(refs) == 0 {
		return nil
	}
	return storeRefs(refs)
}

// checked is a spec that passed defaults, validation and reference checks, ready for the store.
type checked struct {
	spec json.RawMessage
	refs []store.Ref
	// users are the ids of the objects the spec attaches its object to (specUsers).
	users []string
}

// specUsers are the ids of the objects a spec attaches its object to, which use it: KindInfo.UsedBy (a
// database's spec.instance_id) and the reference fields tagged usedby (a secret's spec.instance_ids). The
// store indexes them (store.CreateParams.Users), so that a list filtered by reference to an instance
// finds the secrets and data services that serve it without reading their kinds.
func specUsers(ki *api.KindInfo, spec any) []string {
	var ids []string
	if ki.UsedBy != nil {
		for _, fr := range ki.UsedBy(spec) {
			ids = append(ids, fr.ID)
		}
	}
	if hasUsedByFields(ki) {
		for _, r := range ki.References(spec, nil) {
			if r.Direction == api.RefUsedBy {
				ids = append(ids, r.ID)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// usedByFields remembers, per kind, whether its types have a reference field tagged usedby: a tag on a
// type, so fixed for the kind. Without one, specUsers need not walk every spec (the walk was about 6% of
// an API create's CPU).
var usedByFields sync.Map // *api.KindInfo -> bool

func hasUsedByFields(ki *api.KindInfo) bool {
	if has, ok := usedByFields.Load(ki); ok {
		return has.(bool)
	}
	has := slices.ContainsFunc(ki.ReferenceFields(), func(f api.RefField) bool { return f.Direction == api.RefUsedBy })
	usedByFields.Store(ki, has)
	return has
}

// objectView is what check reads: the store (the Server itself), or a plan's view of the store with the
// plan's changes applied (plans.go), so that a plan validates exactly as the write would.
type objectView interface {
	// lookup returns an object by kind and id (store.ErrNotFound when there is none).
	lookup(ctx context.Context, kind, id string) (*store.Object, error)
	// peers returns the other objects of a kind, for KindInfo.ValidatePeers.
	peers(ctx context.Context, ki *api.KindInfo, self string) ([]api.NamedSpec, error)
	// writeRules returns the server's limits on writes.
	writeRules() *writeRules
}

// writeRules are the server's limits on writes, beyond each kind's own validation.
type writeRules struct {
	// maxReplicas caps, per role, the replicas a spec asks for (Config.MaxReplicasPerRole).
	maxReplicas map[string]int32
	// chartDir is the directory local Helm charts are read from (Config.ChartDir); "" when not known.
	chartDir string
}

// writeRules returns the server's limits on writes.
func (s *Server) writeRules() *writeRules {
	return &writeRules{maxReplicas: s.cfg.MaxReplicasPerRole, chartDir: s.cfg.ChartDir}
}

// check applies the rules to a spec written by the caller in ctx.
func (wr *writeRules) check(ctx context.Context, spec any) []api.FieldError {
	var fes []api.FieldError
	role := principalFrom(ctx).role
	if limit, ok := wr.maxReplicas[role]; ok {
		asked := api.RequestedReplicas(spec)
		fields := make([]string, 0, len(asked))
		for f := range asked {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			if n := asked[f]; n > limit {
				fes = append(fes, api.FieldError{Field: f, Message: fmt.Sprintf(
					"must be at most %d for a %s token (the server's limit for the role), not %d", limit, role, n)})
			}
		}
	}
	if def, ok := spec.(*api.WorkloadDefinitionSpec); ok && def.Helm != nil && def.Helm.Repository == "" && wr.chartDir != "" &&
		filepath.IsAbs(def.Helm.Chart) {
		rel, err := filepath.Rel(filepath.Clean(wr.chartDir), filepath.Clean(def.Helm.Chart))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			fes = append(fes, api.FieldError{Field: "spec.helm.chart", Message: fmt.Sprintf(
				"a local chart (no repository) must be inside the control plane's chart directory; %q is not (name it by a path relative to that directory)", def.Helm.Chart)})
		}
	}
	return fes
}

// lookup reads an object from the store.
func (s *Server) lookup(ctx context.Context, kind, id string) (*store.Object, error) {
	return s.cfg.Store.Get(ctx, kind, id)
}

// subject is the object a write is about: its id and stored spec (both empty for a create) and its name.
type subject struct {
	id   string
	name string
	prev json.RawMessage
}

// subjectOf is the subject of an update of cur.
func subjectOf(cur *store.Object) subject {
	return subject{id: cur.ID, name: cur.Name, prev: cur.Spec}
}

// check defaults and validates a spec with the object's name and labels, and resolves its references.
// Every problem is reported at once, as one 400.
func (s *Server) check(ctx context.Context, ki *api.KindInfo, subj subject, labels map[string]string, spec any) (*checked, error) {
	return checkIn(ctx, s, ki, subj, labels, spec)
}

// checkIn is check against a view of the objects.
func checkIn(ctx context.Context, v objectView, ki *api.KindInfo, subj subject, labels map[string]string, spec any) (*checked, error) {
	if err := mayWriteClusterScoped(ctx, spec); err != nil {
		return nil, err
	}
	ki.Default(spec)
	fes := api.ValidateMeta(subj.name, labels)
	fes = append(fes, ki.Validate(spec)...)
	fes = append(fes, validateWithKubernetes(spec)...)
	fes = append(fes, v.writeRules().check(ctx, spec)...)
	refSpecs := map[string]any{}
	var refs []store.Ref
	for _, fr := range ki.Refs(spec) {
		if subj.id != "" && fr.ID == subj.id {
			fes = append(fes, api.FieldError{Field: fr.Field, Message: fmt.Sprintf("must not name the %s itself", ki.Kind)})
			continue
		}
		target, err := v.lookup(ctx, fr.Kind, fr.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fes = append(fes, api.FieldError{Field: fr.Field, Message: fmt.Sprintf("%s %q not found", fr.Kind, fr.ID)})
			continue
		case err != nil:
			return nil, fmt.Errorf("resolve %s: %w", fr.Field, err)
		case target.DeletionRequestedAt != nil:
			fes = append(fes, api.FieldError{Field: fr.Field, Message: fmt.Sprintf("%s %q is being deleted", fr.Kind, target.Name)})
			continue
		}
		refs = append(refs, store.Ref{Kind: fr.Kind, ID: fr.ID, Name: target.Name})
		if tk, ok := api.LookupKind(fr.Kind); ok {
			ts := tk.NewSpec()
			if json.Unmarshal(target.Spec, ts) == nil {
				refSpecs[fr.Field] = ts
			}
		}
	}
	used, err := checkUsedBy(ctx, v, ki, subj, spec)
	if err != nil {
		return nil, err
	}
	fes = append(fes, used...)
	if ki.ValidateRefs != nil && len(fes) == 0 {
		fes = append(fes, ki.ValidateRefs(spec, refSpecs)...)
	}
	if inst, ok := spec.(*api.WorkloadInstanceSpec); ok && len(fes) == 0 {
		fe, err := usesCycle(ctx, v, subj, inst)
		if err != nil {
			return nil, err
		}
		if fe != nil {
			fes = append(fes, *fe)
		}
	}
	if ki.ValidatePeers != nil && len(fes) == 0 {
		peers, err := v.peers(ctx, ki, subj.name)
		if err != nil {
			return nil, err
		}
		fes = append(fes, ki.ValidatePeers(spec, peers)...)
	}
	if len(fes) > 0 {
		return nil, api.Invalid(fes...)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	return &checked{spec: data, refs: refs, users: specUsers(ki, spec)}, nil
}

// checkUsedBy resolves the objects a spec attaches its object to (KindInfo.UsedBy: the instance a
// database names): each must exist and not be being deleted, unless the stored spec already named it
// (the database outlives its instance, and stays writable once the instance is gone).
func checkUsedBy(ctx context.Context, v objectView, ki *api.KindInfo, subj subject, spec any) ([]api.FieldError, error) {
	if ki.UsedBy == nil {
		return nil, nil
	}
	before := map[string]bool{}
	if len(subj.prev) > 0 {
		prev := ki.NewSpec()
		if json.Unmarshal(subj.prev, prev) == nil {
			for _, fr := range ki.UsedBy(prev) {
				before[fr.ID] = true
			}
		}
	}
	var fes []api.FieldError
	for _, fr := range ki.UsedBy(spec) {
		if before[fr.ID] {
			continue
		}
		target, err := v.lookup(ctx, fr.Kind, fr.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fes = append(fes, api.FieldError{Field: fr.Field, Message: fmt.Sprintf("%s %q not found", fr.Kind, fr.ID)})
		case err != nil:
			return nil, fmt.Errorf("resolve %s: %w", fr.Field, err)
		case target.DeletionRequestedAt != nil:
			fes = append(fes, api.FieldError{Field: fr.Field, Message: fmt.Sprintf("%s %q is being deleted", fr.Kind, target.Name)})
		}
	}
	return fes, nil
}

// maxUsesWalk bounds how many instances the cycle check of spec.uses reads.
const maxUsesWalk = 10000

// usesCycle refuses a spec.uses that leads back to the instance, at any depth: each instance of a cycle
// would wait for the others to roll out first, for ever, and none could be deleted. It walks the uses of
// the instances named, depth first, and names the first edge of a cycle and its path (web → api → web).
// A new instance has no id yet, so nothing can use it and no cycle can pass through it.
//
// The walk reads the store outside the write's transaction: two concurrent updates that close a cycle
// between them (a uses b, while b is changed to use a) can both pass. Writes of uses are rare and
// operator-paced; the next write of either instance is refused, naming the cycle.
func usesCycle(ctx context.Context, v objectView, subj subject, spec *api.WorkloadInstanceSpec) (*api.FieldError, error) {
	if subj.id == "" {
		return nil, nil
	}
	names := map[string]string{subj.id: subj.name}
	visited := map[string]bool{}
	// path returns the cycle found through the chain of ids, as names.
	path := func(chain []string) string {
		parts := []string{subj.name}
		for _, id := range chain {
			parts = append(parts, names[id])
		}
		return strings.Join(append(parts, subj.name), " → ")
	}
	var walk func(id string, chain []string) (string, error)
	walk = func(id string, chain []string) (string, error) {
		if visited[id] || len(visited) >= maxUsesWalk {
			return "", nil
		}
		visited[id] = true
		o, err := v.lookup(ctx, api.KindWorkloadInstance, id)
		if errors.Is(err, store.ErrNotFound) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read used instance %s: %w", id, err)
		}
		names[id] = o.Name
		chain = append(chain, id)
		var s api.WorkloadInstanceSpec
		if err := json.Unmarshal(o.Spec, &s); err != nil {
			return "", nil //nolint:nilerr // a spec that does not decode uses nothing
		}
		for _, u := range s.Uses {
			if u.InstanceID == subj.id {
				return path(chain), nil
			}
			if found, err := walk(u.InstanceID, chain); found != "" || err != nil {
				return found, err
			}
		}
		return "", nil
	}
	for i, u := range spec.Uses {
		if u.InstanceID == subj.id {
			continue // refused as a self-reference
		}
		found, err := walk(u.InstanceID, nil)
		if err != nil {
			return nil, err
		}
		if found != "" {
			return &api.FieldError{Field: fmt.Sprintf("spec.uses[%d].instance_id", i),
				Message: fmt.Sprintf("makes a cycle of uses: %s (each would wait for the other to roll out first)", found)}, nil
		}
	}
	return nil, nil
}

// peers returns the other objects of a kind (all but the one named), for KindInfo.ValidatePeers. Kinds
// that have peer rules (runtime profiles) hold few objects, written by operators.
func (s *Server) peers(ctx context.Context, ki *api.KindInfo, self string) ([]api.NamedSpec, error) {
	var out []api.NamedSpec
	err := s.eachObject(ctx, ki, func(o *store.Object) {
		spec := ki.NewSpec()
		if o.Name != self && o.DeletionRequestedAt == nil && json.Unmarshal(o.Spec, spec) == nil {
			out = append(out, api.NamedSpec{Name: o.Name, Spec: spec})
		}
	})
	return out, err
}

// eachObject calls f with every object of a kind, a page at a time.
func (s *Server) eachObject(ctx context.Context, ki *api.KindInfo, f func(*store.Object)) error {
	after := ""
	for {
		page, err := s.cfg.Store.List(ctx, &store.ListParams{Kind: ki.Kind, Limit: 1000, After: after})
		if err != nil {
			return fmt.Errorf("list %s: %w", ki.Plural, err)
		}
		for _, o := range page.Objects {
			f(o)
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

// mayWriteClusterScoped refuses a workload definition that opts into cluster-scoped objects unless the
// caller is an admin: such objects reach beyond the instance's namespace.
func mayWriteClusterScoped(ctx context.Context, spec any) error {
	def, ok := spec.(*api.WorkloadDefinitionSpec)
	if !ok || !def.ClusterScoped || principalFrom(ctx).role == RoleAdmin {
		return nil
	}
	return &api.Error{Code: api.CodeForbidden, Field: "spec.cluster_scoped",
		Message: fmt.Sprintf("only an admin token may set cluster_scoped (this token's role is %q)", principalFrom(ctx).role)}
}

// initialStatus is the status of a new object, before its controller has seen it: the kind's zero status
// in phase Pending.
func initialStatus(ki *api.KindInfo) (json.RawMessage, error) {
	st := ki.NewStatus()
	if acc, ok := st.(api.StatusAccessor); ok {
		acc.Common().Phase = api.PhasePending
	}
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode initial status: %w", err)
	}
	return data, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	ki := kindFrom(r)
	data, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body writeBody
	spec, err := decodeWrite(ki, data, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := s.check(r.Context(), ki, subject{name: body.Name}, body.Labels, spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status, err := initialStatus(ki)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	owners, err := s.owners(r.Context(), body.Owners)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	obj, err := s.cfg.Store.Create(r.Context(), &store.CreateParams{
		Kind: ki.Kind, Name: body.Name, Labels: body.Labels, Spec: c.spec, Status: status, Refs: c.refs, Owners: owners, Users: c.users,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.committed(obj.ID)
	s.respond(w, r, http.StatusCreated, obj)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Query().Get("wait") {
	case "":
	case "reconciled", "gone":
		s.wait(w, r)
		return
	default:
		s.fail(w, r, invalid("wait", `must be "reconciled" or "gone"`))
		return
	}
	obj, err := s.cfg.Store.Get(r.Context(), kindFrom(r).Kind, chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, obj)
}

func (s *Server) getByName(w http.ResponseWriter, r *http.Request) {
	obj, err := s.cfg.Store.GetByName(r.Context(), kindFrom(r).Kind, chi.URLParam(r, "name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, obj)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	p, err := listParams(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.cfg.Store.List(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The page is api.List's JSON, written by appendWire for each item.
	b := make([]byte, 0, 512*len(res.Objects)+64)
	b = append(b, `{"items":[`...)
	for i, o := range res.Objects {
		wo, err := s.wire(r, o)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendWire(b, wo)
	}
	b = append(b, ']')
	if res.Next != "" {
		b = append(b, `,"continue":"`...)
		b = base64.RawURLEncoding.AppendEncode(b, []byte(res.Next)) // no character JSON would escape
		b = append(b, '"')
	}
	writeRawJSON(w, http.StatusOK, append(b, '}'))
}

// count answers how many objects a list with the same filters would return over all its pages.
func (s *Server) count(w http.ResponseWriter, r *http.Request) {
	p, err := listParams(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.cfg.Store.Count(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Count{Count: n})
}

// listParams reads a list's filters and page from the query. A bad value is an error naming its
// parameter.
func listParams(r *http.Request) (*store.ListParams, error) {
	q := r.URL.Query()
	p := &store.ListParams{Kind: kindFrom(r).Kind, Limit: defaultListLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return nil, invalid("limit", fmt.Sprintf("must be an integer between 1 and %d", maxListLimit))
		}
		p.Limit = n
	}
	if v := q.Get("continue"); v != "" {
		after, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(after) == 0 || strings.IndexByte(string(after), 0) >= 0 {
			return nil, invalid("continue", "is not a continue token from a previous page")
		}
		p.After = string(after)
	}
	labels, err := parseSelector(q.Get("label_selector"))
	if err != nil {
		return nil, err
	}
	p.Labels = labels
	p.References = q.Get("references")
	for _, f := range []struct {
		name string
		into *bool
	}{{"pending", &p.Pending}, {"owned", &p.Owned}} {
		if v := q.Get(f.name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, invalid(f.name, "must be true or false")
			}
			*f.into = b
		}
	}
	return p, nil
}

// parseSelector parses "k=v,k2=v2" (equality only).
func parseSelector(sel string) (map[string]string, error) {
	if strings.TrimSpace(sel) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, part := range strings.Split(sel, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(strings.TrimPrefix(v, "="))
		if !ok || k == "" {
			return nil, invalid("label_selector", fmt.Sprintf("%q is not key=value", part))
		}
		if fes := api.ValidateMeta("x", map[string]string{k: v}); len(fes) > 0 {
			return nil, invalid("label_selector", fmt.Sprintf("%q: %s", part, fes[0].Message))
		}
		out[k] = v
	}
	return out, nil
}

// ifMatch reads the optional If-Match header: an integer resource version (quotes allowed).
func ifMatch(r *http.Request) (int64, error) {
	v := strings.Trim(strings.TrimSpace(r.Header.Get("If-Match")), `"`)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, invalid("If-Match", fmt.Sprintf("must be a resource version (a positive integer), not %q", r.Header.Get("If-Match")))
	}
	return n, nil
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	ki := kindFrom(r)
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
	var body updateBody
	spec, err := decodeWrite(ki, data, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if body.ResourceVersion != nil {
		if rv != 0 && rv != *body.ResourceVersion {
			s.fail(w, r, invalid("resource_version", fmt.Sprintf("differs from If-Match (%d != %d)", *body.ResourceVersion, rv)))
			return
		}
		rv = *body.ResourceVersion
	}
	cur, err := s.cfg.Store.Get(r.Context(), ki.Kind, chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rv != 0 && rv != cur.ResourceVersion {
		s.fail(w, r, fmt.Errorf("%w: resource version %d, current %d", store.ErrStale, rv, cur.ResourceVersion))
		return
	}
	if err := body.readOnlyChanged(cur); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := keepWriteOnly(ki, spec, cur.Spec); err != nil {
		s.fail(w, r, err)
		return
	}
	if !sameOwners(body.Owners, cur.Owners) {
		s.fail(w, r, invalid("owners", "are set at creation and cannot change"))
		return
	}
	if body.Name != "" && body.Name != cur.Name {
		s.fail(w, r, invalid("name", fmt.Sprintf("is immutable (the object is named %q)", cur.Name)))
		return
	}
	s.writeSpec(w, r, cur, rv, body.Labels, spec)
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	ki := kindFrom(r)
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/merge-patch+json" {
		s.fail(w, r, invalid("Content-Type", "must be application/merge-patch+json (RFC 7396)"))
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
	patch, err := parseJSON(data)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pm, ok := patch.(map[string]any)
	if !ok {
		s.fail(w, r, invalid("body", "a merge patch must be a JSON object"))
		return
	}
	if fe := checkShape(pm, reflect.TypeOf(patchBody{}), ""); fe != nil {
		s.fail(w, r, api.Invalid(*fe))
		return
	}
	cur, err := s.cfg.Store.Get(r.Context(), ki.Kind, chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	doc, err := json.Marshal(patchBody{Labels: cur.Labels, Spec: cur.Spec})
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode object: %w", err))
		return
	}
	target, err := parseJSON(doc)
	if err != nil {
		s.fail(w, r, fmt.Errorf("parse stored object: %w", err))
		return
	}
	merged, err := json.Marshal(mergePatch(target, pm))
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode patched object: %w", err))
		return
	}
	var body writeBody
	spec, err := decodeWrite(ki, merged, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeSpec(w, r, cur, rv, body.Labels, spec)
}

// writeSpec checks and stores a new spec and labels for an existing object, and answers with it.
func (s *Server) writeSpec(w http.ResponseWriter, r *http.Request, cur *store.Object, rv int64, labels map[string]string, spec any) {
	obj, err := s.storeSpec(r.Context(), cur, rv, labels, spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, obj)
}

func (s *Server) storeSpec(ctx context.Context, cur *store.Object, rv int64, labels map[string]string, spec any) (*store.Object, error) {
	ki, _ := api.LookupKind(cur.Kind)
	if cur.DeletionRequestedAt != nil {
		return nil, api.Errorf(api.CodeConflict, "%s %q is being deleted", cur.Kind, cur.Name)
	}
	if rv != 0 && rv != cur.ResourceVersion {
		return nil, fmt.Errorf("%w: If-Match %d, current %d", store.ErrStale, rv, cur.ResourceVersion)
	}
	c, err := s.check(ctx, ki, subjectOf(cur), labels, spec)
	if err != nil {
		return nil, err
	}
	obj, err := s.cfg.Store.UpdateSpec(ctx, &store.UpdateSpecParams{
		Kind: cur.Kind, ID: cur.ID, IfMatch: rv, Labels: labels, Spec: c.spec, Refs: c.refs, Users: &c.users,
	})
	if err != nil {
		return nil, err
	}
	s.committed(obj.ID)
	return obj, nil
}

// respond writes one object, hiding write-only fields from roles that may not see them.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, status int, obj *store.Object) {
	wo, err := s.wire(r, obj)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeRawJSON(w, status, appendWire(nil, wo))
}

// appendWire appends an object's JSON in the v1 envelope (api.Object's encoding): its metadata through
// encoding/json, then its spec and status as the store returned them. The store holds only valid JSON
// (it canonicalises every write), so they are copied instead of being checked and compacted again byte
// by byte, as json.Marshal does with a json.RawMessage: that was 5.6% of the control plane's CPU in a
// full resync of 100,000 instances (make bench, sim section on PostgreSQL, whose jsonb prints spaces
// that now go out as they are).
func appendWire(b []byte, wo *api.RawObject) []byte {
	b = appendMeta(append(b, '{'), &wo.Meta)
	b = append(appendRawOrNull(append(b, `,"spec":`...), wo.Spec), `,"status":`...)
	return append(appendRawOrNull(b, wo.Status), '}')
}

// appendMeta appends the members of api.Meta's JSON, as encoding/json writes them (same names, order,
// omissions and escaping; TestAppendWireIsTheObjectsJSON compares the two on every field), without
// reflection: encoding the metadata of a page of 1,000 objects took most of its 3.6 ms.
func appendMeta(b []byte, m *api.Meta) []byte {
	if m.ID != "" {
		b = append(appendJSONString(append(b, `"id":`...), m.ID), ',')
	}
	if m.Kind != "" {
		b = append(appendJSONString(append(b, `"kind":`...), m.Kind), ',')
	}
	b = appendJSONString(append(b, `"name":`...), m.Name)
	if len(m.Labels) > 0 {
		b = append(b, `,"labels":{`...)
		for i, k := range slices.Sorted(maps.Keys(m.Labels)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(append(appendJSONString(b, k), ':'), m.Labels[k])
		}
		b = append(b, '}')
	}
	if m.Generation != 0 {
		b = strconv.AppendInt(append(b, `,"generation":`...), m.Generation, 10)
	}
	if m.ResourceVersion != 0 {
		b = strconv.AppendInt(append(b, `,"resource_version":`...), m.ResourceVersion, 10)
	}
	if !m.CreatedAt.IsZero() {
		b = appendJSONTime(append(b, `,"created_at":`...), m.CreatedAt)
	}
	if !m.UpdatedAt.IsZero() {
		b = appendJSONTime(append(b, `,"updated_at":`...), m.UpdatedAt)
	}
	if m.DeletionRequestedAt != nil {
		b = appendJSONTime(append(b, `,"deletion_requested_at":`...), *m.DeletionRequestedAt)
	}
	if m.DeletionOrphan {
		b = append(b, `,"deletion_orphan":true`...)
	}
	if len(m.Owners) > 0 {
		b = append(b, `,"owners":[`...)
		for i, o := range m.Owners {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(append(appendJSONString(append(b, `{"kind":`...), o.Kind), `,"id":`...), o.ID)
			if o.Name != "" {
				b = appendJSONString(append(b, `,"name":`...), o.Name)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return b
}

// appendJSONString appends s as a JSON string. Printable ASCII that encoding/json leaves as it is goes
// straight in; anything else (quotes, control characters, <, >, &, non-ASCII) goes through json.Marshal,
// so that the escaping is encoding/json's.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// appendJSONTime appends t as time.Time's MarshalJSON does (RFC 3339 with nanoseconds, quoted); stored
// times are within the years it accepts.
func appendJSONTime(b []byte, t time.Time) []byte {
	return append(t.AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
}

// appendRawOrNull appends raw, or null when it is empty (as json.Marshal writes a nil json.RawMessage).
func appendRawOrNull(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// wire converts a stored object to the v1 envelope for the caller.
func (s *Server) wire(r *http.Request, o *store.Object) (*api.RawObject, error) {
	spec := o.Spec
	if ki, ok := api.LookupKind(o.Kind); ok && len(ki.WriteOnly) > 0 && !roleCan(principalFrom(r.Context()).role, permReadSecrets) {
		var err error
		if spec, err = hideWriteOnly(ki, spec); err != nil {
			return nil, err
		}
	}
	status := o.Status
	if len(status) == 0 {
		status = json.RawMessage(`{}`)
	}
	return &api.RawObject{
		Meta: api.Meta{
			ID: o.ID, Kind: o.Kind, Name: o.Name, Labels: o.Labels,
			Generation: o.Generation, ResourceVersion: o.ResourceVersion,
			CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, DeletionRequestedAt: o.DeletionRequestedAt, DeletionOrphan: o.DeletionOrphan,
			Owners: wireRefs(o.Owners),
		},
		Spec:   spec,
		Status: status,
	}, nil
}

// hideWriteOnly zeroes the write-only fields of a stored spec; omitempty then drops them.
func hideWriteOnly(ki *api.KindInfo, raw json.RawMessage) (json.RawMessage, error) {
	spec := ki.NewSpec()
	if err := json.Unmarshal(raw, spec); err != nil {
		return nil, fmt.Errorf("decode stored %s spec: %w", ki.Kind, err)
	}
	v := reflect.ValueOf(spec).Elem()
	for _, f := range structFields(v.Type()) {
		for _, name := range ki.WriteOnly {
			if f.name == name {
				fv := v.FieldByIndex(f.index)
				fv.Set(reflect.Zero(fv.Type()))
			}
		}
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s spec: %w", ki.Kind, err)
	}
	return out, nil
}
