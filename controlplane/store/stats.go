package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// CountParams select and group the objects that CountObjects counts. Every group is also split by
// phase.
type CountParams struct {
	// Kind, when set, counts only the objects of this kind.
	Kind string
	// GroupBy names the fields whose values group the objects, each one of "kind", "id", "name",
	// "spec.<field>" or "status.<field>" (a top-level field of the JSON document, read as text; meant for
	// string fields). None: one group per phase.
	GroupBy []string
	// Condition, when set, names a status condition type (e.g. "Connected"): the groups are also split by
	// that condition's status.
	Condition string
}

// ObjectCount is one group of objects counted by CountObjects.
type ObjectCount struct {
	// Values are the group's values of CountParams.GroupBy, in order; "" for a missing field.
	Values []string
	// Phase is the objects' status.phase, "Pending" when they have none.
	Phase string
	// Condition is the status ("True", "False", "Unknown") of the CountParams.Condition condition, ""
	// when the objects have no such condition or none was asked for.
	Condition string
	// Count is the number of objects in the group.
	Count int64
	// Unreconciled counts the objects of the group that are not reconciled: their deletion was requested,
	// their phase is not Ready, or their status.observed_generation is not their generation.
	Unreconciled int64
	// OldestUnreconciled is the earliest last write (UpdatedAt) of the unreconciled objects; zero when
	// there are none.
	OldestUnreconciled time.Time
}

// groupField is a field that CountParams.GroupBy may name: a column, or a top-level field of spec or
// status.
var groupField = regexp.MustCompile(`^(kind|id|name|(spec|status)\.[a-z][a-z0-9_]*)$`)

// CountObjects counts objects by phase and the fields that p names, in one aggregate query. Groups come
// in no particular order.
func (s *bunStore) CountObjects(ctx context.Context, p *CountParams) ([]*ObjectCount, error) {
	query, args, err := s.countQuery(p)
	if err != nil {
		return nil, fmt.Errorf("store: count objects: %w", err)
	}
	var out []*ObjectCount
	err = s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := scanCount(rows, len(p.GroupBy))
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: count objects: %w", err)
	}
	return out, nil
}

// countQuery builds CountObjects' query: a derived table of one row per object with its group values,
// phase, condition status and whether it is reconciled, grouped and counted.
func (s *bunStore) countQuery(p *CountParams) (string, []any, error) {
	var (
		cols []string
		args []any
	)
	for i, f := range p.GroupBy {
		if !groupField.MatchString(f) {
			return "", nil, fmt.Errorf("cannot group by %q (want kind, id, name, spec.<field> or status.<field>)", f)
		}
		expr := "o." + f
		if doc, field, ok := strings.Cut(f, "."); ok {
			expr = s.jsonText(doc, "?")
			args = append(args, s.jsonPath(field))
		}
		cols = append(cols, fmt.Sprintf("COALESCE(%s, '') AS g%d", expr, i))
	}
	phase := s.jsonText("status", "?")
	args = append(args, s.jsonPath("phase"))
	cols = append(cols, fmt.Sprintf("COALESCE(NULLIF(%s, ''), 'Pending') AS phase", phase))

	if p.Condition != "" {
		cols = append(cols, s.conditionStatus()+" AS cond")
		args = append(args, p.Condition)
	} else {
		cols = append(cols, "'' AS cond")
	}
	cols = append(cols, s.unreconciled()+" AS unreconciled", "o.updated_at")

	where := ""
	if p.Kind != "" {
		where = " WHERE o.kind = ?"
		args = append(args, p.Kind)
	}
	groups := make([]string, 0, len(p.GroupBy)+2)
	for i := range p.GroupBy {
		groups = append(groups, fmt.Sprintf("t.g%d", i))
	}
	groups = append(groups, "t.phase", "t.cond")
	query := fmt.Sprintf("SELECT %s, COUNT(*), SUM(t.unreconciled), MIN(CASE WHEN t.unreconciled = 1 THEN t.updated_at END)"+
		" FROM (SELECT %s FROM objects AS o%s) AS t GROUP BY %s",
		strings.Join(groups, ", "), strings.Join(cols, ", "), where, strings.Join(groups, ", "))
	return query, args, nil
}

