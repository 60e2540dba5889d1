package store

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestObjectUsersMigrationBackfills: objects written before object_users existed are found by a list
// filtered by reference to their users after the upgrade (a secret by its spec.instance_ids, a database
// or bucket by its spec.instance_id), on both dialects.
func TestObjectUsersMigrationBackfills(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := Config{Logger: slog.New(slog.DiscardHandler), URL: storeURL(t, dialect), CountsCompactInterval: time.Hour}
			raw, err := openDialect(cfg)
			require.NoError(t, err)
			legacyMigrate(ctx, t, raw, 8)
			for _, o := range []struct{ id, kind, spec string }{
				{"inst-a", "workload_instance", `{}`},
				{"sec-1", "secret", `{"instance_ids":["inst-a","inst-b"]}`},
				{"sec-2", "secret", `{"instance_ids":["inst-b"]}`},
				{"sec-3", "secret", `{}`},
				{"db-1", "database", `{"instance_id":"inst-a"}`},
				{"db-2", "database", `{"engine":"postgres"}`},
				{"bk-1", "bucket", `{"instance_id":"inst-a"}`},
				{"other", "gateway", `{"instance_id":"inst-a"}`},
			} {
				_, err = raw.wdb.ExecContext(ctx, `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status,
					created_at, updated_at) VALUES (?, ?, ?, 1, 1, ?, '{}', ?, ?)`, o.id, o.kind, o.id, o.spec, legacyAppliedAt, legacyAppliedAt)
				require.NoError(t, err)
			}
			require.NoError(t, raw.Close())

			s, err := open(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			ids := func(kind, ref string) []string {
				res, err := s.List(ctx, &ListParams{Kind: kind, References: ref})
				require.NoError(t, err)
				var out []string
				for _, o := range res.Objects {
					out = append(out, o.ID)
				}
				return out
			}
			require.Equal(t, []string{"sec-1"}, ids("secret", "inst-a"))
			require.Equal(t, []string{"sec-1", "sec-2"}, ids("secret", "inst-b"))
			require.Equal(t, []string{"db-1"}, ids("database", "inst-a"))
			require.Equal(t, []string{"bk-1"}, ids("bucket", "inst-a"))
			require.Empty(t, ids("gateway", "inst-a"), "only the kinds whose spec attaches them to their users")

			// Written from now on: a spec's users replace the old ones, and a finalized object's go with it.
			inst, err := s.Create(ctx, &CreateParams{Kind: "workload_instance", Name: "new", Spec: []byte(`{}`)})
			require.NoError(t, err)
			sec, err := s.Create(ctx, &CreateParams{Kind: "secret", Name: "sec-new", Spec: []byte(`{}`), Users: []string{inst.ID, inst.ID}})
			require.NoError(t, err)
			require.Equal(t, []string{sec.ID}, ids("secret", inst.ID))
			_, err = s.UpdateSpec(ctx, &UpdateSpecParams{Kind: "secret", ID: sec.ID, Spec: []byte(`{"n":2}`)})
			require.NoError(t, err)
			require.Equal(t, []string{sec.ID}, ids("secret", inst.ID), "an update without Users keeps them")
			_, err = s.UpdateSpec(ctx, &UpdateSpecParams{Kind: "secret", ID: sec.ID, Spec: []byte(`{"n":3}`), Users: &[]string{"inst-a"}})
			require.NoError(t, err)
			require.Empty(t, ids("secret", inst.ID))
			require.True(t, slices.Contains(ids("secret", "inst-a"), sec.ID))
			_, err = s.RequestDeletion(ctx, "secret", sec.ID, DeletionOptions{})
			require.NoError(t, err)
			require.NoError(t, s.Finalize(ctx, "secret", sec.ID))
			var left int
			require.NoError(t, s.rdb.NewSelect().Table("object_users").Where("object_id = ?", sec.ID).ColumnExpr("count(*)").Scan(ctx, &left))
			require.Zero(t, left)
		})
	}
}
