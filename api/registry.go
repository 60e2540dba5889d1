package api

import (
	"fmt"
	"sort"
	"sync"
)

// FieldRef is a reference from a spec field to another object, e.g. spec.runtime_id naming a
// kubernetes_runtime. The API server checks that each referenced object exists, and the references form
// the dependency graph that protects deletes.
type FieldRef struct {
	// Field is the JSON path of the referencing field, e.g. "spec.runtime_id".
	Field string
	// Kind is the referenced object's singular kind.
	Kind string
	// ID is the referenced object's id.
	ID string
}

// KindInfo describes one kind to the API server: how to decode, default and validate its spec, which
// objects it references and which spec fields are write-only. Specs are passed as pointers to the kind's
// spec type (the value NewSpec returns).
type KindInfo struct {
	// Kind is the singular name, e.g. "kubernetes_runtime".
	Kind string
	// Plural is the collection name, e.g. "kubernetes_runtimes".
	Plural string
	// Title is the kind for people, e.g. "Kubernetes runtime".
	Title string
	// Description documents the kind, once, in Markdown: the OpenAPI document, the Terraform resource
	// and data sources, and the generated docs all use it.
	Description string
	// ShortNames are the CLI's short names for the kind, each also accepted with an "s" (e.g. "instance"
	// and "instances").
	ShortNames []string
	// NewSpec returns a pointer to a zero spec, for strict decoding.
	NewSpec func() any
	// NewStatus returns a pointer to a zero status, for strict decoding.
	NewStatus func() any
	// Default fills in defaults before validation.
	Default func(spec any)
	// Validate checks the spec on its own; field paths start with "spec.".
	Validate func(spec any) []FieldError
	// Refs lists the objects the spec references.
	Refs func(spec any) []FieldRef
	// ValidateRefs checks the spec against the specs of the objects it references, keyed by
	// FieldRef.Field; may be nil.
	ValidateRefs func(spec any, refs map[string]any) []FieldError
	// WriteOnly names the top-level spec fields (JSON names) that are returned only to the controller
	// role, e.g. "kubeconfig".
	WriteOnly []string
	// ValidatePeers checks the spec against the other objects of its kind (their names and specs); may
	// be nil. The API server calls it on create and update, e.g. to refuse overlapping profiles.
	ValidatePeers func(spec any, peers []NamedSpec) []FieldError
	// UsedBy lists the objects a spec attaches its object to, which use it: edges of the dependency graph
	// that point the other way from Refs (a database naming, in spec.instance_id, the instance it serves).
	// The API server checks that each exists when it is first named, and refuses to delete the object
	// while any of them exists (409 naming them), as for an object that the users' own references name.
	UsedBy func(spec any) []FieldRef
	// StatusRefs lists the objects a status references: edges of the dependency graph that a controller
	// decides (the runtimes an instance is placed on). The API server records them on status writes, like
	// Refs, so that they protect deletes and notify the status's object; may be nil.
	StatusRefs func(status any) []FieldRef
	// SpecType and StatusType are zero values of the spec and status types, for reflection.
	SpecType, StatusType any
}

// KindDef is the typed definition of a kind, turned into a KindInfo by RegisterKind.
type KindDef[S any, T any] struct {
	// Kind is the singular name.
	Kind string
	// Title is the kind for people, e.g. "Kubernetes runtime".
	Title string
	// Description documents the kind, once (Markdown).
	Description string
	// ShortNames are the CLI's short names for the kind.
	ShortNames []string
	// Default fills in defaults before validation; may be nil.
	Default func(*S)
	// Validate checks the spec; may be nil.
	Validate func(*S) []FieldError
	// Refs lists referenced objects; may be nil.
	Refs func(*S) []FieldRef
	// ValidateRefs checks the spec against the referenced objects' specs (pointers to their spec types),
	// keyed by FieldRef.Field; may be nil.
	ValidateRefs func(*S, map[string]any) []FieldError
	// WriteOnly names write-only top-level spec fields.
	WriteOnly []string
	// ValidatePeers checks the spec against the other objects of the kind; may be nil.
	ValidatePeers func(*S, []Peer[S]) []FieldError
	// StatusRefs lists the objects a status references; may be nil.
	StatusRefs func(*T) []FieldRef
	// UsedBy lists the objects the spec attaches the object to, which use it; may be nil.
	UsedBy func(*S) []FieldRef
}

