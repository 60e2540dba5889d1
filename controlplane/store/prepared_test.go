package store

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPreparedStatementsSurviveAMigration: the store prepares its hot statements on both dialects, and a
// replica that prepared them keeps working when another, newer replica adds a column to objects (a
// rolling upgrade). PostgreSQL refuses to run a prepared SELECT o.* whose result would change ("cached
// plan must not change result type"), so its prepared reads name their columns.
func TestPreparedStatementsSurviveAMigration(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			s, err := open(ctx, Config{URL: storeURL(t, dialect), Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			require.NotEmpty(t, s.prepared, "write statements prepared")
			require.NotEmpty(t, s.preparedReads, "reads prepared")
			require.Contains(t, s.prepared, s.sql.lockOne)

			obj, err := s.Create(ctx, &CreateParams{Kind: "workload_instances", Name: "web", Spec: json.RawMessage(`{}`),
				Labels: map[string]string{"env": "prod"}})
			require.NoError(t, err)
			// Run each statement more than five times, so that PostgreSQL may have switched to a generic plan.
			for range 7 {
				got, err := s.Get(ctx, "workload_instances", obj.ID)
				require.NoError(t, err)
				require.Equal(t, "prod", got.Labels["env"])
				_, err = s.UpdateStatus(ctx, &UpdateStatusParams{Kind: "workload_instances", ID: obj.ID, Status: json.RawMessage(`{"phase":"Ready"}`)})
				require.NoError(t, err)
			}

			_, err = s.wdb.ExecContext(ctx, "ALTER TABLE objects ADD COLUMN added_by_a_newer_release TEXT")
			require.NoError(t, err)

			got, err := s.Get(ctx, "workload_instances", obj.ID)
			require.NoError(t, err, "a prepared read after the column was added")
			require.Equal(t, "prod", got.Labels["env"])
			upd, err := s.UpdateStatus(ctx, &UpdateStatusParams{Kind: "workload_instances", ID: obj.ID, Status: json.RawMessage(`{"phase":"Failed"}`)})
			require.NoError(t, err, "a prepared locking read and update after the column was added")
			require.JSONEq(t, `{"phase":"Failed"}`, string(upd.Status))
			require.Equal(t, "prod", upd.Labels["env"])
		})
	}
}

// TestPreparedStatementsOff: the URL parameter turns them off, and is not passed to the driver (PostgreSQL
// would refuse it as an unknown setting at connect).
func TestPreparedStatementsOff(t *testing.T) {
	ctx := context.Background()
	url := storeURL(t, "postgres")
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := open(ctx, Config{URL: url + sep + PreparedStatementsParam + "=false", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.Empty(t, s.prepared)
	require.Empty(t, s.preparedReads)
	obj, err := s.Create(ctx, &CreateParams{Kind: "workload_instances", Name: "web", Spec: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = s.UpdateStatus(ctx, &UpdateStatusParams{Kind: "workload_instances", ID: obj.ID, Status: json.RawMessage(`{"phase":"Ready"}`)})
	require.NoError(t, err)
}

// TestPostgresURLErrorHidesThePassword: a URL that does not parse is refused with the reason, and without
// the password it carries.
func TestPostgresURLErrorHidesThePassword(t *testing.T) {
	for _, bad := range []string{"postgres://qleet:s3cret@db:bad/qleet", "postgres://qleet:s3cret@db:5432/qleet\x7f"} {
		_, err := open(context.Background(), Config{URL: bad, Logger: slog.New(slog.DiscardHandler)})
		require.Error(t, err)
		require.Contains(t, err.Error(), "store: parse postgres URL")
		require.NotContains(t, err.Error(), "s3cret")
	}
}
