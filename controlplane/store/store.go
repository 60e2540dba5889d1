// Package store keeps the control plane's desired and observed state in a relational database through bun:
// SQLite (pure Go, WAL mode) by default, PostgreSQL at scale. It is the only package that speaks SQL.
//
// Every spec change commits together with an outbox row in one transaction; the broker's relay publishes
// outbox rows to NATS. Nothing is published any other way, so a change is never lost between the database
// and the broker.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Sentinel errors. Wrapped errors carry detail; test with errors.Is.
var (
	// ErrNotFound: no object with that kind and id (or name).
	ErrNotFound = errors.New("not found")
	// ErrNameTaken: another object of the kind has that name (a unique constraint).
	ErrNameTaken = errors.New("name already taken")
	// ErrStale: the If-Match resource version is not the current one.
	ErrStale = errors.New("resource version is stale")
	// ErrNotDeleting: finalize was called on an object whose deletion was not requested.
	ErrNotDeleting = errors.New("deletion not requested")
)

// DependentsError is returned when an object cannot be deleted because others reference it.
type DependentsError struct {
	// Dependents are the referencing objects.
	Dependents []Ref
}

func (e *DependentsError) Error() string { return "object has dependents" }

// Object is one stored object of any kind. Spec and Status are JSON documents whose shape the server
// validates; the store does not interpret them.
type Object struct {
	ID                  string
	Kind                string
	Name                string
	Labels              map[string]string
	Generation          int64
	ResourceVersion     int64
	Spec                json.RawMessage
	Status              json.RawMessage
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
	// DeletionOrphan says the deletion abandons what the object made in the compute space.
	DeletionOrphan bool
	// Owners are the objects this one was created for, recorded at creation.
	Owners []Ref
}

// DeletionOptions tune RequestDeletion.
type DeletionOptions struct {
	// Orphan abandons what the object made in the compute space instead of cleaning it up. It may be
	// set on an object already being deleted (a cleanup that cannot finish), never unset.
	Orphan bool
}

