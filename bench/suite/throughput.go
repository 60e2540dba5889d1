package suite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun/driver/pgdriver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	_ "modernc.org/sqlite" // the "sqlite" driver, for the raw commit rate

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/bench/report"
	"github.com/qleetos/terraform-provider-qleet/bench/stats"
	"github.com/qleetos/terraform-provider-qleet/client"
	"github.com/qleetos/terraform-provider-qleet/controlplane/app"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// writeTarget is something that takes writes: op performs one, with a name unique in the run.
type writeTarget struct {
	name    string
	op      func(ctx context.Context, seq int64) error
	skipped string
}

func (r *Runner) runThroughput(ctx context.Context) error {
	defer r.profileCPU(SectionThroughput)()
	var targets []writeTarget
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()

	// QleetOS on SQLite and on PostgreSQL: the API alone (with its outbox relay), no controllers.
	sqliteCP, err := r.startControlPlane(ctx, app.Config{DataDir: filepath.Join(r.cfg.WorkDir, "cp-sqlite"), API: true})
	if err != nil {
		return err
	}
	closers = append(closers, sqliteCP.close)
	targets = append(targets, writeTarget{name: report.TargetQleetSQLite, op: qleetCreate(sqliteCP.client, "s")})

	pgURL, pgStop, pgErr := pgtest.StartServer(ctx)
	var pgCP *controlPlane
	if pgErr == nil {
		closers = append(closers, pgStop)
		pgCP, pgErr = r.startControlPlane(ctx, app.Config{DataDir: filepath.Join(r.cfg.WorkDir, "cp-pg"), API: true, DatabaseURL: pgURL})
	}
	if pgErr != nil {
		targets = append(targets, writeTarget{name: report.TargetQleetPostgres, skipped: pgErr.Error()})
	} else {
		closers = append(closers, pgCP.close)
		targets = append(targets, writeTarget{name: report.TargetQleetPostgres, op: qleetCreate(pgCP.client, "p")})
	}

	// kube-apiserver: the shared cluster when the apply section started it, else a fresh one.
	var kc *benchCluster
	if r.shared != nil {
		kc = r.shared.cluster
	} else {
		if kc, err = r.startCluster(ctx, "throughput", 1); err != nil {
			return err
		}
		closers = append(closers, kc.stop)
	}
	kubeOp, err := configMapCreate(ctx, kc)
	if err != nil {
		return err
	}
	targets = append(targets, writeTarget{name: report.TargetKube, op: kubeOp})

	// The physical limits: one trivial INSERT per transaction, on the same kinds of database.
	rawSQLite, err := openRawSQLite(ctx, filepath.Join(r.cfg.WorkDir, "raw.db"))
	if err != nil {
		return err
	}
	closers = append(closers, func() { rawSQLite.Close() })
	targets = append(targets, writeTarget{name: report.TargetRawSQLite, op: rawInsert(rawSQLite, `INSERT INTO bench (id, v) VALUES (?, ?)`)})
	if pgErr != nil {
		targets = append(targets, writeTarget{name: report.TargetRawPostgres, skipped: pgErr.Error()})
	} else {
		rawPG, err := openRawPostgres(ctx, pgURL)
		if err != nil {
			return err
		}
		closers = append(closers, func() { rawPG.Close() })
		targets = append(targets, writeTarget{name: report.TargetRawPostgres, op: rawInsert(rawPG, `INSERT INTO bench (id, v) VALUES ($1, $2)`)})
	}

	// The same limits with what one create must write: an object row and an outbox row per transaction,
	// in tables made by the store's own migrations (a database of their own, so that no relay reads them).
	rawSQLiteOutbox, err := openRawOutboxSQLite(ctx, filepath.Join(r.cfg.WorkDir, "raw-outbox.db"))
	if err != nil {
		return err
	}
	closers = append(closers, func() { rawSQLiteOutbox.Close() })
	targets = append(targets, writeTarget{name: report.TargetRawSQLiteOutbox, op: rawCreate(rawSQLiteOutbox, "?")})
	if pgErr != nil {
		targets = append(targets, writeTarget{name: report.TargetRawPostgresOutbox, skipped: pgErr.Error()})
	} else {
		rawPGOutbox, err := openRawOutboxPostgres(ctx, pgURL)
		if err != nil {
			return err
		}
		closers = append(closers, func() { rawPGOutbox.Close() })
		targets = append(targets, writeTarget{name: report.TargetRawPostgresOutbox, op: rawCreate(rawPGOutbox, "$")})
	}

	rows := map[string]map[int]report.ThroughputRow{}
	for li, conc := range r.cfg.Concurrency {
		for _, ti := range rotation(len(targets), li) {
			t := targets[ti]
			row := report.ThroughputRow{Target: t.name, Concurrency: conc, Skipped: t.skipped}
			if t.skipped == "" {
				r.log.Info("throughput", "target", t.name, "concurrency", conc)
				row = r.drive(ctx, t, conc)
			}
			if rows[t.name] == nil {
				rows[t.name] = map[int]report.ThroughputRow{}
			}
			rows[t.name][conc] = row
		}
	}
	for _, t := range targets {
		for _, conc := range r.cfg.Concurrency {
			row := rows[t.name][conc]
			row.RatioVsKube = stats.Ratio(row.OpsPerSec, rows[report.TargetKube][conc].OpsPerSec)
			if raw, ok := rawOf[t.name]; ok {
				row.RatioVsRaw = stats.Ratio(row.OpsPerSec, rows[raw][conc].OpsPerSec)
			}
			r.res.Throughput = append(r.res.Throughput, row)
		}
	}
	return nil
}

