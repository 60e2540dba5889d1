package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// Config selects and tunes the database. The zero value of every field but URL takes its documented default.
type Config struct {
	// URL names the database:
	//   - "postgres://user:pass@host:5432/db?sslmode=disable" (or "postgresql://") opens PostgreSQL 15+ through
	//     bun's pgdriver; every pgdriver DSN option is accepted.
	//   - "sqlite:///abs/path/qleet.db", "sqlite://rel/path.db" or a bare file path opens (and creates) a SQLite
	//     file in WAL mode. In-memory databases are not supported: the store opens the file twice (see
	//     MaxOpenConns).
	URL string
	// MaxOpenConns caps the connection pool. PostgreSQL: default 10. SQLite: the size of the read pool,
	// default 4; SQLite writes always go through a single connection, so writers queue in Go rather than
	// spinning on SQLITE_BUSY.
	MaxOpenConns int
	// BusyTimeout is SQLite's busy_timeout: how long a write waits for a lock held by another process
	// (another qleet, a backup) before failing with SQLITE_BUSY. Default 5s. Ignored by PostgreSQL.
	BusyTimeout time.Duration
	// Logger receives the store's few log lines (migrations applied). Default slog.Default().
	Logger *slog.Logger
	// CountsCompactInterval is how often the store folds the object count deltas that every write appends
	// (see CountObjectsByKind) into one row per kind and phase. Default DefaultCountsCompactInterval.
	CountsCompactInterval time.Duration

	// sqliteWriteConns overrides the SQLite write pool size (1). Only benchmarks set it, to measure the
	// single-writer choice against a pool.
	sqliteWriteConns int
	// writeLanes overrides how many write transactions run at once before writes group (default: the write
	// pool's size, 1 on SQLite); -1 turns group commit off. Only benchmarks set it.
	writeLanes int
	// unpreparedWrites makes the hot writes go through bun's formatted queries instead of prepared
	// statements; on PostgreSQL it also makes Create send its inserts one by one instead of in one round
	// trip. Only benchmarks set it.
	unpreparedWrites bool
	// unpreparedReads makes the reads of one object go through bun's formatted queries instead of prepared
	// statements (to compare the two in benchmarks).
	unpreparedReads bool
}

// Defaults for Config.
const (
	DefaultPostgresMaxOpenConns = 10
	DefaultSQLiteMaxOpenConns   = 4
	DefaultBusyTimeout          = 5 * time.Second
)

type dialectName int

const (
	dialectSQLite dialectName = iota + 1
	dialectPostgres
)

func (d dialectName) String() string {
	if d == dialectPostgres {
		return "postgres"
	}
	return "sqlite"
}

// bunStore implements Store with bun. For PostgreSQL rdb and wdb are the same pool; for SQLite wdb is a
// one-connection pool whose transactions BEGIN IMMEDIATE, and rdb is a pool of read-only connections.
type bunStore struct {
	dialect dialectName
	wdb     *bun.DB
	rdb     *bun.DB
	log     *slog.Logger
	// writes runs every write transaction, grouping concurrent ones (see groupcommit.go).
	writes *committer
	// prepared holds the prepared write statements by query (see execPrepared); set once at open.
	prepared map[string]*sql.Stmt
	// preparedReads holds the prepared reads of one object by getOne's condition (see getOneSQL).
	preparedReads map[string]*sql.Stmt
	// sql holds the statements whose text depends on the dialect, made once at open.
	sql storeSQL
	// separateInserts makes Create on PostgreSQL send each insert in a round trip of its own (benchmarks).
	separateInserts bool
	// noPrepare turns prepared statements off (PreparedStatementsParam).
	noPrepare bool
	// stopCompactor stops runCountsCompactor, which closes compactorDone when it has returned.
	stopCompactor, compactorDone chan struct{}
	closeOnce                    sync.Once
}

var _ Store = (*bunStore)(nil)

// Open connects to the database that cfg.URL names, applies pending migrations, and returns the store.
func Open(ctx context.Context, cfg Config) (Store, error) {
	s, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, cfg Config) (*bunStore, error) {
	if cfg.URL == "" {
		return nil, errors.New("store: Config.URL is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = DefaultBusyTimeout
	}

	s, err := openDialect(cfg)
	if err != nil {
		return nil, err
	}

	if err := s.firstPing(ctx, cfg.BusyTimeout); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.sql = s.makeSQL()
	if err := s.prepareReads(ctx, cfg); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.prepareWrites(ctx, cfg); err != nil {
		_ = s.Close()
		return nil, err
	}
	interval := cfg.CountsCompactInterval
	if interval <= 0 {
		interval = DefaultCountsCompactInterval
	}
	s.stopCompactor, s.compactorDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.compactorDone)
		s.runCountsCompactor(interval, s.stopCompactor)
	}()
	return s, nil
}