// Ref is a reference from one object to another; references form the dependency graph.
type Ref struct {
	// Kind, ID and Name identify the referencing (for Dependents) or referenced object.
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// CreateParams create an object. ID, Generation (1), ResourceVersion (1) and timestamps are assigned by the store.
type CreateParams struct {
	Kind   string
	Name   string
	Labels map[string]string
	Spec   json.RawMessage
	Status json.RawMessage
	// Refs are the objects the new object references (by kind and id); each must exist and not be deleting.
	Refs []Ref
	// Owners are the objects the new object is created for (by a controller). Unlike Refs they do not
	// protect the owner from deletion: the owned object is garbage-collected after its owners go.
	Owners []Ref
	// Users are the ids of the objects the new object's spec attaches it to, which use it (a secret's
	// instances): a list filtered by reference to one of them lists the object too. Unlike Refs they
	// protect nothing and need not exist later.
	Users []string
}

// UpdateSpecParams replace an object's labels and spec.
type UpdateSpecParams struct {
	Kind, ID string
	// IfMatch, when non-zero, must equal the current resource version.
	IfMatch int64
	Labels  map[string]string
	Spec    json.RawMessage
	Refs    []Ref
	// Users, when not nil, replace the ids of the objects the spec attaches the object to (see
	// CreateParams.Users).
	Users *[]string
}

// UpdateStatusParams replace an object's status. Generation never changes.
type UpdateStatusParams struct {
	Kind, ID string
	// IfMatch, when non-zero, must equal the current resource version.
	IfMatch int64
	Status  json.RawMessage
	// Refs, when not nil, replace the references the status makes (kinds with api.KindInfo.StatusRefs):
	// they protect their targets from deletion and notify this object like a spec's. Targets that no
	// longer exist are skipped.
	Refs *[]Ref
	// Check, when set, is called with the object's generation once its row is locked, before IfMatch is
	// compared: an error from it fails the update, with nothing written. It lets a caller validate the
	// status against the object without reading the object first.
	Check func(generation int64) error
}

// ListParams filter and page a list. Results are ordered by id.
type ListParams struct {
	Kind string
	// Labels must all match (equality).
	Labels map[string]string
	// References, when set, keeps only objects that reference the object with this id.
	References string
	// Pending keeps only the objects that are not reconciled: deletion requested, not Ready, or Ready
	// at an older generation. A partial index holds exactly those, so the page costs what is pending.
	Pending bool
	// Owned keeps only the objects created for owners (Meta.Owners), from a partial index too.
	Owned bool
	// Limit is the page size.
	Limit int
	// After is the id the previous page ended with.
	After string
}

// ListResult is one page.
type ListResult struct {
	Objects []*Object
	// Next is the last id of this page when more pages follow, else "".
	Next string
}

// Event is an appended record of something that happened to an object.
type Event struct {
	ID       int64
	ObjectID string
	Kind     string
	Type     string
	Reason   string
	Message  string
	// Generation is the object's generation the event is about; 0 on append means the object's current
	// generation, read in the append's transaction.
	Generation int64
	DurationMS int64
	Source     string
	// CreatedAt is when the event first happened.
	CreatedAt time.Time
	// Count is how many times it happened: an identical event (same object, type, reason, message,
	// source and generation) appended within EventRepeatWindow of the last one is counted on its row.
	Count int64
	// LastSeenAt is when it last happened.
	LastSeenAt time.Time
}

// OutboxEntry asks the relay to notify the controller of Kind that object ObjectID needs reconciling.
type OutboxEntry struct {
	ID        int64
	Kind      string
	ObjectID  string
	CreatedAt time.Time
	// TraceParent is the W3C traceparent of the write that made the entry ("" when it was not traced):
	// the relay continues that trace.
	TraceParent string
}

// Token is an API bearer token. Only its SHA-256 hash is stored.
type Token struct {
	// ID is the token's public identifier, used to list and revoke it (the first 16 hex digits of the
	// hash unless set).
	ID        string
	Hash      string
	Name      string
	Role      string
	CreatedAt time.Time
	// ExpiresAt, when set, is when the token stops being accepted.
	ExpiresAt *time.Time
}

// Store is the seam between the control plane and its database. Every method is atomic and sees one
// snapshot. Concurrent writes may share one transaction (group commit), each in a savepoint of its own:
// a write fails or succeeds alone, and returns only after the transaction holding it has committed.
type Store interface {
	// Create inserts an object, its label and reference rows, and an outbox row for its kind.
	Create(ctx context.Context, p *CreateParams) (*Object, error)
	// Get returns an object by kind and id.
	Get(ctx context.Context, kind, id string) (*Object, error)
	// GetByName returns an object by kind and name.
	GetByName(ctx context.Context, kind, name string) (*Object, error)
	// List returns one page of objects of a kind.
	List(ctx context.Context, p *ListParams) (*ListResult, error)
	// Count counts the objects of a kind that List would return over every page (Limit and After
	// are ignored), without reading them.
	Count(ctx context.Context, p *ListParams) (int, error)
	// UpdateSpec replaces labels and spec. Generation increases only when the spec bytes change;
	// resource version always increases. Writes an outbox row for the object.
	UpdateSpec(ctx context.Context, p *UpdateSpecParams) (*Object, error)
	// UpdateStatus replaces the status and increases the resource version. When the status's phase or
	// observed_generation changes, it writes outbox rows for the objects that reference this one, so that
	// they re-check a dependency whose readiness changed.
	UpdateStatus(ctx context.Context, p *UpdateStatusParams) (*Object, error)
	// RequestDeletion sets deletion_requested_at (once) and writes an outbox row. It fails with a
	// *DependentsError when other objects reference this one.
	RequestDeletion(ctx context.Context, kind, id string, opts DeletionOptions) (*Object, error)
	// Dependents lists the objects that reference the object with the given id.
	Dependents(ctx context.Context, id string) ([]Ref, error)
	// Finalize deletes an object whose deletion was requested, with its labels and references, and
	// writes outbox rows for the objects it referenced.
	Finalize(ctx context.Context, kind, id string) error
	// AppendEvent records an event, keeping at most the newest 200 per object.
	AppendEvent(ctx context.Context, ev *Event) error
	// ListEvents returns an object's events, oldest first, at most limit (the newest ones).
	ListEvents(ctx context.Context, objectID string, limit int) ([]*Event, error)
	// Enqueue writes an outbox row for an object without changing it (used by resync and by hooks).
	Enqueue(ctx context.Context, kind, id string) error
	// PendingOutbox returns up to limit outbox entries, oldest first.
	PendingOutbox(ctx context.Context, limit int) ([]*OutboxEntry, error)
	// DeleteOutbox removes delivered outbox entries.
	DeleteOutbox(ctx context.Context, ids []int64) error
	// OutboxStats returns the number of pending entries and the age of the oldest.
	OutboxStats(ctx context.Context) (pending int64, oldest time.Duration, err error)
	// CountObjects counts objects by phase and by the fields that p names, with how many are not
	// reconciled and since when, in one aggregate query (metrics read it at scrape time).
	CountObjects(ctx context.Context, p *CountParams) ([]*ObjectCount, error)
	// CountObjectsByKind returns CountObjects' groups by kind (and phase), read from counts kept on every
	// write and from an index, at a cost that does not grow with the number of objects (metrics read it
	// at scrape time). OldestUnreconciled is the kind's, on every group of the kind with unreconciled
	// objects.
	CountObjectsByKind(ctx context.Context) ([]*ObjectCount, error)
	// CreateToken stores a token hash with its role.
	CreateToken(ctx context.Context, t *Token) error
	// GetToken returns the token with that hash.
	GetToken(ctx context.Context, hash string) (*Token, error)
	// ListTokens returns every token (hashes included), oldest first.
	ListTokens(ctx context.Context) ([]*Token, error)
	// DeleteToken revokes the token with that id (ErrNotFound when there is none).
	DeleteToken(ctx context.Context, id string) error
	// Ping checks the database connection.
	Ping(ctx context.Context) error
	// Close releases the database.
	Close() error
}
