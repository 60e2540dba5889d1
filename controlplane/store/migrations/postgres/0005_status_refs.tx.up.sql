-- 0005_status_refs: references also come from statuses (the runtimes an instance's controller placed it
-- on), recorded apart from the spec's: "via" is 'spec' or 'status', and each side is replaced on its own.

ALTER TABLE object_refs ADD COLUMN via TEXT NOT NULL DEFAULT 'spec';
ALTER TABLE object_refs DROP CONSTRAINT object_refs_pkey;
ALTER TABLE object_refs ADD PRIMARY KEY (from_id, to_id, via);
