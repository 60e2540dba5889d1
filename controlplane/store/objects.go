package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// List page sizes.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Row lock strengths for PostgreSQL (SQLite serialises writers instead and ignores them). A writer of an
// object's columns takes noKeyUpdate, which does not block objects that are being created with a reference
// to it (keyShare). Deleting takes update, which does: a reference is never added to an object whose
// deletion is in progress, and a deletion never misses a reference added concurrently.
const (
	lockKeyShare    = "KEY SHARE"
	lockNoKeyUpdate = "NO KEY UPDATE"
	lockUpdate      = "UPDATE"
)

// Create inserts an object, its label and reference rows, and an outbox row for its kind.
func (s *bunStore) Create(ctx context.Context, p *CreateParams) (*Object, error) {
	if p.Kind == "" || p.Name == "" {
		return nil, errors.New("store: create: kind and name are required")
	}
	spec, err := canonicalJSON(p.Spec)
	if err != nil {
		return nil, fmt.Errorf("store: create %s %q: spec is not valid JSON: %w", p.Kind, p.Name, err)
	}
	status, err := canonicalJSON(p.Status)
	if err != nil {
		return nil, fmt.Errorf("store: create %s %q: status is not valid JSON: %w", p.Kind, p.Name, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("store: create %s %q: new id: %w", p.Kind, p.Name, err)
	}
	owners := "[]"
	if len(p.Owners) > 0 {
		data, err := json.Marshal(p.Owners)
		if err != nil {
			return nil, fmt.Errorf("store: create %s %q: owners: %w", p.Kind, p.Name, err)
		}
		owners = string(data)
	}
	t := now()
	row := &objectRow{
		Owners:          owners,
		ID:              id.String(),
		Kind:            p.Kind,
		Name:            p.Name,
		Generation:      1,
		ResourceVersion: 1,
		Spec:            spec,
		Status:          status,
		CreatedAt:       t,
		UpdatedAt:       t,
	}
	// A create with nothing to look up first (no references) and no user rows is one query string of
	// inserts on PostgreSQL: sent alone, outside a transaction, the server runs it as one implicit
	// transaction, so it takes one round trip instead of three (BEGIN, the inserts, COMMIT). Queued behind
	// busy lanes, it runs in its group's transaction as any write.
	var alone func(ctx context.Context) error
	if s.dialect == dialectPostgres && !s.separateInserts && len(p.Refs) == 0 && len(p.Users) == 0 {
		alone = func(ctx context.Context) error {
			query, err := createdPostgres(ctx, s.wdb, row, p.Labels, nil)
			if err != nil {
				return err
			}
			// The *sql.DB, not bun's, as in insertCreatedPostgres.
			_, err = s.wdb.DB.ExecContext(ctx, query)
			return createdErr(err)
		}
	}
	err = s.writeOr(ctx, func(ctx context.Context, tx bun.Tx) error {
		refs, err := s.checkRefs(ctx, tx, row.ID, p.Refs)
		if err != nil {
			return err
		}
		if s.dialect == dialectPostgres && !s.separateInserts {
			if err := insertCreatedPostgres(ctx, tx, row, p.Labels, refs); err != nil {
				return err
			}
			return insertUsers(ctx, tx, row.ID, p.Users)
		}
		if err := s.insertObject(ctx, tx, row); err != nil {
			return err
		}
		if err := s.insertLabels(ctx, tx, row.ID, p.Labels); err != nil {
			return err
		}
		if err := insertRefs(ctx, tx, row.ID, row.Kind, refs); err != nil {
			return err
		}
		if err := insertUsers(ctx, tx, row.ID, p.Users); err != nil {
			return err
		}
		return s.insertOutbox(ctx, tx, row.Kind, row.ID)
	}, alone)
	if err != nil {
		return nil, fmt.Errorf("store: create %s %q: %w", p.Kind, p.Name, err)
	}
	return row.toObject(copyLabels(p.Labels)), nil
}

// Get returns an object by kind and id.
func (s *bunStore) Get(ctx context.Context, kind, id string) (*Object, error) {
	obj, err := s.getOne(ctx, kind, id, "o.id = ?", id)
	if err != nil {
		return nil, fmt.Errorf("store: get %s %q: %w", kind, id, err)
	}
	return obj, nil
}

// GetByName returns an object by kind and name.
func (s *bunStore) GetByName(ctx context.Context, kind, name string) (*Object, error) {
	obj, err := s.getOne(ctx, kind, name, "o.name = ?", name)
	if err != nil {
		return nil, fmt.Errorf("store: get %s by name %q: %w", kind, name, err)
	}
	return obj, nil
}

// objectWithLabels is an object row with its labels as one JSON object, as getOne reads them.
type objectWithLabels struct {
	objectRow  `bun:",extend"`
	LabelsJSON string `bun:"labels_json,scanonly"`
}

// getOne reads one object of a kind and its labels in one query (one statement sees one snapshot, so it
// needs no transaction). what names the object in the error when there is none.
func (s *bunStore) getOne(ctx context.Context, kind, what, where string, arg any) (*Object, error) {
	labels := "(SELECT json_group_object(l.key, l.value) FROM object_labels AS l WHERE l.object_id = o.id)"
	if s.dialect == dialectPostgres {
		labels = "(SELECT coalesce(json_object_agg(l.key, l.value)::text, '{}') FROM object_labels AS l WHERE l.object_id = o.id)"
	}
	row := new(objectWithLabels)
	err := s.query(ctx, func(ctx context.Context, db bun.IDB) error {
		if stmt := s.preparedReads[where]; stmt != nil {
			return s.scanOne(ctx, stmt, row, arg, kind)
		}
		return db.NewSelect().Model(row).ColumnExpr(s.objectColumns()).ColumnExpr(labels+" AS labels_json").
			Where(where, arg).Where("o.kind = ?", kind).Scan(ctx)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(kind, what)
	}
	if err != nil {
		return nil, err
	}
	m, err := row.labels()
	if err != nil {
		return nil, err
	}
	return row.toObject(m), nil
}

// labels decodes the row's labels.
func (r *objectWithLabels) labels() (map[string]string, error) {
	m := map[string]string{}
	if r.LabelsJSON != "" {
		if err := json.Unmarshal([]byte(r.LabelsJSON), &m); err != nil {
			return nil, fmt.Errorf("labels: %w", err)
		}
	}
	return m, nil
}

// List returns one page of objects of a kind, ordered by id (creation order), filtered by label equality.
func (s *bunStore) List(ctx context.Context, p *ListParams) (*ListResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if limit > MaxListLimit {
		limit = MaxListLimit
	}
	res := &ListResult{Objects: []*Object{}}
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		var rows []objectRow
		q := s.filter(tx.NewSelect().Model(&rows), p)
		// One row more than the page says whether another page follows.
		if err := q.Order("id").Limit(int64(limit) + 1).Scan(ctx); err != nil {
			return err
		}
		if len(rows) > limit {
			rows = rows[:limit]
			res.Next = rows[limit-1].ID
		}
		ids := make([]string, len(rows))
		for i := range rows {
			ids[i] = rows[i].ID
		}
		labels, err := loadLabels(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i := range rows {
			res.Objects = append(res.Objects, rows[i].toObject(labels[rows[i].ID]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", p.Kind, err)
	}
	return res, nil
}

// filter narrows q (over objects AS o) to p's kind and filters, from p.After on.
func (s *bunStore) filter(q *bun.SelectQuery, p *ListParams) *bun.SelectQuery {
	q = q.Where("kind = ?", p.Kind)
	// A filtered list is driven by the reference or label index, never by a scan of the kind: each
	// filter is an IN over its index (object_refs by to_id, object_labels by key and value), and the
	// page's lower bound goes into the first of them, so that the page costs what it returns, not
	// the size of the kind (a reconcile's reverse lookups, issue 30).
	after := p.After
	bound := func(col string) (string, []any) {
		if after == "" {
			return "", nil
		}
		a := after
		after = ""
		return " AND " + col + " > ?", []any{a}
	}
	if p.References != "" {
		// Both the object's own references and the users its spec attaches it to (object_users).
		cond, args := bound("r.from_id")
		ucond := strings.Replace(cond, "r.from_id", "u.object_id", 1)
		q = q.Where("o.id IN (SELECT r.from_id FROM object_refs AS r WHERE r.to_id = ?"+cond+
			" UNION SELECT u.object_id FROM object_users AS u WHERE u.user_id = ?"+ucond+")",
			append(append(append([]any{p.References}, args...), p.References), args...)...)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		cond, args := bound("l.object_id")
		q = q.Where("o.id IN (SELECT l.object_id FROM object_labels AS l WHERE l.key = ? AND l.value = ?"+cond+")",
			append([]any{k, p.Labels[k]}, args...)...)
	}
	if p.Pending {
		q = q.Where(s.pendingPredicate())
	}
	if p.Owned {
		q = q.Where(ownedPredicate)
	}
	if after != "" {
		q = q.Where("id > ?", after)
	}
	return q
}

// Count counts the objects that List would return over every page, from the same indexes, without
// reading them: how many instances a definition or a runtime has costs one query, not a listing.
func (s *bunStore) Count(ctx context.Context, p *ListParams) (int, error) {
	every := *p
	every.After = "" // every page
	var n int
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		c, err := s.filter(tx.NewSelect().Model((*objectRow)(nil)), &every).Count(ctx)
		n = int(c)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: count %s: %w", p.Kind, err)
	}
	return n, nil
}

// UpdateSpec replaces labels, spec and references. Generation increases only when the canonical spec
// changes; the resource version always increases. Writes an outbox row for the object.
func (s *bunStore) UpdateSpec(ctx context.Context, p *UpdateSpecParams) (*Object, error) {
	spec, err := canonicalJSON(p.Spec)
	if err != nil {
		return nil, fmt.Errorf("store: update %s %q: spec is not valid JSON: %w", p.Kind, p.ID, err)
	}
	var row *objectRow
	err = s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		row, err = s.lockObject(ctx, tx, p.Kind, p.ID, lockNoKeyUpdate)
		if err != nil {
			return err
		}
		if err := checkIfMatch(row, p.IfMatch); err != nil {
			return err
		}
		refs, err := s.checkRefs(ctx, tx, row.ID, p.Refs)
		if err != nil {
			return err
		}
		// The stored text is canonical for SQLite, but PostgreSQL's jsonb prints its own way.
		old, err := canonicalJSON([]byte(row.Spec))
		if err != nil {
			return fmt.Errorf("stored spec: %w", err)
		}
		if old != spec {
			row.Generation++
		}
		row.ResourceVersion++
		row.Spec = spec
		row.UpdatedAt = now()
		if _, err := tx.NewUpdate().Model(row).
			Column("spec", "generation", "resource_version", "updated_at").
			WherePK().Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewDelete().Model((*labelRow)(nil)).Where("object_id = ?", row.ID).Exec(ctx); err != nil {
			return err
		}
		if err := s.insertLabels(ctx, tx, row.ID, p.Labels); err != nil {
			return err
		}
		if p.Users != nil {
			if _, err := tx.NewDelete().Model((*userRow)(nil)).Where("object_id = ?", row.ID).Exec(ctx); err != nil {
				return err
			}
			if err := insertUsers(ctx, tx, row.ID, *p.Users); err != nil {
				return err
			}
		}
		if err := enqueueDropped(ctx, tx, row.ID, refs); err != nil {
			return err
		}
		if err := s.replaceRefs(ctx, tx, row.ID, row.Kind, refsFromSpec, refs); err != nil {
			return err
		}
		return s.insertOutbox(ctx, tx, row.Kind, row.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("store: update %s %q: %w", p.Kind, p.ID, err)
	}
	return row.toObject(copyLabels(p.Labels)), nil
}

// UpdateStatus replaces the status and increases the resource version. It writes outbox rows for the
// objects that reference this one, and none for the object itself: its controller wrote the status.
func (s *bunStore) UpdateStatus(ctx context.Context, p *UpdateStatusParams) (*Object, error) {
	status, err := canonicalJSON(p.Status)
	if err != nil {
		return nil, fmt.Errorf("store: update status of %s %q: status is not valid JSON: %w", p.Kind, p.ID, err)
	}
	var obj *Object
	err = s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		row, labels, err := s.lockWithLabels(ctx, tx, p.Kind, p.ID)
		if err != nil {
			return err
		}
		if p.Check != nil {
			if err := p.Check(row.Generation); err != nil {
				return err
			}
		}
		if err := checkIfMatch(row, p.IfMatch); err != nil {
			return err
		}
		was, is := readiness(row.Status), readiness(status)
		if p.Refs != nil {
			if err := s.replaceStatusRefs(ctx, tx, row, *p.Refs); err != nil {
				return err
			}
		}
		row.ResourceVersion++
		row.Status = status
		row.UpdatedAt = now()
		if err := s.execIn(ctx, tx, sqlUpdateStatus, row.Status, row.ResourceVersion, row.UpdatedAt, row.ID); err != nil {
			return err
		}
		if was != is {
			// Becoming Ready again at the same generation is news only to the dependents that wait:
			// those Ready at their own generation have nothing to redo. A new generation (a spec to
			// propagate) or leaving Ready (a runtime lost, say) reaches every dependent. Without this,
			// a definition that went back to Ready after rolling out to its instances reconciled every
			// one of them again (make bench, sim: 10,000 no-op reconciles at rest).
			pendingOnly := is.phase == "Ready" && is.generation == was.generation
			if err := s.enqueueDependents(ctx, tx, row.ID, pendingOnly); err != nil {
				return err
			}
			if err := s.enqueueOwners(ctx, tx, row, pendingOnly); err != nil {
				return err
			}
		}
		obj = row.toObject(labels)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: update status of %s %q: %w", p.Kind, p.ID, err)
	}
	return obj, nil
}

// RequestDeletion sets deletion_requested_at and increases the resource version the first time; every
// call writes an outbox row so the controller (re)starts its cleanup. It fails with a *DependentsError
// while other objects reference this one.
func (s *bunStore) RequestDeletion(ctx context.Context, kind, id string, opts DeletionOptions) (*Object, error) {
	var obj *Object
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		row, err := s.lockObject(ctx, tx, kind, id, lockUpdate)
		if err != nil {
			return err
		}
		deps, err := dependents(ctx, tx, row.ID)
		if err != nil {
			return err
		}
		if len(deps) > 0 {
			return &DependentsError{Dependents: deps}
		}
		if row.DeletionRequestedAt == nil || opts.Orphan && !row.DeletionOrphan {
			t := now()
			if row.DeletionRequestedAt == nil {
				row.DeletionRequestedAt = &t
			}
			row.DeletionOrphan = row.DeletionOrphan || opts.Orphan
			row.UpdatedAt = t
			row.ResourceVersion++
			if _, err := tx.NewUpdate().Model(row).
				Column("deletion_requested_at", "deletion_orphan", "resource_version", "updated_at").
				WherePK().Exec(ctx); err != nil {
				return err
			}
		}
		if err := s.insertOutbox(ctx, tx, row.Kind, row.ID); err != nil {
			return err
		}
		obj, err = withLabels(ctx, tx, row)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: request deletion of %s %q: %w", kind, id, err)
	}
	return obj, nil
}

// Dependents lists the objects that reference the object with the given id, ordered by id. An unknown
// id has no dependents.
func (s *bunStore) Dependents(ctx context.Context, id string) ([]Ref, error) {
	var deps []Ref
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		deps, err = dependents(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: dependents of %q: %w", id, err)
	}
	return deps, nil
}

// Finalize deletes an object whose deletion was requested, with its labels, references and events, and
// writes outbox rows for the objects it referenced (they may now be unused).
func (s *bunStore) Finalize(ctx context.Context, kind, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		row, err := s.lockObject(ctx, tx, kind, id, lockUpdate)
		if err != nil {
			return err
		}
		if row.DeletionRequestedAt == nil {
			return ErrNotDeleting
		}
		deps, err := dependents(ctx, tx, row.ID)
		if err != nil {
			return err
		}
		if len(deps) > 0 {
			return &DependentsError{Dependents: deps}
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO outbox (kind, object_id, created_at, trace_parent) SELECT to_kind, to_id, ?, ? FROM object_refs WHERE from_id = ? ORDER BY to_id",
			now(), telemetry.Traceparent(ctx), row.ID); err != nil {
			return fmt.Errorf("enqueue referenced objects: %w", err)
		}
		for _, m := range []any{(*eventRow)(nil), (*labelRow)(nil), (*userRow)(nil)} {
			if _, err := tx.NewDelete().Model(m).Where("object_id = ?", row.ID).Exec(ctx); err != nil {
				return err
			}
		}
		if _, err := tx.NewDelete().Model((*refRow)(nil)).Where("from_id = ?", row.ID).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewDelete().Model(row).WherePK().Exec(ctx); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: finalize %s %q: %w", kind, id, err)
	}
	return nil
}

// Enqueue writes an outbox row for an object without changing it.
func (s *bunStore) Enqueue(ctx context.Context, kind, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		exists, err := tx.NewSelect().Model((*objectRow)(nil)).Where("id = ?", id).Where("kind = ?", kind).Exists(ctx)
		if err != nil {
			return err
		}
		if !exists {
			return notFound(kind, id)
		}
		return s.insertOutbox(ctx, tx, kind, id)
	})
	if err != nil {
		return fmt.Errorf("store: enqueue %s %q: %w", kind, id, err)
	}
	return nil
}

