-- gold_workareas (assigned 010; numbered 011 after append_writes_its_outbox took 010 at merge): the outbox carries a fourth target, gold.workareas.
--
-- The fold emits one gold.workareas row beside each gold.lineage row (one
-- per change to a promoted claim, same op, claim and payload); the lake
-- writer MERGEs it into the row of the claim's workarea in
-- <tenant>/gold/workareas (docs/gold.md). Only the target CHECK widens: the
-- other outbox rules (the op CHECKs, outbox_implied_once, the xid rule, the
-- column grants) already cover any target.
--
-- A deployment whose journal predates gold has no gold rows for its older
-- changes; `oml lake repair` re-derives them from the journal
-- (docs/gold.md, "Backfilling gold").
ALTER TABLE oml.outbox DROP CONSTRAINT outbox_target_check;
ALTER TABLE oml.outbox ADD CONSTRAINT outbox_target_check
    CHECK (target IN ('bronze.events', 'silver.claims', 'gold.lineage', 'gold.workareas'));
