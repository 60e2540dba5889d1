-- 0005_status_refs: references also come from statuses (the runtimes an instance's controller placed it
-- on), recorded apart from the spec's: "via" is 'spec' or 'status', and each side is replaced on its own.

CREATE TABLE object_refs_new (
	from_id   TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	from_kind TEXT NOT NULL,
	to_id     TEXT NOT NULL REFERENCES objects (id),
	to_kind   TEXT NOT NULL,
	via       TEXT NOT NULL DEFAULT 'spec',
	PRIMARY KEY (from_id, to_id, via)
);

INSERT INTO object_refs_new (from_id, from_kind, to_id, to_kind, via) SELECT from_id, from_kind, to_id, to_kind, 'spec' FROM object_refs;

DROP TABLE object_refs;

ALTER TABLE object_refs_new RENAME TO object_refs;

CREATE INDEX object_refs_to_id_idx ON object_refs (to_id);
