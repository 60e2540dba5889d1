-- 0007_event_count: a repeated event (same object, type, reason, message, source and generation) is
-- counted on one row, as Kubernetes does: count says how often it happened, created_at when first and
-- last_seen_at when last. Rows written before this migration happened once.

ALTER TABLE events ADD COLUMN count bigint NOT NULL DEFAULT 1;
ALTER TABLE events ADD COLUMN last_seen_at timestamptz;
UPDATE events SET last_seen_at = created_at;
ALTER TABLE events ALTER COLUMN last_seen_at SET NOT NULL;