// lockObject reads an object for update. On PostgreSQL it locks the row with the given strength; SQLite's
// single writer already excludes every other write.
func (s *bunStore) lockObject(ctx context.Context, tx bun.Tx, kind, id, strength string) (*objectRow, error) {
	row := new(objectRow)
	q := tx.NewSelect().Model(row).Where("id = ?", id).Where("kind = ?", kind)
	if s.dialect == dialectPostgres {
		q = q.For(strength)
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(kind, id)
	}
	if err != nil {
		return nil, err
	}
	return row, nil
}

// lockWithLabels is lockObject (lockNoKeyUpdate) and the object's labels, in one statement (lockOne).
func (s *bunStore) lockWithLabels(ctx context.Context, tx bun.Tx, kind, id string) (*objectRow, map[string]string, error) {
	row := new(objectWithLabels)
	err := s.scanIn(ctx, tx, s.sql.lockOne, []any{id, kind}, row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, notFound(kind, id)
	}
	if err != nil {
		return nil, nil, err
	}
	labels, err := row.labels()
	return &row.objectRow, labels, err
}

// checkRefs verifies that every referenced object exists with the given kind and is not being deleted,
// and returns the references without duplicates. On PostgreSQL the targets stay key-share locked until
// commit, so a concurrent RequestDeletion waits and then sees the new reference.
func (s *bunStore) checkRefs(ctx context.Context, tx bun.Tx, selfID string, refs []Ref) ([]Ref, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	uniq := make([]Ref, 0, len(refs))
	seen := make(map[string]bool, len(refs))
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		if r.ID == selfID {
			return nil, fmt.Errorf("%s %q cannot reference itself", r.Kind, r.ID)
		}
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		uniq = append(uniq, r)
		ids = append(ids, r.ID)
	}
	sort.Strings(ids) // lock in a stable order
	rows, err := s.lockTargets(ctx, tx, ids)
	if err != nil {
		return nil, fmt.Errorf("check references: %w", err)
	}
	found := make(map[string]*objectRow, len(rows))
	for i := range rows {
		found[rows[i].ID] = &rows[i]
	}
	for _, r := range uniq {
		target, ok := found[r.ID]
		if !ok || target.Kind != r.Kind {
			return nil, fmt.Errorf("%w: referenced %s %q", ErrNotFound, r.Kind, r.ID)
		}
		if target.DeletionRequestedAt != nil {
			return nil, fmt.Errorf("%w: referenced %s %q is being deleted", ErrNotFound, r.Kind, r.ID)
		}
	}
	return uniq, nil
}

