-- 0001_init: objects with their labels and references, events, the outbox and API tokens (SQLite).

CREATE TABLE objects (
	id                    TEXT      NOT NULL PRIMARY KEY,
	kind                  TEXT      NOT NULL,
	name                  TEXT      NOT NULL,
	generation            INTEGER   NOT NULL,
	resource_version      INTEGER   NOT NULL,
	spec                  TEXT      NOT NULL,
	status                TEXT      NOT NULL,
	created_at            TIMESTAMP NOT NULL,
	updated_at            TIMESTAMP NOT NULL,
	deletion_requested_at TIMESTAMP,
	CONSTRAINT objects_kind_name_key UNIQUE (kind, name)
);

-- Lists page through one kind by id.
CREATE INDEX objects_kind_id_idx ON objects (kind, id);

CREATE TABLE object_labels (
	object_id TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	key       TEXT NOT NULL,
	value     TEXT NOT NULL,
	PRIMARY KEY (object_id, key)
);

CREATE INDEX object_labels_key_value_idx ON object_labels (key, value, object_id);

-- A reference keeps its target alive: to_id has no ON DELETE action, so deleting a referenced object fails.
CREATE TABLE object_refs (
	from_id   TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	from_kind TEXT NOT NULL,
	to_id     TEXT NOT NULL REFERENCES objects (id),
	to_kind   TEXT NOT NULL,
	PRIMARY KEY (from_id, to_id)
);

CREATE INDEX object_refs_to_id_idx ON object_refs (to_id);

CREATE TABLE events (
	id          INTEGER   NOT NULL PRIMARY KEY AUTOINCREMENT,
	object_id   TEXT      NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	kind        TEXT      NOT NULL,
	type        TEXT      NOT NULL,
	reason      TEXT      NOT NULL,
	message     TEXT      NOT NULL,
	generation  INTEGER   NOT NULL,
	duration_ms INTEGER   NOT NULL,
	source      TEXT      NOT NULL,
	created_at  TIMESTAMP NOT NULL
);

CREATE INDEX events_object_id_idx ON events (object_id, id);

-- Outbox rows outlive the objects they name: the controller learns of a deletion by not finding the object.
CREATE TABLE outbox (
	id         INTEGER   NOT NULL PRIMARY KEY AUTOINCREMENT,
	kind       TEXT      NOT NULL,
	object_id  TEXT      NOT NULL,
	created_at TIMESTAMP NOT NULL
);

CREATE TABLE tokens (
	hash       TEXT      NOT NULL PRIMARY KEY,
	name       TEXT      NOT NULL,
	role       TEXT      NOT NULL,
	created_at TIMESTAMP NOT NULL
);
