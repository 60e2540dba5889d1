-- 0008_object_counts: the object counts that /metrics reports (objects by kind and phase, and how many are
-- not reconciled) are kept on every write instead of aggregated from every object's JSON at scrape time.
--
-- Triggers on objects append one delta row per change of an object's (kind, phase, reconciled) in the
-- writing transaction, so the counts are exact whichever process wrote; a scrape sums the rows. Deltas
-- are appended, never updated in place, so concurrent writers never wait on one counter row; the store
-- folds them into one row per (kind, phase) from time to time (compactObjectCounts).
--
-- An object is not reconciled when its deletion was requested, its phase is not Ready, or its
-- status.observed_generation is not its generation (the same rule as CountObjects). The partial index
-- finds the least recently written unreconciled object of a kind without reading the others.

CREATE TABLE object_counts (
	id           INTEGER NOT NULL PRIMARY KEY,
	kind         TEXT    NOT NULL,
	phase        TEXT    NOT NULL,
	objects      INTEGER NOT NULL,
	unreconciled INTEGER NOT NULL
);

CREATE TRIGGER objects_count_insert AFTER INSERT ON objects
BEGIN
	INSERT INTO object_counts (kind, phase, objects, unreconciled) VALUES (NEW.kind,
		COALESCE(NULLIF(CAST(json_extract(NEW.status, '$.phase') AS TEXT), ''), 'Pending'), 1,
		CASE WHEN NEW.deletion_requested_at IS NOT NULL OR json_extract(NEW.status, '$.phase') IS NOT 'Ready'
			OR json_extract(NEW.status, '$.observed_generation') IS NOT NEW.generation THEN 1 ELSE 0 END);
END;

CREATE TRIGGER objects_count_delete AFTER DELETE ON objects
BEGIN
	INSERT INTO object_counts (kind, phase, objects, unreconciled) VALUES (OLD.kind,
		COALESCE(NULLIF(CAST(json_extract(OLD.status, '$.phase') AS TEXT), ''), 'Pending'), -1,
		CASE WHEN OLD.deletion_requested_at IS NOT NULL OR json_extract(OLD.status, '$.phase') IS NOT 'Ready'
			OR json_extract(OLD.status, '$.observed_generation') IS NOT OLD.generation THEN -1 ELSE 0 END);
END;

-- A write that changes neither the phase nor whether the object is reconciled appends nothing.
CREATE TRIGGER objects_count_update AFTER UPDATE ON objects
WHEN OLD.kind IS NOT NEW.kind
	OR (OLD.deletion_requested_at IS NULL) IS NOT (NEW.deletion_requested_at IS NULL)
	OR ((OLD.status IS NOT NEW.status OR OLD.generation IS NOT NEW.generation) AND (
		COALESCE(NULLIF(CAST(json_extract(OLD.status, '$.phase') AS TEXT), ''), 'Pending')
			IS NOT COALESCE(NULLIF(CAST(json_extract(NEW.status, '$.phase') AS TEXT), ''), 'Pending')
		OR (json_extract(OLD.status, '$.phase') IS NOT 'Ready'
			OR json_extract(OLD.status, '$.observed_generation') IS NOT OLD.generation)
			IS NOT (json_extract(NEW.status, '$.phase') IS NOT 'Ready'
			OR json_extract(NEW.status, '$.observed_generation') IS NOT NEW.generation)))
BEGIN
	INSERT INTO object_counts (kind, phase, objects, unreconciled) VALUES (OLD.kind,
		COALESCE(NULLIF(CAST(json_extract(OLD.status, '$.phase') AS TEXT), ''), 'Pending'), -1,
		CASE WHEN OLD.deletion_requested_at IS NOT NULL OR json_extract(OLD.status, '$.phase') IS NOT 'Ready'
			OR json_extract(OLD.status, '$.observed_generation') IS NOT OLD.generation THEN -1 ELSE 0 END),
		(NEW.kind,
		COALESCE(NULLIF(CAST(json_extract(NEW.status, '$.phase') AS TEXT), ''), 'Pending'), 1,
		CASE WHEN NEW.deletion_requested_at IS NOT NULL OR json_extract(NEW.status, '$.phase') IS NOT 'Ready'
			OR json_extract(NEW.status, '$.observed_generation') IS NOT NEW.generation THEN 1 ELSE 0 END);
END;

-- The counts of the objects that exist now; the triggers keep them from here.
INSERT INTO object_counts (kind, phase, objects, unreconciled)
SELECT kind, phase, COUNT(*), SUM(unreconciled) FROM (
	SELECT kind, COALESCE(NULLIF(CAST(json_extract(status, '$.phase') AS TEXT), ''), 'Pending') AS phase,
		CASE WHEN deletion_requested_at IS NOT NULL OR json_extract(status, '$.phase') IS NOT 'Ready'
			OR json_extract(status, '$.observed_generation') IS NOT generation THEN 1 ELSE 0 END AS unreconciled
	FROM objects) AS t
GROUP BY kind, phase;

CREATE INDEX objects_unreconciled_idx ON objects (kind, updated_at)
WHERE deletion_requested_at IS NOT NULL OR json_extract(status, '$.phase') IS NOT 'Ready'
	OR json_extract(status, '$.observed_generation') IS NOT generation;
