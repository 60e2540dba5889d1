package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
	"github.com/qleetos/terraform-provider-qleet/internal/await"
	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// benchSpec and benchStatus are an instance's documents of a realistic size (the old scrape parsed them).
const (
	benchSpec = `{"definition_id":"0190d7a4-0000-7000-8000-000000000001","placement":{"regions":["eu-west","us-east"]},` +
		`"runtime_id":"0190d7a4-0000-7000-8000-000000000002","values":{"env":"production","replicas":"3","tier":"web"}}`
	benchConditions = `"conditions":[{"type":"Ready","status":"True","reason":"Applied","message":"all objects applied",` +
		`"last_transition_time":"2026-01-01T00:00:00Z"},{"type":"Placed","status":"True","reason":"Placed",` +
		`"message":"placed on 2 runtimes","last_transition_time":"2026-01-01T00:00:00Z"}]`
)

// benchStatuses cycle over the bulk-inserted instances: most Ready, some Reconciling, Failed, behind
// their generation, or without a status.
var benchStatuses = []string{
	`{}`,
	`{"phase":"Failed","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Reconciling","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":0,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":1,` + benchConditions + `}`,
	`{"phase":"Ready","observed_generation":1,` + benchConditions + `}`,
}

// bulkInsertInstances inserts n workload instances in one INSERT ... SELECT over a generated series (the
// database makes the rows: no per-row round trip), through a connection of its own. The count triggers
// run for every row, as for any write.
func bulkInsertInstances(b *testing.B, dialect, url string, n int) *sql.DB {
	b.Helper()
	var (
		db     *sql.DB
		series string
		status strings.Builder
		err    error
	)
	status.WriteString("CASE i % " + fmt.Sprint(len(benchStatuses)))
	for i, s := range benchStatuses {
		fmt.Fprintf(&status, " WHEN %d THEN '%s'", i, s)
	}
	status.WriteString(" END")
	switch dialect {
	case "sqlite":
		db, err = sql.Open("sqlite", strings.TrimPrefix(url, "sqlite://"))
		require.NoError(b, err)
		series = fmt.Sprintf(`INSERT INTO objects (id, kind, name, generation, resource_version, spec, status, created_at, updated_at)
			WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
			SELECT printf('bench-%%08d', i), '%s', printf('bench-%%d', i), 1, 1, '%s', %s,
				strftime('%%Y-%%m-%%d %%H:%%M:%%f+00:00', 'now', '-' || i || ' seconds'),
				strftime('%%Y-%%m-%%d %%H:%%M:%%f+00:00', 'now', '-' || i || ' seconds') FROM s`,
			n, api.KindWorkloadInstance, benchSpec, status.String())
	case "postgres":
		db = sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(url)))
		series = fmt.Sprintf(`INSERT INTO objects (id, kind, name, generation, resource_version, spec, status, created_at, updated_at)
			SELECT 'bench-' || lpad(i::text, 8, '0'), '%s', 'bench-' || i, 1, 1, '%s'::jsonb, (%s)::jsonb,
				now() - i * interval '1 second', now() - i * interval '1 second' FROM generate_series(1, %d) AS i`,
			api.KindWorkloadInstance, benchSpec, status.String(), n)
	}
	b.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	start := time.Now()
	_, err = db.ExecContext(ctx, series)
	require.NoError(b, err)
	if dialect == "postgres" {
		// What autovacuum does after a bulk load: statistics for the planner, the visibility map.
		_, err = db.ExecContext(ctx, "VACUUM ANALYZE objects")
		require.NoError(b, err)
	}
	b.Logf("%s: %d instances inserted in %s", dialect, n, time.Since(start).Round(time.Millisecond))
	return db
}

// BenchmarkMetricsScrape measures a /metrics scrape at 10,000 and 100,000 objects, side by side with the
// aggregation the scrape made before the counts were kept on every write (CountObjects over every
// object's JSON, and the runtime and support service groups). The counters sub-benchmark reports the
// ratio aggregate/scrape of the same run.
//
//	go test -run '^$' -bench BenchmarkMetricsScrape -benchtime 10x ./controlplane/server/
func BenchmarkMetricsScrape(b *testing.B) {
	ctx := context.Background()
	for _, dialect := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/objects=%d", dialect, n), func(b *testing.B) { benchScrape(ctx, b, dialect, n) })
		}
	}
}

// benchScrape bulk-loads n instances on a fresh database of the dialect, then runs both sub-benchmarks.
func benchScrape(ctx context.Context, b *testing.B, dialect string, n int) {
	url := "sqlite://" + filepath.Join(b.TempDir(), "qleet.db")
	if dialect == "postgres" {
		url = pgtest.URL(b)
	}
	st, err := store.Open(ctx, store.Config{URL: url, Logger: quietLogger(), CountsCompactInterval: 50 * time.Millisecond})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	e := setup(b, setupOpts{st: st})
	raw := bulkInsertInstances(b, dialect, url, n)
	for i := range 3 {
		rt, err := e.dev.KubernetesRuntimes().Create(ctx, localRuntime(fmt.Sprintf("rt%d", i)))
		require.NoError(b, err)
		_, err = e.admin.SupportServices().Create(ctx, &api.SupportService{Meta: api.Meta{Name: fmt.Sprintf("ingress%d", i)},
			Spec: api.SupportServiceSpec{RuntimeID: rt.ID, Type: api.SupportIngress}})
		require.NoError(b, err)
	}
	// The store folds the deltas of the bulk insert (one per row) within its interval.
	await.True(b, time.Minute, func() bool {
		var rows int
		return raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM object_counts").Scan(&rows) == nil && rows < 50
	}, "the count deltas of %d inserts are folded", n)
	text := e.scrape(b)
	require.Equal(b, float64(n)/10, sample(b, text, `qleet_objects{kind="workload_instance",phase="Failed"}`))
	require.Equal(b, float64(n)*4/10, sample(b, text, `qleet_objects_unreconciled{kind="workload_instance"}`))

	var aggregate time.Duration
	b.Run("aggregate", func(b *testing.B) {
		for b.Loop() {
			for _, p := range []*store.CountParams{{GroupBy: []string{"kind"}},
				{Kind: api.KindKubernetesRuntime, GroupBy: []string{"id", "name", "status.region", "spec.region"}, Condition: "Connected"},
				{Kind: api.KindSupportService, GroupBy: []string{"spec.runtime_id", "spec.type"}}} {
				if _, err := e.store.CountObjects(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		}
		aggregate = b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(aggregate.Microseconds())/1000, "ms/scrape")
	})
	b.Run("counters", func(b *testing.B) {
		for b.Loop() {
			if code, body := e.raw(b, "", http.MethodGet, "/metrics", "", nil); code != http.StatusOK {
				b.Fatalf("%d %s", code, body)
			}
		}
		scrape := b.Elapsed() / time.Duration(b.N)
		b.ReportMetric(float64(scrape.Microseconds())/1000, "ms/scrape")
		if aggregate > 0 {
			b.ReportMetric(float64(aggregate)/float64(scrape), "x-faster")
		}
	})
}
