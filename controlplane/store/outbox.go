package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/qleetos/terraform-provider-qleet/controlplane/telemetry"
)

// DefaultOutboxLimit is PendingOutbox's page size when the caller passes 0.
const DefaultOutboxLimit = 100

// PendingOutbox returns up to limit outbox entries, oldest first.
func (s *bunStore) PendingOutbox(ctx context.Context, limit int) ([]*OutboxEntry, error) {
	if limit <= 0 {
		limit = DefaultOutboxLimit
	}
	var rows []outboxRow
	// One statement sees one snapshot by itself: no transaction (on PostgreSQL, one round trip instead of
	// three, for every batch the relay reads).
	ctx, span := s.txSpanAt(ctx, "read", 2)
	err := s.rdb.NewSelect().Model(&rows).Order("id").Limit(int64(limit)).Scan(ctx)
	telemetry.End(span, err)
	if err != nil {
		return nil, fmt.Errorf("store: pending outbox: %w", err)
	}
	out := make([]*OutboxEntry, len(rows))
	for i := range rows {
		out[i] = rows[i].toEntry()
	}
	return out, nil
}

// DeleteOutbox removes delivered outbox entries. Unknown ids are ignored, so two relays may both delete.
func (s *bunStore) DeleteOutbox(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	var alone func(ctx context.Context) error
	if s.dialect == dialectPostgres {
		// One statement is atomic by itself: alone, it needs no BEGIN and COMMIT around it.
		alone = func(ctx context.Context) error {
			_, err := s.wdb.NewDelete().Model((*outboxRow)(nil)).Where("id IN (?)", bun.List(ids)).Exec(ctx)
			return err
		}
	}
	err := s.writeOr(ctx, func(ctx context.Context, tx bun.Tx) error {
		_, err := tx.NewDelete().Model((*outboxRow)(nil)).Where("id IN (?)", bun.List(ids)).Exec(ctx)
		return err
	}, alone)
	if err != nil {
		return fmt.Errorf("store: delete outbox: %w", err)
	}
	return nil
}

// OutboxStats returns the number of pending entries and the age of the oldest (0 when there is none).
func (s *bunStore) OutboxStats(ctx context.Context) (int64, time.Duration, error) {
	var (
		pending int64
		oldest  outboxRow
	)
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		n, err := tx.NewSelect().Model((*outboxRow)(nil)).Count(ctx)
		if err != nil {
			return err
		}
		pending = n
		if n == 0 {
			return nil
		}
		err = tx.NewSelect().Model(&oldest).Order("id").Limit(1).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: outbox stats: %w", err)
	}
	if pending == 0 || oldest.CreatedAt.IsZero() {
		return pending, 0, nil
	}
	return pending, max(time.Since(oldest.CreatedAt), 0), nil
}
