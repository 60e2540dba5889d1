-- 0006_outbox_trace: an outbox row carries the W3C traceparent of the write that made it, so that the
-- relay's publish and the reconcile that follows continue the change's trace ('' when none).

ALTER TABLE outbox ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