// jsonText is the dialect's expression for a top-level field of the spec or status document as text
// (NULL when missing); path is the placeholder of the field's path (see jsonPath).
func (s *bunStore) jsonText(doc, path string) string {
	if s.dialect == dialectPostgres {
		return fmt.Sprintf("((o.%s::jsonb) ->> %s)", doc, path)
	}
	return fmt.Sprintf("CAST(json_extract(o.%s, %s) AS TEXT)", doc, path)
}

// jsonPath is the argument that jsonText's path placeholder takes for a top-level field.
func (s *bunStore) jsonPath(field string) string {
	if s.dialect == dialectPostgres {
		return field
	}
	return "$." + field
}

// conditionStatus is the dialect's expression for the status of the condition whose type is its one
// placeholder (NULL when the object has none).
func (s *bunStore) conditionStatus() string {
	if s.dialect == dialectPostgres {
		return "(SELECT c ->> 'status' FROM jsonb_array_elements(CASE WHEN jsonb_typeof((o.status::jsonb) -> 'conditions') = 'array'" +
			" THEN (o.status::jsonb) -> 'conditions' ELSE '[]'::jsonb END) AS c WHERE c ->> 'type' = ? LIMIT 1)"
	}
	return "(SELECT CAST(json_extract(c.value, '$.status') AS TEXT) FROM json_each(o.status, '$.conditions') AS c" +
		" WHERE json_extract(c.value, '$.type') = ? LIMIT 1)"
}

// unreconciled is the dialect's expression that is 1 for an object that is not reconciled (see
// ObjectCount.Unreconciled) and 0 for one that is: the pending predicate, so that the metrics and the
// safety net's pass agree on what is not reconciled.
func (s *bunStore) unreconciled() string {
	return "CASE WHEN " + s.pendingPredicate() + " THEN 1 ELSE 0 END"
}

// pendingPredicate is the dialect's condition of an object that is not reconciled, word for word the
// predicate of the partial index objects_pending_idx (migration 0010), so that the planner uses it.
func (s *bunStore) pendingPredicate() string {
	if s.dialect == dialectPostgres {
		return "deletion_requested_at IS NOT NULL OR (status ->> 'phase') IS DISTINCT FROM 'Ready' OR (status ->> 'observed_generation') IS DISTINCT FROM (generation::text)"
	}
	return "deletion_requested_at IS NOT NULL OR json_extract(status, '$.phase') IS NOT 'Ready' OR json_extract(status, '$.observed_generation') IS NOT generation"
}

// ownedPredicate is the condition of an object created for owners, the predicate of objects_owned_idx.
const ownedPredicate = "owners <> '[]'"

// scanCount reads one row of CountObjects' query.
func scanCount(rows *sql.Rows, groups int) (*ObjectCount, error) {
	c := &ObjectCount{Values: make([]string, groups)}
	var (
		cond         sql.NullString
		unreconciled sql.NullInt64
		oldest       any
	)
	dest := make([]any, 0, groups+5)
	for i := range c.Values {
		dest = append(dest, &c.Values[i])
	}
	dest = append(dest, &c.Phase, &cond, &c.Count, &unreconciled, &oldest)
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	c.Condition = cond.String
	c.Unreconciled = unreconciled.Int64
	t, err := scannedTime(oldest)
	if err != nil {
		return nil, fmt.Errorf("oldest unreconciled: %w", err)
	}
	c.OldestUnreconciled = t
	return c, nil
}

// scannedTime converts an aggregated timestamp to a time: PostgreSQL returns a time, SQLite the text bun
// wrote (an aggregate loses the column's declared type).
func scannedTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return v.UTC(), nil
	case []byte:
		return parseStoredTime(string(v))
	case string:
		return parseStoredTime(v)
	default:
		return time.Time{}, fmt.Errorf("unexpected %T", v)
	}
}

// storedTimeLayouts are the layouts SQLite holds timestamps in: bun's, and RFC 3339.
var storedTimeLayouts = []string{"2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999Z07:00", time.RFC3339Nano}

func parseStoredTime(s string) (time.Time, error) {
	for _, layout := range storedTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("cannot parse time " + s)
}
