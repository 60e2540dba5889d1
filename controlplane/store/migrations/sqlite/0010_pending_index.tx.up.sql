-- 0010_pending_index: partial indexes over the objects a resync pass looks at while the control plane is
-- busy: those not reconciled (deletion requested, not Ready, or Ready at an older generation) and those
-- created for owners. At rest both are nearly empty, so a pass costs what is pending, not the size of the
-- kind (issue 30). The predicates are the store's pendingPredicate and ownedPredicate, word for word, so
-- that the planner proves a filtered list implies them.

CREATE INDEX objects_pending_idx ON objects (kind, id)
	WHERE deletion_requested_at IS NOT NULL OR json_extract(status, '$.phase') IS NOT 'Ready' OR json_extract(status, '$.observed_generation') IS NOT generation;

CREATE INDEX objects_owned_idx ON objects (kind, id) WHERE owners <> '[]';
