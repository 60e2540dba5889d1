package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Prepared statements (SQLite only).
//
// On SQLite, parsing a statement costs about as much as running it: in make bench's sim section,
// SQLite's parser was 11% of the process, most of it under status writes and events, which run inside
// the single writer. So the hot statements are prepared once when the store opens: the reads of one
// object on the read pool (sqlGetOne), and the writes on the write pool (writeStatements). On
// PostgreSQL, the same SQL goes through bun's formatter instead (see execIn and scanIn).

// SQLite's hot inserts of Create, prepared once when the store opens (see execPrepared).
const (
	sqlInsertObject = `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status,
			created_at, updated_at, deletion_requested_at, deletion_orphan, owners) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, FALSE, ?)`
	sqlInsertLabel  = "INSERT INTO object_labels (object_id, key, value) VALUES (?, ?, ?)"
	sqlInsertOutbox = "INSERT INTO outbox (kind, object_id, created_at, trace_parent) VALUES (?, ?, ?, ?)"
)

// The statements of UpdateStatus and AppendEvent. They are written for both dialects: prepared on
// SQLite, formatted by bun on PostgreSQL.
const (
	// sqlLockOneSQLite reads an object and its labels in the write transaction (SQLite's write
	// transaction already excludes other writers; PostgreSQL locks the row with lockObject instead).
	sqlLockOneSQLite = sqlSelectOne + "o.id = ? AND o.kind = ?"
	sqlUpdateStatus  = "UPDATE objects SET status = ?, resource_version = ?, updated_at = ? WHERE id = ?"
	sqlObjectKind    = "SELECT kind, generation FROM objects WHERE id = ?"
	sqlEventRepeat   = `SELECT * FROM events WHERE object_id = ? AND type = ? AND reason = ? AND message = ? AND source = ?
			AND generation = ? AND last_seen_at >= ? ORDER BY id DESC LIMIT 1`
	sqlEventCount  = "UPDATE events SET count = count + 1, last_seen_at = ?, duration_ms = ? WHERE id = ?"
	sqlEventInsert = `INSERT INTO events (object_id, kind, type, reason, message, generation, duration_ms, source,
			created_at, count, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	sqlEventTrim = `DELETE FROM events WHERE object_id = ? AND id <= (
			SELECT id FROM events WHERE object_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`
)

// writeStatements are prepared on SQLite's write pool.
var writeStatements = []string{
	sqlInsertObject, sqlInsertLabel, sqlInsertOutbox,
	sqlLockOneSQLite, sqlUpdateStatus, sqlObjectKind, sqlEventRepeat, sqlEventCount, sqlEventInsert, sqlEventTrim,
}

// SQLite's reads of one object (getOne), by its condition, prepared once when the store opens: parsing
// the statement was about half of a Get's cost (make bench, apply and sim sections).
var sqlGetOne = map[string]string{
	"o.id = ?":   sqlSelectOne + "o.id = ? AND o.kind = ?",
	"o.name = ?": sqlSelectOne + "o.name = ? AND o.kind = ?",
}

const sqlSelectOne = `SELECT o.*, (SELECT json_group_object(l.key, l.value) FROM object_labels AS l WHERE l.object_id = o.id) AS labels_json
			FROM objects AS o WHERE `

// prepareReads prepares SQLite's reads of one object on the read pool (see sqlGetOne).
func (s *bunStore) prepareReads(ctx context.Context, cfg Config) error {
	if s.dialect != dialectSQLite || cfg.unpreparedReads {
		return nil
	}
	var err error
	s.preparedReads, err = prepareAll(ctx, s.rdb, sqlGetOne)
	return err
}

// prepareAll prepares each query of queries on db, keeping its key.
func prepareAll(ctx context.Context, db *bun.DB, queries map[string]string) (map[string]*sql.Stmt, error) {
	out := make(map[string]*sql.Stmt, len(queries))
	for key, q := range queries {
		stmt, err := db.DB.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("store: prepare %q: %w", q, err)
		}
		out[key] = stmt
	}
	return out, nil
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

// prepareWrites prepares SQLite's write statements on the write pool. It runs after the migrations,
// before any write: preparing needs a connection, and a write transaction holds the only one.
func (s *bunStore) prepareWrites(ctx context.Context, cfg Config) error {
	if s.dialect != dialectSQLite || cfg.unpreparedWrites {
		return nil
	}
	byQuery := make(map[string]string, len(writeStatements))
	for _, q := range writeStatements {
		byQuery[q] = q
	}
	var err error
	s.prepared, err = prepareAll(ctx, s.wdb, byQuery)
	return err
}

// execPrepared runs a write through a statement prepared once per write connection (SQLite only: there
// parsing is most of a small insert's cost, and it runs inside the single writer). The arguments are bound
// as the driver's own values, so each must be stored as bun would store it (see timeText).
func (s *bunStore) execPrepared(ctx context.Context, tx bun.Tx, query string, args ...any) error {
	stmt, ok := s.prepared[query]
	if !ok {
		return fmt.Errorf("statement not prepared: %q", query)
	}
	_, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
	return err
}

// execIn runs a statement in tx: through its prepared statement when the store prepared it, else
// formatted by bun (PostgreSQL, or SQLite opened with unpreparedWrites).
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
	var rows *sql.Rows
	var err error
	if stmt, ok := s.prepared[query]; ok {
		rows, err = tx.StmtContext(ctx, stmt).QueryContext(ctx, s.bound(args)...)
	} else {
		rows, err = tx.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return err
	}
	return s.firstRow(ctx, s.wdb, rows, dest...)
}

// bound turns arguments into what a prepared statement binds so that the row reads as one bun wrote:
// times become bun's text (see timeText).
func (s *bunStore) bound(args []any) []any {
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
