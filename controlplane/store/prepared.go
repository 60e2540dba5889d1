package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Prepared statements.
//
// The hot statements are prepared once per connection instead of being formatted, sent and planned for
// every call:
//   - On SQLite, parsing a statement costs about as much as running it: in make bench's sim section,
//     SQLite's parser was 11% of the process, most of it under status writes and events, which run
//     inside the single writer.
//   - On PostgreSQL, planning was half of the server's time in statements (pg_stat_statements over the
//     create phase of a 20,000-instance sim: 43 s of planning beside 40 s of execution), and the server
//     shared the machine's two cores with the control plane. A prepared statement is parsed once per
//     connection, and after five runs PostgreSQL keeps a generic plan when it costs no more.
//
// The reads of one object run on the read pool (getOneSQL), the writes on the write pool
// (writeStatements). The statements are written with ? placeholders; PostgreSQL's are numbered when they
// are prepared (numbered). database/sql prepares a statement again on each new connection by itself.
// The reads name their columns instead of o.*, so that a migration adding a column does not break a
// running replica: bun refuses a column its model lacks, and PostgreSQL a prepared statement whose result
// would change ("cached plan must not change result type").

// SQLite's hot inserts of Create, prepared once when the store opens (see execPrepared).
const (
	sqlInsertObject = `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status,
			created_at, updated_at, deletion_requested_at, deletion_orphan, owners) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, FALSE, ?)`
	sqlInsertLabel  = "INSERT INTO object_labels (object_id, key, value) VALUES (?, ?, ?)"
	sqlInsertOutbox = "INSERT INTO outbox (kind, object_id, created_at, trace_parent) VALUES (?, ?, ?, ?)"
)