// openDialect opens the database cfg.URL names, without pinging or migrating it.
func openDialect(cfg Config) (*bunStore, error) {
	var (
		s   *bunStore
		err error
	)
	switch {
	case strings.HasPrefix(cfg.URL, "postgres://"), strings.HasPrefix(cfg.URL, "postgresql://"):
		s, err = openPostgres(cfg)
	default:
		s, err = openSQLite(cfg)
	}
	if err != nil {
		return nil, err
	}
	s.log = cfg.Logger
	lanes := cfg.writeLanes
	if lanes == 0 {
		// As many lanes as write connections: a write that can have a connection runs at once, and the
		// writes that would wait for one share the next transaction instead.
		lanes = s.wdb.DB.Stats().MaxOpenConnections
	}
	s.writes = newCommitter(s.wdb, lanes)
	s.separateInserts = cfg.unpreparedWrites
	return s, nil
}

func openPostgres(cfg Config) (*bunStore, error) {
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = DefaultPostgresMaxOpenConns
	}
	// Parse up front: pgdriver reports a bad DSN only on first use.
	u, err := url.Parse(cfg.URL)
	if err != nil {
		// url.Error repeats the whole URL, password included: keep only its reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("store: parse postgres URL: %w", err)
	}
	prepare, err := preparedStatementsParam(u)
	if err != nil {
		return nil, err
	}
	pgDriverLog.use(cfg.Logger)
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(u.String())))
	sqldb.SetMaxOpenConns(cfg.MaxOpenConns)
	sqldb.SetMaxIdleConns(cfg.MaxOpenConns)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	db := bun.NewDB(sqldb, pgdialect.New())
	return &bunStore{dialect: dialectPostgres, wdb: db, rdb: db, noPrepare: !prepare}, nil
}

// PreparedStatementsParam is the query parameter of a PostgreSQL URL that turns the store's prepared
// statements off ("false"; "true" is the default): for a pooler that does not keep them across the
// transactions of one client, such as PgBouncer in transaction mode before 1.21 (or without
// max_prepared_statements). Every statement is then sent as text, parsed and planned at each call. The
// parameter is the store's own: it is taken out of the URL before the driver sees it.
const PreparedStatementsParam = "qleet_prepared_statements"

// preparedStatementsParam reads PreparedStatementsParam from u and removes it.
func preparedStatementsParam(u *url.URL) (bool, error) {
	q := u.Query()
	if !q.Has(PreparedStatementsParam) {
		return true, nil
	}
	v := q.Get(PreparedStatementsParam)
	q.Del(PreparedStatementsParam)
	u.RawQuery = q.Encode()
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("store: postgres URL: %s must be true or false, not %q", PreparedStatementsParam, v)
	}
	return on, nil
}

// sqlitePath turns "sqlite:///abs.db", "sqlite://rel.db", "sqlite:rel.db" or a bare path into a file path.
func sqlitePath(raw string) (string, error) {
	p := raw
	switch {
	case strings.HasPrefix(p, "sqlite://"):
		p = strings.TrimPrefix(p, "sqlite://")
	case strings.HasPrefix(p, "sqlite:"):
		p = strings.TrimPrefix(p, "sqlite:")
	}
	if strings.Contains(p, "://") {
		return "", fmt.Errorf("store: unsupported database URL scheme in %q (want postgres:// or sqlite://)", raw)
	}
	if p == "" || p == ":memory:" || strings.Contains(p, "mode=memory") {
		return "", fmt.Errorf("store: %q: SQLite needs a file path (in-memory databases are not supported)", raw)
	}
	if strings.ContainsRune(p, '?') {
		return "", fmt.Errorf("store: %q: SQLite options are set by the store; remove the query string", raw)
	}
	return p, nil
}

func openSQLite(cfg Config) (*bunStore, error) {
	path, err := sqlitePath(cfg.URL)
	if err != nil {
		return nil, err
	}
	if err := sqlitePrivate(path); err != nil {
		return nil, err
	}
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = DefaultSQLiteMaxOpenConns
	}
	writeConns := 1
	if cfg.sqliteWriteConns > 0 {
		writeConns = cfg.sqliteWriteConns
	}

	// Every connection gets the same settings through the DSN: a PRAGMA run with Exec would reach only
	// one pooled connection. synchronous=NORMAL is durable across application crashes in WAL mode; a power
	// loss may roll back the last transactions but never corrupts the file.
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "NORMAL")

	// Writes BEGIN IMMEDIATE: a transaction that read first and wrote later would otherwise fail with
	// SQLITE_BUSY_SNAPSHOT when another connection committed in between, and the busy handler cannot retry that.
	// journal_mode=WAL is a property of the file, set by the writer; readers need not (and, query-only,
	// could not) set it.
	wq := cloneValues(q)
	wq.Set("_journal_mode", "WAL")
	wq.Set("_txlock", "immediate")
	wsql, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	wsql.SetMaxOpenConns(writeConns)
	wsql.SetMaxIdleConns(writeConns)
	wsql.SetConnMaxIdleTime(0)

	rq := cloneValues(q)
	rq.Set("_query_only", "1")
	rsql, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		_ = wsql.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	rsql.SetMaxOpenConns(cfg.MaxOpenConns)
	rsql.SetMaxIdleConns(cfg.MaxOpenConns)
	rsql.SetConnMaxIdleTime(0)

	return &bunStore{
		dialect: dialectSQLite,
		wdb:     bun.NewDB(wsql, sqlitedialect.New()),
		rdb:     bun.NewDB(rsql, sqlitedialect.New()),
	}, nil
}