// NamedSpec is an object's name and its spec (a pointer to the kind's spec type), for KindInfo.ValidatePeers.
type NamedSpec struct {
	// Name is the object's name.
	Name string
	// Spec points to the object's spec.
	Spec any
}

// Peer is another object of the same kind, for KindDef.ValidatePeers.
type Peer[S any] struct {
	// Name is the peer's name.
	Name string
	// Spec is the peer's spec.
	Spec *S
}

var registry = struct {
	sync.RWMutex
	byKind   map[string]*KindInfo
	byPlural map[string]*KindInfo
}{byKind: map[string]*KindInfo{}, byPlural: map[string]*KindInfo{}}

// RegisterKind adds a kind to the registry the API server serves. It panics when the kind is already
// registered, like database/sql.Register.
func RegisterKind[S any, T any](d KindDef[S, T]) *KindInfo {
	var zs S
	var zt T
	ki := &KindInfo{
		Kind:        d.Kind,
		Plural:      Plural(d.Kind),
		Title:       d.Title,
		Description: d.Description,
		ShortNames:  d.ShortNames,
		NewSpec:     func() any { return new(S) },
		NewStatus:   func() any { return new(T) },
		Default: func(spec any) {
			if d.Default != nil {
				d.Default(spec.(*S))
			}
		},
		Validate: func(spec any) []FieldError {
			if d.Validate == nil {
				return nil
			}
			return d.Validate(spec.(*S))
		},
		Refs: func(spec any) []FieldRef {
			if d.Refs == nil {
				return nil
			}
			return d.Refs(spec.(*S))
		},
		UsedBy: func(spec any) []FieldRef {
			if d.UsedBy == nil {
				return nil
			}
			return d.UsedBy(spec.(*S))
		},
		WriteOnly:  d.WriteOnly,
		SpecType:   zs,
		StatusType: zt,
	}
	if d.ValidatePeers != nil {
		ki.ValidatePeers = func(spec any, peers []NamedSpec) []FieldError {
			typed := make([]Peer[S], len(peers))
			for i, p := range peers {
				typed[i] = Peer[S]{Name: p.Name, Spec: p.Spec.(*S)}
			}
			return d.ValidatePeers(spec.(*S), typed)
		}
	}
	if d.StatusRefs != nil {
		ki.StatusRefs = func(status any) []FieldRef { return d.StatusRefs(status.(*T)) }
	}
	if d.ValidateRefs != nil {
		ki.ValidateRefs = func(spec any, refs map[string]any) []FieldError { return d.ValidateRefs(spec.(*S), refs) }
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byKind[ki.Kind]; dup {
		panic(fmt.Sprintf("client: kind %q registered twice", ki.Kind))
	}
	registry.byKind[ki.Kind] = ki
	registry.byPlural[ki.Plural] = ki
	return ki
}

// LookupKind returns the registered kind with the given singular name.
func LookupKind(kind string) (*KindInfo, bool) {
	registry.RLock()
	defer registry.RUnlock()
	ki, ok := registry.byKind[kind]
	return ki, ok
}

// LookupPlural returns the registered kind with the given collection name.
func LookupPlural(plural string) (*KindInfo, bool) {
	registry.RLock()
	defer registry.RUnlock()
	ki, ok := registry.byPlural[plural]
	return ki, ok
}

// Kinds returns every registered kind, sorted by name.
func Kinds() []*KindInfo {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]*KindInfo, 0, len(registry.byKind))
	for _, ki := range registry.byKind {
		out = append(out, ki)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