// lockTargets reads the id, kind and deletion time of the objects with the given ids (sorted), which
// references are about to name; on PostgreSQL it key-share locks them until commit (see checkRefs). A
// few ids, as references name, go through a statement prepared for their number (lockTargetsSQL).
func (s *bunStore) lockTargets(ctx context.Context, tx bun.Tx, ids []string) ([]objectRow, error) {
	var rows []objectRow
	if len(ids) <= maxPreparedTargets {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		res, err := s.queryIn(ctx, tx, s.sql.lockTargets[len(ids)], args...)
		if err != nil {
			return nil, err
		}
		defer func() { _ = res.Close() }()
		for res.Next() {
			var r objectRow
			if err := s.wdb.ScanRow(ctx, res, &r); err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
		return rows, res.Err()
	}
	q := tx.NewSelect().Model(&rows).Column("id", "kind", "deletion_requested_at").
		Where("id IN (?)", bun.List(ids)).Order("id")
	if s.dialect == dialectPostgres {
		q = q.For(lockKeyShare)
	}
	return rows, q.Scan(ctx)
}

// maxPreparedTargets is the largest number of references whose targets lockTargets reads through a
// prepared statement.
const maxPreparedTargets = 4

// lockTargetsSQL is lockTargets' statement for n ids.
func (s *bunStore) lockTargetsSQL(n int) string {
	q := "SELECT id, kind, deletion_requested_at FROM objects WHERE id IN (?" + strings.Repeat(", ?", n-1) + ") ORDER BY id"
	if s.dialect == dialectPostgres {
		q += " FOR " + lockKeyShare
	}
	return q
}

func checkIfMatch(row *objectRow, ifMatch int64) error {
	if ifMatch != 0 && ifMatch != row.ResourceVersion {
		return fmt.Errorf("%w: If-Match %d, current %d", ErrStale, ifMatch, row.ResourceVersion)
	}
	return nil
}

func (s *bunStore) insertObject(ctx context.Context, tx bun.Tx, row *objectRow) error {
	var err error
	if s.prepared != nil {
		err = s.execPrepared(ctx, tx, sqlInsertObject,
			row.ID, row.Kind, row.Name, row.Generation, row.ResourceVersion, row.Spec, row.Status,
			s.timeText(row.CreatedAt), s.timeText(row.UpdatedAt), row.Owners)
	} else {
		// Returning("NULL"): bun would otherwise return the nullable columns, which a new row has as given.
		_, err = tx.NewInsert().Model(row).Returning("NULL").Exec(ctx)
	}
	if err != nil {
		if isUniqueViolation(err) {
			return ErrNameTaken
		}
		return err
	}
	return nil
}

func (s *bunStore) insertLabels(ctx context.Context, tx bun.Tx, objectID string, labels map[string]string) error {
	if len(labels) == 0 {
		return nil
	}
	if s.prepared != nil {
		for k, v := range labels {
			if err := s.execPrepared(ctx, tx, sqlInsertLabel, objectID, k, v); err != nil {
				return fmt.Errorf("insert labels: %w", err)
			}
		}
		return nil
	}
	rows := labelRows(objectID, labels)
	if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("insert labels: %w", err)
	}
	return nil
}

