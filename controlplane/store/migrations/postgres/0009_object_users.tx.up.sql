-- 0009_object_users: the objects a spec attaches its object to, which use it (api.KindInfo.UsedBy: the
-- instances a secret's spec.instance_ids names, the instance a database's or bucket's spec.instance_id
-- names), indexed by the user, so that a list filtered by reference finds them without reading the kind
-- (a reconcile's reverse lookups, issue 30). Unlike object_refs they protect nothing: user_id has no
-- foreign key, since the object outlives its users.

CREATE TABLE object_users (
	object_id text NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
	user_id   text NOT NULL,
	PRIMARY KEY (object_id, user_id)
);

CREATE INDEX object_users_user_id_idx ON object_users (user_id, object_id);

INSERT INTO object_users (object_id, user_id)
	SELECT o.id, j.value FROM objects AS o, jsonb_array_elements_text(
		CASE WHEN jsonb_typeof(o.spec -> 'instance_ids') = 'array' THEN o.spec -> 'instance_ids' ELSE '[]'::jsonb END) AS j(value)
	WHERE o.kind = 'secret' AND j.value <> ''
	ON CONFLICT DO NOTHING;

INSERT INTO object_users (object_id, user_id)
	SELECT o.id, o.spec ->> 'instance_id' FROM objects AS o
	WHERE o.kind IN ('database', 'bucket') AND coalesce(o.spec ->> 'instance_id', '') <> ''
	ON CONFLICT DO NOTHING;
