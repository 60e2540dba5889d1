-- 0001_init: objects with their labels and references, events, the outbox and API tokens (PostgreSQL).

CREATE TABLE objects (
	id                    text        NOT NULL PRIMARY KEY,
	kind                  text        NOT NULL,
	name                  text        NOT NULL,
	generation            bigint      NOT NULL,
	resource_version      bigint      NOT NULL,
	spec                  jsonb       NOT NULL,
	status                jsonb       NOT NULL,
	created_at            timestamptz NOT NULL,
	updated_at            timestamptz NOT NULL,
	deletion_requested_at timestamptz,
	CONSTRAINT objects_kind_name_key UNIQUE (kind, name)
);

-- Lists page through one kind by id.
CREATE INDEX objects_kind_id_idx ON objects (kind, id);

CREATE TABLE object_labels (
	object_id text NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	key       text NOT NULL,
	value     text NOT NULL,
	PRIMARY KEY (object_id, key)
);

CREATE INDEX object_labels_key_value_idx ON object_labels (key, value, object_id);

-- A reference keeps its target alive: to_id has no ON DELETE action, so deleting a referenced object fails.
CREATE TABLE object_refs (
	from_id   text NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	from_kind text NOT NULL,
	to_id     text NOT NULL REFERENCES objects (id),
	to_kind   text NOT NULL,
	PRIMARY KEY (from_id, to_id)
);

CREATE INDEX object_refs_to_id_idx ON object_refs (to_id);

CREATE TABLE events (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	object_id   text        NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	kind        text        NOT NULL,
	type        text        NOT NULL,
	reason      text        NOT NULL,
	message     text        NOT NULL,
	generation  bigint      NOT NULL,
	duration_ms bigint      NOT NULL,
	source      text        NOT NULL,
	created_at  timestamptz NOT NULL
);

CREATE INDEX events_object_id_idx ON events (object_id, id);

-- Outbox rows outlive the objects they name: the controller learns of a deletion by not finding the object.
CREATE TABLE outbox (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind       text        NOT NULL,
	object_id  text        NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE tokens (
	hash       text        NOT NULL PRIMARY KEY,
	name       text        NOT NULL,
	role       text        NOT NULL,
	created_at timestamptz NOT NULL
);
