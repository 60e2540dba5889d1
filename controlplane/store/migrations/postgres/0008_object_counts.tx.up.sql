-- 0008_object_counts: the object counts that /metrics reports (objects by kind and phase, and how many are
-- not reconciled) are kept on every write instead of aggregated from every object's JSON at scrape time.
--
-- Triggers on objects append one delta row per change of an object's (kind, phase, reconciled) in the
-- writing transaction, so the counts are exact whichever API replica wrote; a scrape sums the rows. Deltas
-- are appended, never updated in place, so concurrent writers never wait on (or deadlock over) one counter
-- row; the store folds them into one row per (kind, phase) from time to time (compactObjectCounts).
--
-- An object is not reconciled when its deletion was requested, its phase is not Ready, or its
-- status.observed_generation is not its generation (the same rule as CountObjects; generation::text::jsonb
-- is to_jsonb(generation), written with immutable casts so that an index predicate may use it). The partial
-- index finds the least recently written unreconciled object of a kind without reading the others.
--
-- Creating the triggers locks objects against writes until this migration commits, so no write falls
-- between the backfill and the triggers.

CREATE TABLE object_counts (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind         text   NOT NULL,
	phase        text   NOT NULL,
	objects      bigint NOT NULL,
	unreconciled bigint NOT NULL
);

CREATE FUNCTION qleet_object_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		INSERT INTO object_counts (kind, phase, objects, unreconciled) VALUES (OLD.kind,
			COALESCE(NULLIF(OLD.status ->> 'phase', ''), 'Pending'), -1,
			CASE WHEN OLD.deletion_requested_at IS NOT NULL OR (OLD.status ->> 'phase') IS DISTINCT FROM 'Ready'
				OR (OLD.status -> 'observed_generation') IS DISTINCT FROM (OLD.generation::text)::jsonb THEN -1 ELSE 0 END);
	END IF;
	IF TG_OP <> 'DELETE' THEN
		INSERT INTO object_counts (kind, phase, objects, unreconciled) VALUES (NEW.kind,
			COALESCE(NULLIF(NEW.status ->> 'phase', ''), 'Pending'), 1,
			CASE WHEN NEW.deletion_requested_at IS NOT NULL OR (NEW.status ->> 'phase') IS DISTINCT FROM 'Ready'
				OR (NEW.status -> 'observed_generation') IS DISTINCT FROM (NEW.generation::text)::jsonb THEN 1 ELSE 0 END);
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER objects_count_insert_delete AFTER INSERT OR DELETE ON objects
	FOR EACH ROW EXECUTE FUNCTION qleet_object_counts();

-- A write that changes neither the phase nor whether the object is reconciled appends nothing.
CREATE TRIGGER objects_count_update AFTER UPDATE ON objects
	FOR EACH ROW WHEN (OLD.kind IS DISTINCT FROM NEW.kind
		OR (OLD.deletion_requested_at IS NULL) IS DISTINCT FROM (NEW.deletion_requested_at IS NULL)
		OR COALESCE(NULLIF(OLD.status ->> 'phase', ''), 'Pending') IS DISTINCT FROM COALESCE(NULLIF(NEW.status ->> 'phase', ''), 'Pending')
		OR ((OLD.status ->> 'phase') IS DISTINCT FROM 'Ready'
			OR (OLD.status -> 'observed_generation') IS DISTINCT FROM (OLD.generation::text)::jsonb)
			IS DISTINCT FROM ((NEW.status ->> 'phase') IS DISTINCT FROM 'Ready'
			OR (NEW.status -> 'observed_generation') IS DISTINCT FROM (NEW.generation::text)::jsonb))
	EXECUTE FUNCTION qleet_object_counts();

-- The counts of the objects that exist now; the triggers keep them from here.
INSERT INTO object_counts (kind, phase, objects, unreconciled)
SELECT kind, phase, COUNT(*), SUM(unreconciled) FROM (
	SELECT kind, COALESCE(NULLIF(status ->> 'phase', ''), 'Pending') AS phase,
		CASE WHEN deletion_requested_at IS NOT NULL OR (status ->> 'phase') IS DISTINCT FROM 'Ready'
			OR (status -> 'observed_generation') IS DISTINCT FROM (generation::text)::jsonb THEN 1 ELSE 0 END AS unreconciled
	FROM objects) AS t
GROUP BY kind, phase;

CREATE INDEX objects_unreconciled_idx ON objects (kind, updated_at)
WHERE deletion_requested_at IS NOT NULL OR (status ->> 'phase') IS DISTINCT FROM 'Ready'
	OR (status -> 'observed_generation') IS DISTINCT FROM (generation::text)::jsonb;
