-- 0003_token_lifecycle: tokens get a public id (to list and revoke them by) and an optional expiry.

ALTER TABLE tokens ADD COLUMN id text;
ALTER TABLE tokens ADD COLUMN expires_at timestamptz;
UPDATE tokens SET id = substr(hash, 1, 16);
CREATE UNIQUE INDEX tokens_id_key ON tokens (id);