// The statements of UpdateStatus and AppendEvent, for both dialects.
const (
	sqlUpdateStatus = "UPDATE objects SET status = ?, resource_version = ?, updated_at = ? WHERE id = ?"
	sqlObjectKind   = "SELECT kind, generation FROM objects WHERE id = ?"
	sqlEventRepeat  = `SELECT * FROM events WHERE object_id = ? AND type = ? AND reason = ? AND message = ? AND source = ?
			AND generation = ? AND last_seen_at >= ? ORDER BY id DESC LIMIT 1`
	sqlEventCount  = "UPDATE events SET count = count + 1, last_seen_at = ?, duration_ms = ? WHERE id = ?"
	sqlEventInsert = `INSERT INTO events (object_id, kind, type, reason, message, generation, duration_ms, source,
			created_at, count, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	sqlEventTrim = `DELETE FROM events WHERE object_id = ? AND id <= (
			SELECT id FROM events WHERE object_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`
	// The references of one side of an object (replaceStatusRefs).
	sqlSideRefs       = "SELECT to_id, to_kind FROM object_refs WHERE from_id = ? AND via = ?"
	sqlDeleteSideRefs = "DELETE FROM object_refs WHERE from_id = ? AND via = ?"
)

// storeSQL are the statements whose text depends on the dialect (and, on PostgreSQL, the table's
// columns), made once when the store opens.
type storeSQL struct {
	// lockOne is lockOneSQL.
	lockOne string
	// enqueue is enqueueDependentsSQL, by pendingOnly.
	enqueue map[bool]string
	// lockTargets is lockTargetsSQL, by the number of ids (1 to maxPreparedTargets).
	lockTargets map[int]string
}

func (s *bunStore) makeSQL() storeSQL {
	q := storeSQL{
		lockOne:     s.lockOneSQL(),
		enqueue:     map[bool]string{false: s.enqueueDependentsSQL(false), true: s.enqueueDependentsSQL(true)},
		lockTargets: map[int]string{},
	}
	for n := 1; n <= maxPreparedTargets; n++ {
		q.lockTargets[n] = s.lockTargetsSQL(n)
	}
	return q
}

// writeStatements are the statements prepared on the write pool.
func (s *bunStore) writeStatements() []string {
	qs := []string{
		sqlInsertObject, sqlInsertLabel, sqlInsertOutbox,
		s.sql.lockOne, sqlUpdateStatus, sqlObjectKind, sqlEventRepeat, sqlEventCount, sqlEventInsert, sqlEventTrim,
		sqlSideRefs, sqlDeleteSideRefs, s.sql.enqueue[false], s.sql.enqueue[true],
	}
	for n := 1; n <= maxPreparedTargets; n++ {
		qs = append(qs, s.sql.lockTargets[n])
	}
	return qs
}

// selectOneSQL reads one object and its labels (as labels_json), with the condition appended.
func (s *bunStore) selectOneSQL() string {
	if s.dialect == dialectPostgres {
		return "SELECT " + s.objectColumns() + ", (SELECT coalesce(json_object_agg(l.key, l.value)::text, '{}')" +
			" FROM object_labels AS l WHERE l.object_id = o.id) AS labels_json FROM objects AS o WHERE "
	}
	return "SELECT " + s.objectColumns() + ", (SELECT json_group_object(l.key, l.value) FROM object_labels AS l" +
		" WHERE l.object_id = o.id) AS labels_json FROM objects AS o WHERE "
}

// objectColumns lists objectRow's columns, qualified with the alias o, from bun's model of the table.
func (s *bunStore) objectColumns() string {
	fields := s.rdb.Table(reflect.TypeFor[objectRow]()).Fields
	cols := make([]string, len(fields))
	for i, f := range fields {
		cols[i] = "o." + f.Name
	}
	return strings.Join(cols, ", ")
}

// lockOneSQL reads an object and its labels in a write transaction, the row locked against other writers
// (SQLite's write transaction already excludes them; PostgreSQL takes the row's NO KEY UPDATE lock).
func (s *bunStore) lockOneSQL() string {
	q := s.selectOneSQL() + "o.id = ? AND o.kind = ?"
	if s.dialect == dialectPostgres {
		q += " FOR " + lockNoKeyUpdate + " OF o"
	}
	return q
}

// getOneSQL are the reads of one object (getOne), by getOne's condition, prepared once on the read pool:
// parsing the statement was about half of a Get's cost on SQLite (make bench, apply and sim sections),
// and PostgreSQL's planning of it was the largest item of its time in the sim.
func (s *bunStore) getOneSQL() map[string]string {
	return map[string]string{
		"o.id = ?":   s.selectOneSQL() + "o.id = ? AND o.kind = ?",
		"o.name = ?": s.selectOneSQL() + "o.name = ? AND o.kind = ?",
	}
}

// prepareReads prepares the reads of one object on the read pool (see getOneSQL).
func (s *bunStore) prepareReads(ctx context.Context, cfg Config) error {
	if cfg.unpreparedReads || s.noPrepare {
		return nil
	}
	var err error
	s.preparedReads, err = s.prepareAll(ctx, s.rdb, s.getOneSQL())
	return err
}

// prepareAll prepares each query of queries on db, keeping its key.
func (s *bunStore) prepareAll(ctx context.Context, db *bun.DB, queries map[string]string) (map[string]*sql.Stmt, error) {
	out := make(map[string]*sql.Stmt, len(queries))
	for key, q := range queries {
		if s.dialect == dialectPostgres {
			q = numbered(q)
		}
		stmt, err := db.DB.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("store: prepare %q: %w", q, err)
		}
		out[key] = stmt
	}
	return out, nil
}

// numbered turns a statement's ? placeholders into PostgreSQL's $1, $2, ... The store's statements have
// no ? inside a string literal or as an operator.
func numbered(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanOne runs a prepared read of one row into row, or answers sql.ErrNoRows.
func (s *bunStore) scanOne(ctx context.Context, stmt *sql.Stmt, row any, args ...any) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	return s.firstRow(ctx, s.rdb, rows, row)
}

// firstRow scans the first of rows into dest (a bun model, or one pointer per column) and closes rows,
// or answers sql.ErrNoRows.
func (s *bunStore) firstRow(ctx context.Context, db *bun.DB, rows *sql.Rows, dest ...any) error {
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := db.ScanRow(ctx, rows, dest...); err != nil {
		return err
	}
	return rows.Close()
}

// prepareWrites prepares the write statements on the write pool. It runs after the migrations, before
// any write: preparing needs a connection, and on SQLite a write transaction holds the only one.
func (s *bunStore) prepareWrites(ctx context.Context, cfg Config) error {
	if cfg.unpreparedWrites || s.noPrepare {
		return nil
	}
	qs := s.writeStatements()
	byQuery := make(map[string]string, len(qs))
	for _, q := range qs {
		byQuery[q] = q
	}
	var err error
	s.prepared, err = s.prepareAll(ctx, s.wdb, byQuery)
	return err
}

// execPrepared runs a write through a statement prepared once per write connection. The arguments are
// bound as the driver's own values, so each must be stored as bun would store it (see timeText).
func (s *bunStore) execPrepared(ctx context.Context, tx bun.Tx, query string, args ...any) error {
	stmt, ok := s.prepared[query]
	if !ok {
		return fmt.Errorf("statement not prepared: %q", query)
	}
	_, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
	return err
}

// execIn runs a statement in tx: through its prepared statement when the store prepared it, else
// formatted by bun (a store opened with unpreparedWrites).
func (s *bunStore) execIn(ctx context.Context, tx bun.Tx, query string, args ...any) error {
	var err error
	if stmt, ok := s.prepared[query]; ok {
		_, err = tx.StmtContext(ctx, stmt).ExecContext(ctx, s.bound(args)...)
	} else {
		_, err = tx.ExecContext(ctx, query, args...)
	}
	return err
}

// scanIn runs a query in tx as execIn does and scans its first row into dest (a bun model, or one
// pointer per column), or answers sql.ErrNoRows.
func (s *bunStore) scanIn(ctx context.Context, tx bun.Tx, query string, args []any, dest ...any) error {
	rows, err := s.queryIn(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	return s.firstRow(ctx, s.wdb, rows, dest...)
}

// queryIn runs a query in tx as execIn does and returns its rows.
func (s *bunStore) queryIn(ctx context.Context, tx bun.Tx, query string, args ...any) (*sql.Rows, error) {
	if stmt, ok := s.prepared[query]; ok {
		return tx.StmtContext(ctx, stmt).QueryContext(ctx, s.bound(args)...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// bound turns arguments into what a prepared statement binds so that the row reads as one bun wrote:
// on SQLite, times become bun's text (see timeText); PostgreSQL's driver sends them as timestamptz text.
func (s *bunStore) bound(args []any) []any {
	if s.dialect == dialectPostgres {
		return args
	}
	out := make([]any, len(args))
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			a = s.timeText(t)
		}
		out[i] = a
	}
	return out
}

// timeText is a time as bun writes it in SQLite's text columns, so that rows written with bound
// arguments read and sort as bun's own.
func (s *bunStore) timeText(t time.Time) string {
	b := s.wdb.Dialect().AppendTime(nil, t)
	return string(b[1 : len(b)-1]) // without the quotes
}
