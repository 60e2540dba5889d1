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

// EventRepeatWindow is how long after an event was last seen an identical one is counted on its row
// rather than appended: the aggregation window of Kubernetes's event recorder.
const EventRepeatWindow = 10 * time.Minute

// AppendEvent records an event and drops the object's events beyond the newest EventRetention. An event
// identical to one of the object's events last seen within EventRepeatWindow (same type, reason, message,
// source and generation) is counted on that row instead: its count grows, its last_seen_at moves to
// ev.CreatedAt, and its duration becomes ev's. It fills in ev.ID, ev.CreatedAt (when zero; when the first
// occurrence was, for a repeat), ev.LastSeenAt, ev.Count and ev.Kind (when empty, from the object). The
// object must exist.
func (s *bunStore) AppendEvent(ctx context.Context, ev *Event) error {
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = now()
	}
	at := ev.CreatedAt.UTC().Truncate(time.Microsecond)
	row := &eventRow{
		ObjectID:   ev.ObjectID,
		Kind:       ev.Kind,
		Type:       ev.Type,
		Reason:     ev.Reason,
		Message:    ev.Message,
		Generation: ev.Generation,
		DurationMS: ev.DurationMS,
		Source:     ev.Source,
		CreatedAt:  at,
		Count:      1,
		LastSeenAt: at,
	}
	err := s.write(ctx, func(ctx context.Context, tx bun.Tx) error {
		var kind string
		var generation int64
		err := s.scanIn(ctx, tx, sqlObjectKind, []any{row.ObjectID}, &kind, &generation)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && row.Kind != "" && row.Kind != kind) {
			return notFound(row.Kind, row.ObjectID)
		}
		if err != nil {
			return err
		}
		row.Kind = kind
		if row.Generation == 0 {
			row.Generation = generation
		}
		counted, err := s.countRepeat(ctx, tx, row)
		if err != nil || counted {
			return err
		}
		err = s.scanIn(ctx, tx, sqlEventInsert, []any{row.ObjectID, row.Kind, row.Type, row.Reason, row.Message,
			row.Generation, row.DurationMS, row.Source, row.CreatedAt, row.Count, row.LastSeenAt}, &row.ID)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if err := s.execIn(ctx, tx, sqlEventTrim, row.ObjectID, row.ObjectID, EventRetention); err != nil {
			return fmt.Errorf("trim: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: append event for %q: %w", ev.ObjectID, err)
	}
	ev.ID = row.ID
	ev.Kind = row.Kind
	ev.Generation = row.Generation
	ev.CreatedAt = row.CreatedAt
	ev.Count = row.Count
	ev.LastSeenAt = row.LastSeenAt
	return nil
}

// countRepeat counts row on the object's newest identical event last seen within EventRepeatWindow, if
// there is one, and then reports true with row filled in from it. The lookup reads the object's events
// only (events_object_id_idx), of which there are at most EventRetention.
func (s *bunStore) countRepeat(ctx context.Context, tx bun.Tx, row *eventRow) (bool, error) {
	var prev eventRow
	err := s.scanIn(ctx, tx, sqlEventRepeat, []any{row.ObjectID, row.Type, row.Reason, row.Message, row.Source,
		row.Generation, row.LastSeenAt.Add(-EventRepeatWindow)}, &prev)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find repeat: %w", err)
	}
	last := row.LastSeenAt
	if prev.LastSeenAt.After(last) {
		last = prev.LastSeenAt // appended out of order: the row keeps its latest
	}
	if err := s.execIn(ctx, tx, sqlEventCount, last, row.DurationMS, prev.ID); err != nil {
		return false, fmt.Errorf("count repeat: %w", err)
	}
	row.ID, row.CreatedAt, row.Count, row.LastSeenAt = prev.ID, prev.CreatedAt, max(prev.Count, 1)+1, last
	return true, nil
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
