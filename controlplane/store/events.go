package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// EventRetention is how many events AppendEvent keeps per object (the newest).
const EventRetention = 200

// AppendEvent records an event and drops the object's events beyond the newest EventRetention. It fills
// in ev.ID, ev.CreatedAt (when zero) and ev.Kind (when empty, from the object). The object must exist.
func (s *bunStore) AppendEvent(ctx context.Context, ev *Event) error {
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = now()
	}
	row := &eventRow{
		ObjectID:   ev.ObjectID,
		Kind:       ev.Kind,
		Type:       ev.Type,
		Reason:     ev.Reason,
		Message:    ev.Message,
		Generation: ev.Generation,
		DurationMS: ev.DurationMS,
		Source:     ev.Source,
		CreatedAt:  ev.CreatedAt.UTC().Truncate(time.Microsecond),
	}
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		var kind string
		err := tx.NewSelect().Model((*objectRow)(nil)).Column("kind").Where("id = ?", row.ObjectID).Scan(ctx, &kind)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && row.Kind != "" && row.Kind != kind) {
			return notFound(row.Kind, row.ObjectID)
		}
		if err != nil {
			return err
		}
		row.Kind = kind
		if _, err := tx.NewInsert().Model(row).ExcludeColumn("id").Returning("id").Exec(ctx, &row.ID); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return trimEvents(ctx, tx, row.ObjectID)
	})
	if err != nil {
		return fmt.Errorf("store: append event for %q: %w", ev.ObjectID, err)
	}
	ev.ID = row.ID
	ev.Kind = row.Kind
	ev.CreatedAt = row.CreatedAt
	return nil
}

// trimEvents deletes an object's events older than the newest EventRetention.
func trimEvents(ctx context.Context, tx bun.Tx, objectID string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM events WHERE object_id = ? AND id <= (
	SELECT id FROM events WHERE object_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
		objectID, objectID, EventRetention)
	if err != nil {
		return fmt.Errorf("trim: %w", err)
	}
	return nil
}

// ListEvents returns an object's newest events, at most limit (default and maximum EventRetention),
// oldest first. An unknown object has no events.
func (s *bunStore) ListEvents(ctx context.Context, objectID string, limit int) ([]*Event, error) {
	if limit <= 0 || limit > EventRetention {
		limit = EventRetention
	}
	var rows []eventRow
	err := s.read(ctx, func(ctx context.Context, tx bun.Tx) error {
		return tx.NewSelect().Model(&rows).Where("object_id = ?", objectID).
			OrderExpr("id DESC").Limit(int64(limit)).Scan(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("store: list events of %q: %w", objectID, err)
	}
	slices.Reverse(rows)
	out := make([]*Event, len(rows))
	for i := range rows {
		out[i] = rows[i].toEvent()
	}
	return out, nil
}
