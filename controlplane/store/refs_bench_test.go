package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/uptrace/bun"
)

// BenchmarkListByReference lists the one object of a kind that references a target, among 1,000 and
// 10,000 others of the kind that reference something else, on SQLite and PostgreSQL, side by side:
//
//   - exists-scan: the query lists used before issue 30 (a scan of the kind by id with an EXISTS on
//     object_refs per row);
//   - index: List as it is now (an IN over object_refs by to_id and object_users by user_id).
func BenchmarkListByReference(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			ctx := context.Background()
			s := benchStore(b, dialect, 0)
			seed := func(id, kind string) {
				if _, err := s.wdb.ExecContext(ctx, `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status,
					created_at, updated_at) VALUES (?, ?, ?, 1, 1, '{}', '{}', ?, ?)`, id, kind, id, legacyAppliedAt, legacyAppliedAt); err != nil {
					b.Fatal(err)
				}
			}
			seed("target", "kubernetes_runtime")
			seed("elsewhere", "kubernetes_runtime")
			ref := func(from, to string) {
				if _, err := s.wdb.ExecContext(ctx, `INSERT INTO object_refs (from_id, from_kind, to_id, to_kind, via) VALUES (?, 'workload_instance', ?, 'kubernetes_runtime', 'spec')`,
					from, to); err != nil {
					b.Fatal(err)
				}
			}
			seed("inst-target", "workload_instance")
			ref("inst-target", "target")
			others := 0
			for _, n := range []int{1000, 10000} {
				err := s.wdb.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					for i := others; i < n; i++ {
						id := fmt.Sprintf("inst-%05d", i)
						if _, err := tx.ExecContext(ctx, `INSERT INTO objects (id, kind, name, generation, resource_version, spec, status,
							created_at, updated_at) VALUES (?, 'workload_instance', ?, 1, 1, '{}', '{}', ?, ?)`, id, id, legacyAppliedAt, legacyAppliedAt); err != nil {
							return err
						}
						if _, err := tx.ExecContext(ctx, `INSERT INTO object_refs (from_id, from_kind, to_id, to_kind, via) VALUES (?, 'workload_instance', 'elsewhere', 'kubernetes_runtime', 'spec')`, id); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				others = n
				if dialect == "postgres" {
					if _, err := s.wdb.ExecContext(ctx, "ANALYZE"); err != nil {
						b.Fatal(err)
					}
				}
				b.Run(fmt.Sprintf("exists-scan/others=%d", n), func(b *testing.B) {
					for b.Loop() {
						// List's read before issue 30: the same transaction and label read, the old filter.
						var rows []objectRow
						err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
							if err := tx.NewSelect().Model(&rows).Where("kind = ?", "workload_instance").
								Where("EXISTS (SELECT 1 FROM object_refs AS r WHERE r.from_id = o.id AND r.to_id = ?)", "target").
								Order("id").Limit(DefaultListLimit + 1).Scan(ctx); err != nil {
								return err
							}
							_, err := loadLabels(ctx, tx, []string{rows[0].ID})
							return err
						})
						if err != nil || len(rows) != 1 {
							b.Fatalf("%d rows, %v", len(rows), err)
						}
					}
				})
				b.Run(fmt.Sprintf("index/others=%d", n), func(b *testing.B) {
					for b.Loop() {
						res, err := s.List(ctx, &ListParams{Kind: "workload_instance", References: "target"})
						if err != nil || len(res.Objects) != 1 {
							b.Fatalf("%v", err)
						}
					}
				})
			}
		})
	}
}