// existingRefs returns the references among refs whose targets exist with their kind (a status may name
// an object deleted since), without duplicates or self-references. On PostgreSQL the targets stay
// key-share locked until commit, as in checkRefs.
func (s *bunStore) existingRefs(ctx context.Context, tx bun.Tx, selfID string, refs []Ref) ([]Ref, error) {
	var ids []string
	for _, r := range refs {
		if r.ID != selfID {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	sort.Strings(ids)
	rows, err := s.lockTargets(ctx, tx, ids)
	if err != nil {
		return nil, fmt.Errorf("check status references: %w", err)
	}
	kinds := make(map[string]string, len(rows))
	for _, r := range rows {
		kinds[r.ID] = r.Kind
	}
	var out []Ref
	for _, r := range refs {
		if kinds[r.ID] == r.Kind && r.ID != selfID {
			out = append(out, r)
			delete(kinds, r.ID)
		}
	}
	return out, nil
}

// replaceStatusRefs makes the references of row's status those of refs whose target exists with its
// kind. Most status writes name the same targets as the last one (an instance's placements), so the
// stored ones are read first, and when they are already refs, nothing is written: no lock on the
// targets, no delete and insert (whose foreign key checks lock the targets again). A stored reference
// implies its target exists (the foreign key), so an equal set needs no check.
func (s *bunStore) replaceStatusRefs(ctx context.Context, tx bun.Tx, row *objectRow, refs []Ref) error {
	want := map[Ref]bool{}
	for _, r := range refs {
		if r.ID != row.ID {
			want[Ref{Kind: r.Kind, ID: r.ID}] = true
		}
	}
	same, err := s.sideRefsAre(ctx, tx, row.ID, refsFromStatus, want)
	if err != nil || same {
		return err
	}
	existing, err := s.existingRefs(ctx, tx, row.ID, refs)
	if err != nil {
		return err
	}
	return s.replaceRefs(ctx, tx, row.ID, row.Kind, refsFromStatus, existing)
}

// sideRefsAre reports whether the references of one side of an object are exactly want.
func (s *bunStore) sideRefsAre(ctx context.Context, tx bun.Tx, fromID, via string, want map[Ref]bool) (bool, error) {
	rows, err := s.queryIn(ctx, tx, sqlSideRefs, fromID, via)
	if err != nil {
		return false, fmt.Errorf("read %s references: %w", via, err)
	}
	defer func() { _ = rows.Close() }()
	n, same := 0, true
	for rows.Next() {
		var r Ref
		if err := rows.Scan(&r.ID, &r.Kind); err != nil {
			return false, fmt.Errorf("read %s references: %w", via, err)
		}
		n++
		same = same && want[r]
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read %s references: %w", via, err)
	}
	return same && n == len(want), rows.Close()
}

// replaceRefs replaces the references of one side (spec or status) of an object.
func (s *bunStore) replaceRefs(ctx context.Context, tx bun.Tx, fromID, fromKind, via string, refs []Ref) error {
	if err := s.execIn(ctx, tx, sqlDeleteSideRefs, fromID, via); err != nil {
		return err
	}
	return insertRefsVia(ctx, tx, fromID, fromKind, via, refs)
}

// enqueueDropped writes outbox rows for the objects that fromID's spec references and refs no longer
// does. As with a deletion (Finalize), the object may now be unused, or serve a consumer no more: a data
// service gives access on the runtimes its consumers run on, and has no timer to find one gone.
func enqueueDropped(ctx context.Context, tx bun.Tx, fromID string, refs []Ref) error {
	q := "INSERT INTO outbox (kind, object_id, created_at, trace_parent) SELECT to_kind, to_id, ?, ? FROM object_refs WHERE from_id = ? AND via = ?"
	args := []any{now(), telemetry.Traceparent(ctx), fromID, refsFromSpec}
	if len(refs) > 0 {
		ids := make([]string, len(refs))
		for i, r := range refs {
			ids[i] = r.ID
		}
		q += " AND to_id NOT IN (?)"
		args = append(args, bun.List(ids))
	}
	if _, err := tx.ExecContext(ctx, q+" ORDER BY to_id", args...); err != nil {
		return fmt.Errorf("enqueue objects no longer referenced: %w", err)
	}
	return nil
}

func insertRefs(ctx context.Context, tx bun.Tx, fromID, fromKind string, refs []Ref) error {
	return insertRefsVia(ctx, tx, fromID, fromKind, refsFromSpec, refs)
}

func insertRefsVia(ctx context.Context, tx bun.Tx, fromID, fromKind, via string, refs []Ref) error {
	if len(refs) == 0 {
		return nil
	}
	rows := make([]refRow, len(refs))
	for i, r := range refs {
		rows[i] = refRow{FromID: fromID, FromKind: fromKind, ToID: r.ID, ToKind: r.Kind, Via: via}
	}
	if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
		if isForeignKeyViolation(err) {
			return fmt.Errorf("%w: a referenced object", ErrNotFound)
		}
		return fmt.Errorf("insert references: %w", err)
	}
	return nil
}

// insertOutbox writes an outbox row for an object, with the traceparent of the write's span so that the
// reconcile it causes continues the write's trace.
func (s *bunStore) insertOutbox(ctx context.Context, tx bun.Tx, kind, objectID string) error {
	row := &outboxRow{Kind: kind, ObjectID: objectID, CreatedAt: now(), TraceParent: telemetry.Traceparent(ctx)}
	var err error
	if s.prepared != nil {
		err = s.execPrepared(ctx, tx, sqlInsertOutbox,
			row.Kind, row.ObjectID, s.timeText(row.CreatedAt), row.TraceParent)
	} else {
		_, err = tx.NewInsert().Model(row).ExcludeColumn("id").Exec(ctx)
	}
	if err != nil {
		return fmt.Errorf("insert outbox: %w", err)
	}
	return nil
}

// insertUsers records the ids of the objects that use objectID by its spec (CreateParams.Users).
func insertUsers(ctx context.Context, tx bun.Tx, objectID string, users []string) error {
	if len(users) == 0 {
		return nil
	}
	rows := make([]userRow, 0, len(users))
	seen := map[string]bool{}
	for _, u := range users {
		if u != "" && !seen[u] {
			seen[u] = true
			rows = append(rows, userRow{ObjectID: objectID, UserID: u})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("insert users: %w", err)
	}
	return nil
}

// insertCreatedPostgres writes a new object's row, labels, references and outbox row in one round trip
// (see createdPostgres): the simple query protocol runs the inserts in order, stopping at the first that
// fails (which fails the transaction, or the write's savepoint in a group).
func insertCreatedPostgres(ctx context.Context, tx bun.Tx, row *objectRow, labels map[string]string, refs []Ref) error {
	query, err := createdPostgres(ctx, tx, row, labels, refs)
	if err != nil {
		return err
	}
	// The *sql.Tx, not bun's: the text is formatted already, and pgdriver sends a query without
	// arguments as it is.
	_, err = tx.Tx.ExecContext(ctx, query)
	return createdErr(err)
}

// createdPostgres formats the inserts of a new object's row, labels, references and outbox row, each
// with its values, as one query string. Sent alone, outside a transaction, PostgreSQL runs such a string
// as one implicit transaction: all of it commits, or none.
func createdPostgres(ctx context.Context, db bun.IDB, row *objectRow, labels map[string]string, refs []Ref) (string, error) {
	gen := db.NewInsert().DB().QueryGen()
	var b []byte
	appendInsert := func(q *bun.InsertQuery) error {
		if len(b) > 0 {
			b = append(b, ";\n"...)
		}
		var err error
		b, err = q.AppendQuery(gen, b)
		return err
	}
	if err := appendInsert(db.NewInsert().Model(row).Returning("NULL")); err != nil {
		return "", err
	}
	if len(labels) > 0 {
		rows := labelRows(row.ID, labels)
		if err := appendInsert(db.NewInsert().Model(&rows)); err != nil {
			return "", err
		}
	}
	if len(refs) > 0 {
		rows := make([]refRow, len(refs))
		for i, r := range refs {
			rows[i] = refRow{FromID: row.ID, FromKind: row.Kind, ToID: r.ID, ToKind: r.Kind, Via: refsFromSpec}
		}
		if err := appendInsert(db.NewInsert().Model(&rows)); err != nil {
			return "", err
		}
	}
	outbox := &outboxRow{Kind: row.Kind, ObjectID: row.ID, CreatedAt: now(), TraceParent: telemetry.Traceparent(ctx)}
	if err := appendInsert(db.NewInsert().Model(outbox).ExcludeColumn("id")); err != nil {
		return "", err
	}
	return string(b), nil
}

// createdErr names what the inserts of createdPostgres failed on.
func createdErr(err error) error {
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return ErrNameTaken // the only unique key a new object's rows can break is its name
	case isForeignKeyViolation(err):
		return fmt.Errorf("%w: a referenced object", ErrNotFound)
	}
	return err
}

// enqueueDependents writes an outbox row for every object that references objectID, or only for those
// that are not reconciled (pendingPredicate) when pendingOnly is set.
func (s *bunStore) enqueueDependents(ctx context.Context, tx bun.Tx, objectID string, pendingOnly bool) error {
	if err := s.execIn(ctx, tx, s.sql.enqueue[pendingOnly], now(), telemetry.Traceparent(ctx), objectID); err != nil {
		return fmt.Errorf("enqueue dependents: %w", err)
	}
	return nil
}

// enqueueOwners writes an outbox row for each existing owner of row (Meta.Owners), or only for those that
// are not reconciled when pendingOnly is set, as enqueueDependents does for the objects that reference
// it. An owner created the object for its own use and may wait on it: a workload_instance on the
// metrics-server it asked for, say. As with Kubernetes owner references (controller-runtime's Owns),
// the owned object's readiness reaches its owner as a notification instead of the owner's next resync
// pass. Owned objects are few and their readiness changes rarely, so this is formatted, not prepared.
func (s *bunStore) enqueueOwners(ctx context.Context, tx bun.Tx, row *objectRow, pendingOnly bool) error {
	if row.Owners == "" || row.Owners == "[]" {
		return nil
	}
	var owners []Ref
	if err := json.Unmarshal([]byte(row.Owners), &owners); err != nil {
		return fmt.Errorf("enqueue owners: stored owners: %w", err)
	}
	ids := make([]string, len(owners))
	for i, o := range owners {
		ids[i] = o.ID
	}
	q := "INSERT INTO outbox (kind, object_id, created_at, trace_parent) SELECT kind, id, ?, ? FROM objects WHERE id IN (?)"
	if pendingOnly {
		q += " AND (" + s.pendingPredicate() + ")"
	}
	if _, err := tx.NewRaw(q+" ORDER BY id", now(), telemetry.Traceparent(ctx), bun.List(ids)).Exec(ctx); err != nil {
		return fmt.Errorf("enqueue owners: %w", err)
	}
	return nil
}

// enqueueDependentsSQL is enqueueDependents' statement.
func (s *bunStore) enqueueDependentsSQL(pendingOnly bool) string {
	if pendingOnly {
		return "INSERT INTO outbox (kind, object_id, created_at, trace_parent) SELECT r.from_kind, r.from_id, ?, ? FROM object_refs AS r" +
			" JOIN objects AS o ON o.id = r.from_id WHERE r.to_id = ? AND (" + s.pendingPredicate() + ") ORDER BY r.from_id"
	}
	return "INSERT INTO outbox (kind, object_id, created_at, trace_parent) SELECT from_kind, from_id, ?, ? FROM object_refs WHERE to_id = ? ORDER BY from_id"
}

func dependents(ctx context.Context, tx bun.Tx, id string) ([]Ref, error) {
	var rows []dependentRow
	err := tx.NewSelect().
		TableExpr("object_refs AS r").
		Join("JOIN objects AS o ON o.id = r.from_id").
		ColumnExpr("DISTINCT o.kind, o.id, o.name").
		Where("r.to_id = ?", id).
		OrderExpr("o.id").
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("dependents: %w", err)
	}
	deps := make([]Ref, len(rows))
	for i, r := range rows {
		deps[i] = Ref(r)
	}
	return deps, nil
}

