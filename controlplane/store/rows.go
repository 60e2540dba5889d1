package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The bun row types below are the store's private picture of its tables. They never leave the package:
// methods convert them to and from the Object, Event, OutboxEntry and Token types of the Store seam.

type objectRow struct {
	bun.BaseModel `bun:"table:objects,alias:o"`

	ID                  string     `bun:"id,pk"`
	Kind                string     `bun:"kind"`
	Name                string     `bun:"name"`
	Generation          int64      `bun:"generation"`
	ResourceVersion     int64      `bun:"resource_version"`
	Spec                string     `bun:"spec"`
	Status              string     `bun:"status"`
	CreatedAt           time.Time  `bun:"created_at"`
	UpdatedAt           time.Time  `bun:"updated_at"`
	DeletionRequestedAt *time.Time `bun:"deletion_requested_at"`
	DeletionOrphan      bool       `bun:"deletion_orphan"`
	Owners              string     `bun:"owners"`
}

type labelRow struct {
	bun.BaseModel `bun:"table:object_labels"`

	ObjectID string `bun:"object_id,pk"`
	Key      string `bun:"key,pk"`
	Value    string `bun:"value"`
}

// userRow is one object that uses another by the other's spec (CreateParams.Users).
type userRow struct {
	bun.BaseModel `bun:"table:object_users"`

	ObjectID string `bun:"object_id,pk"`
	UserID   string `bun:"user_id,pk"`
}

type refRow struct {
	bun.BaseModel `bun:"table:object_refs"`

	FromID   string `bun:"from_id,pk"`
	FromKind string `bun:"from_kind"`
	ToID     string `bun:"to_id,pk"`
	ToKind   string `bun:"to_kind"`
	// Via is refsFromSpec or refsFromStatus: each side is replaced on its own.
	Via string `bun:"via,pk"`
}

// Where a reference comes from.
const (
	refsFromSpec   = "spec"
	refsFromStatus = "status"
)

type eventRow struct {
	bun.BaseModel `bun:"table:events"`

	ID         int64     `bun:"id,pk,autoincrement"`
	ObjectID   string    `bun:"object_id"`
	Kind       string    `bun:"kind"`
	Type       string    `bun:"type"`
	Reason     string    `bun:"reason"`
	Message    string    `bun:"message"`
	Generation int64     `bun:"generation"`
	DurationMS int64     `bun:"duration_ms"`
	Source     string    `bun:"source"`
	CreatedAt  time.Time `bun:"created_at"`
	Count      int64     `bun:"count"`
	LastSeenAt time.Time `bun:"last_seen_at,nullzero"`
}

type outboxRow struct {
	bun.BaseModel `bun:"table:outbox"`

	ID        int64     `bun:"id,pk,autoincrement"`
	Kind      string    `bun:"kind"`
	ObjectID  string    `bun:"object_id"`
	CreatedAt time.Time `bun:"created_at"`
	// TraceParent is the W3C traceparent of the write that made the row, or "".
	TraceParent string `bun:"trace_parent"`
}

type tokenRow struct {
	bun.BaseModel `bun:"table:tokens"`

	Hash      string     `bun:"hash,pk"`
	ID        string     `bun:"id"`
	Name      string     `bun:"name"`
	Role      string     `bun:"role"`
	CreatedAt time.Time  `bun:"created_at"`
	ExpiresAt *time.Time `bun:"expires_at"`
}

// dependentRow is one row of the dependents query (object_refs joined to the referencing object).
type dependentRow struct {
	Kind string `bun:"kind"`
	ID   string `bun:"id"`
	Name string `bun:"name"`
}

func (r *objectRow) toObject(labels map[string]string) *Object {
	if labels == nil {
		labels = map[string]string{}
	}
	o := &Object{
		ID:              r.ID,
		Kind:            r.Kind,
		Name:            r.Name,
		Labels:          labels,
		Generation:      r.Generation,
		ResourceVersion: r.ResourceVersion,
		Spec:            json.RawMessage(r.Spec),
		Status:          json.RawMessage(r.Status),
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
	if r.DeletionRequestedAt != nil {
		t := r.DeletionRequestedAt.UTC()
		o.DeletionRequestedAt = &t
		o.DeletionOrphan = r.DeletionOrphan
	}
	if r.Owners != "" && r.Owners != "[]" {
		_ = json.Unmarshal([]byte(r.Owners), &o.Owners) // written by Create from []Ref
	}
	return o
}

func (r *eventRow) toEvent() *Event {
	return &Event{
		ID:         r.ID,
		ObjectID:   r.ObjectID,
		Kind:       r.Kind,
		Type:       r.Type,
		Reason:     r.Reason,
		Message:    r.Message,
		Generation: r.Generation,
		DurationMS: r.DurationMS,
		Source:     r.Source,
		CreatedAt:  r.CreatedAt.UTC(),
		Count:      max(r.Count, 1),
		LastSeenAt: cmp.Or(r.LastSeenAt, r.CreatedAt).UTC(),
	}
}

func (r *outboxRow) toEntry() *OutboxEntry {
	return &OutboxEntry{ID: r.ID, Kind: r.Kind, ObjectID: r.ObjectID, CreatedAt: r.CreatedAt.UTC(), TraceParent: r.TraceParent}
}

func (r *tokenRow) toToken() *Token {
	t := &Token{ID: r.ID, Hash: r.Hash, Name: r.Name, Role: r.Role, CreatedAt: r.CreatedAt.UTC()}
	if r.ExpiresAt != nil {
		e := r.ExpiresAt.UTC()
		t.ExpiresAt = &e
	}
	return t
}

func labelRows(objectID string, labels map[string]string) []labelRow {
	rows := make([]labelRow, 0, len(labels))
	for k, v := range labels {
		rows = append(rows, labelRow{ObjectID: objectID, Key: k, Value: v})
	}
	return rows
}

func copyLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// canonicalJSON returns doc with insignificant whitespace removed and object keys sorted, so that two
// documents that mean the same compare equal byte for byte. Numbers keep their text. An empty document is {}.
func canonicalJSON(doc json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return "{}", nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("trailing data after JSON document")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// isUniqueViolation reports whether err is a unique or primary key constraint failure, in either dialect.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var pe pgdriver.Error
	if errors.As(err, &pe) {
		return pe.Field('C') == "23505"
	}
	return false
}

// isBusy reports whether err is SQLite's "database is locked" (SQLITE_BUSY, any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// isForeignKeyViolation reports whether err is a foreign key constraint failure, in either dialect.
func isForeignKeyViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	}
	var pe pgdriver.Error
	if errors.As(err, &pe) {
		return pe.Field('C') == "23503"
	}
	return false
}

// notFound wraps ErrNotFound with the kind and id (or name) that was missing.
func notFound(kind, what string) error {
	return fmt.Errorf("%w: %s %q", ErrNotFound, kind, what)
}
