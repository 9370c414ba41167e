-- 003: an index for the lake writer's per-tenant catch-up.
--
-- The lake writer refuses to materialize a tenant whose chain is forked
-- (oml chain verify's fork check against the witnessed heads) while other
-- tenants continue; that tenant's tables then fall behind the frontier.
-- When the fork is resolved, the writer finds the rows each of its tables
-- missed with one probe per table: WHERE tenant_id = $1 AND target = $2
-- AND seq > $3. Without this index that probe would scan the outbox range.
CREATE INDEX outbox_tenant_target_seq ON oml.outbox (tenant_id, target, seq);
