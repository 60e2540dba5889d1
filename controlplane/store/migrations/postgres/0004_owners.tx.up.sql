-- 0004_owners: the objects an object was created for (by a controller), as a JSON list of {kind, id, name}.
-- An object with owners is garbage-collected once none of them remains and nothing depends on it.

ALTER TABLE objects ADD COLUMN owners TEXT NOT NULL DEFAULT '[]';