// sqlitePrivate creates a missing SQLite database file with mode 0600, so that SQLite, which gives a
// database's -wal and -shm files the database file's mode, makes those 0600 too; and it takes the group
// and other bits off an existing database and its -wal and -shm files (older releases made them 0644).
// The database holds token hashes and sealed secrets.
func sqlitePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: sqlite %s: %w", p, err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(p, perm&^0o077); err != nil {
				return fmt.Errorf("store: sqlite %s: %w", p, err)
			}
		}
	}
	return nil
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Ping checks the database connection (both pools for SQLite).
func (s *bunStore) Ping(ctx context.Context) error {
	if err := s.wdb.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping %s: %w", s.dialect, err)
	}
	if s.rdb != s.wdb {
		if err := s.rdb.PingContext(ctx); err != nil {
			return fmt.Errorf("store: ping %s: %w", s.dialect, err)
		}
	}
	return nil
}

// firstPing pings a freshly opened store. Turning a new SQLite file to WAL takes a lock that SQLite does not
// wait for (the busy handler is not called), so stores opening one new file at once retry that, within the
// busy timeout.
func (s *bunStore) firstPing(ctx context.Context, busyTimeout time.Duration) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		err := s.Ping(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close releases the database.
func (s *bunStore) Close() error {
	s.closeOnce.Do(func() {
		if s.stopCompactor != nil {
			close(s.stopCompactor)
			<-s.compactorDone
		}
	})
	var errs []error
	if s.rdb != s.wdb {
		errs = append(errs, s.rdb.Close())
	}
	errs = append(errs, s.wdb.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// write runs fn in a read-write transaction and commits it when fn returns nil. Concurrent writes may share
// one transaction (group commit), each in a savepoint of its own; write returns once its transaction has
// committed, with fn's own result. fn may run twice (see writeFunc).
func (s *bunStore) write(ctx context.Context, fn writeFunc) error {
	ctx, span := s.txSpan(ctx, "write")
	err := s.writes.write(ctx, fn)
	telemetry.End(span, err)
	return err
}

// writeOr is write for a write that can also run without a transaction of its own, atomically by itself:
// alone runs instead of fn when the write would be a transaction alone (see committer.writeOr).
func (s *bunStore) writeOr(ctx context.Context, fn writeFunc, alone func(ctx context.Context) error) error {
	ctx, span := s.txSpan(ctx, "write")
	err := s.writes.writeOr(ctx, fn, alone)
	telemetry.End(span, err)
	return err
}

// read runs fn in a read-only transaction, so that its queries see one snapshot.
func (s *bunStore) read(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	ctx, span := s.txSpan(ctx, "read")
	err := s.rdb.RunInTx(ctx, &sql.TxOptions{ReadOnly: true}, fn)
	telemetry.End(span, err)
	return err
}

// query runs fn's single statement on the read pool, outside a transaction: one statement sees one
// snapshot by itself.
// Its span is named for the store method two calls up (e.g. Get, through getOne).
func (s *bunStore) query(ctx context.Context, fn func(ctx context.Context, db bun.IDB) error) error {
	ctx, span := s.txSpanAt(ctx, "read", 3)
	err := fn(ctx, s.rdb)
	telemetry.End(span, err)
	return err
}

// txSpan starts the span of one store transaction, named for the store method that runs it (e.g.
// "store.Create"). The caller is looked up only when the span records, so tracing off costs nothing.
func (s *bunStore) txSpan(ctx context.Context, mode string) (context.Context, trace.Span) {
	return s.txSpanAt(ctx, mode, 3)
}

// txSpanAt is txSpan for a store method skip calls up from it.
func (s *bunStore) txSpanAt(ctx context.Context, mode string, skip int) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, "store", trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	name := "store." + mode
	if pc, _, _, ok := runtime.Caller(skip); ok {
		if fn := runtime.FuncForPC(pc); fn != nil {
			name = "store." + methodName(fn.Name())
		}
	}
	span.SetName(name)
	span.SetAttributes(attribute.String("db.system", s.dialect.String()), attribute.String("qleet.store.tx", mode))
	return ctx, span
}

// methodName turns a function's full name (e.g. ".../store.(*bunStore).Create.func1") into its
// method's ("Create").
func methodName(full string) string {
	parts := strings.Split(full, ".")
	for len(parts) > 1 && strings.HasPrefix(parts[len(parts)-1], "func") {
		parts = parts[:len(parts)-1]
	}
	return parts[len(parts)-1]
}