// loadLabels returns the labels of the given objects, keyed by object id.
func loadLabels(ctx context.Context, tx bun.Tx, ids []string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []labelRow
	if err := tx.NewSelect().Model(&rows).Where("object_id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load labels: %w", err)
	}
	for _, r := range rows {
		m := out[r.ObjectID]
		if m == nil {
			m = map[string]string{}
			out[r.ObjectID] = m
		}
		m[r.Key] = r.Value
	}
	return out, nil
}

func withLabels(ctx context.Context, tx bun.Tx, row *objectRow) (*Object, error) {
	labels, err := loadLabels(ctx, tx, []string{row.ID})
	if err != nil {
		return nil, err
	}
	return row.toObject(labels[row.ID]), nil
}

// readiness is the part of a status that dependents act on: the phase and the observed generation.
// Status writes that change only messages or details do not notify dependents, so that a waiting
// object's ticking message does not make every dependent reconcile again.
func readiness(status string) readinessOf {
	var st struct {
		Phase              string `json:"phase"`
		ObservedGeneration int64  `json:"observed_generation"`
	}
	_ = json.Unmarshal([]byte(status), &st)
	return readinessOf{phase: st.Phase, generation: st.ObservedGeneration}
}

// readinessOf is what a status says to the objects that depend on it: its phase and the generation it
// observed.
type readinessOf struct {
	phase      string
	generation int64
}