// rawOf names, for each QleetOS target, the raw commit with the outbox row on the same database.
var rawOf = map[string]string{
	report.TargetQleetSQLite:   report.TargetRawSQLiteOutbox,
	report.TargetQleetPostgres: report.TargetRawPostgresOutbox,
}

// seq numbers every write of the run, so that names never collide.
var seq atomic.Int64

// drive runs t's op from conc workers for the configured duration.
func (r *Runner) drive(ctx context.Context, t writeTarget, conc int) report.ThroughputRow {
	// A short warm-up opens connections and fills caches.
	warm, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	for warm.Err() == nil {
		_ = t.op(warm, seq.Add(1))
	}
	cancel()

	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	deadline := time.Now().Add(r.cfg.ThroughputDuration)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := t.op(ctx, seq.Add(1)); err != nil {
					bad++
					if bad == 1 {
						r.log.Warn("write failed", "target", t.name, "err", err)
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	return report.ThroughputRow{
		Target: t.name, Concurrency: conc, OpsPerSec: stats.PerSecond(len(lat), wall),
		Latency: stats.Summarize(lat), Errors: errs,
	}
}

func qleetCreate(cl *client.Client, prefix string) func(context.Context, int64) error {
	defs := cl.WorkloadDefinitions()
	spec := definitionSpec(1)
	return func(ctx context.Context, n int64) error {
		_, err := defs.Create(ctx, &api.WorkloadDefinition{Meta: api.Meta{Name: prefix + "-" + strconv.FormatInt(n, 10)}, Spec: spec})
		return err
	}
}

func configMapCreate(ctx context.Context, c *benchCluster) (func(context.Context, int64) error, error) {
	rc := *c.kube.Config
	rc.QPS, rc.Burst = -1, 0 // no client-side limit: measure the server
	cs, err := kubernetes.NewForConfig(&rc)
	if err != nil {
		return nil, err
	}
	const ns = "bench-throughput"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return func(ctx context.Context, n int64) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "k-" + strconv.FormatInt(n, 10), Labels: map[string]string{"bench": "throughput"}},
			Data:       map[string]string{"image": benchImage, "replicas": "1"},
		}, metav1.CreateOptions{})
		return err
	}, nil
}

// openRawSQLite opens a SQLite file with the store's settings: WAL, synchronous=NORMAL, BEGIN
// IMMEDIATE, one writer connection.
func openRawSQLite(ctx context.Context, path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_busy_timeout", "5000")
	q.Set("_synchronous", "NORMAL")
	q.Set("_journal_mode", "WAL")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("raw sqlite: %w", err)
	}
	return db, nil
}

func openRawPostgres(ctx context.Context, dsn string) (*sql.DB, error) {
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench (id BIGINT PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("raw postgres: %w", err)
	}
	return db, nil
}

// rawInsert commits one trivial INSERT per transaction.
func rawInsert(db *sql.DB, insert string) func(context.Context, int64) error {
	return func(ctx context.Context, n int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insert, n, "x"); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}

// openRawOutboxSQLite makes a SQLite file with the store's schema (its migrations, run by store.Open) and
// opens it with the store's settings, as openRawSQLite.
func openRawOutboxSQLite(ctx context.Context, path string) (*sql.DB, error) {
	if err := migrateStore(ctx, "sqlite://"+path); err != nil {
		return nil, err
	}
	return openRawSQLite(ctx, path)
}

// openRawOutboxPostgres makes a database of its own beside dsn's, with the store's schema, and opens it.
func openRawOutboxPostgres(ctx context.Context, dsn string) (*sql.DB, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(u.Path, "/") + "_raw"
	admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("raw postgres: create database %s: %w", name, err)
	}
	u.Path = "/" + name
	if err := migrateStore(ctx, u.String()); err != nil {
		return nil, err
	}
	return openRawPostgres(ctx, u.String())
}

// migrateStore applies the store's migrations to the database at dbURL.
func migrateStore(ctx context.Context, dbURL string) error {
	st, err := store.Open(ctx, store.Config{URL: dbURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("raw commit with outbox: migrate %s: %w", dbURL, err)
	}
	return st.Close()
}

// rawCreate commits, per transaction, an object row and an outbox row shaped as the store's for a create
// of a workload definition: the ceiling of QleetOS's create rate on that database. mark is the driver's
// placeholder: "?" for SQLite, "$" for PostgreSQL ($1, $2, ...).
func rawCreate(db *sql.DB, mark string) func(context.Context, int64) error {
	ph := func(n int) string {
		if mark == "?" {
			return "?"
		}
		return "$" + strconv.Itoa(n)
	}
	insertObject := fmt.Sprintf(`INSERT INTO objects (id, kind, name, generation, resource_version, spec, status, created_at, updated_at, deletion_orphan, owners)
		VALUES (%s, %s, %s, 1, 1, %s, '{}', %s, %s, FALSE, '[]')`, ph(1), ph(2), ph(3), ph(4), ph(5), ph(6))
	insertOutbox := fmt.Sprintf(`INSERT INTO outbox (kind, object_id, created_at, trace_parent) VALUES (%s, %s, %s, '')`, ph(1), ph(2), ph(3))
	spec, _ := json.Marshal(definitionSpec(1))
	return func(ctx context.Context, n int64) error {
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insertObject, id.String(), "workload_definitions", "r-"+strconv.FormatInt(n, 10), string(spec), now, now); err != nil {
			_ = tx.Rollback()
			return err
		}
		if _, err := tx.ExecContext(ctx, insertOutbox, "workload_definitions", id.String(), now); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}
