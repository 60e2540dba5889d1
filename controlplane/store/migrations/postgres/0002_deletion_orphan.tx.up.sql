-- 0002_deletion_orphan: a deletion may abandon what the object made in the compute space (?orphan=true).

ALTER TABLE objects ADD COLUMN deletion_orphan BOOLEAN NOT NULL DEFAULT FALSE;
