-- 008 (assigned 009; numbered after the migrations merged before it): oml outbox prune remembers how far it pruned each table.
--
-- `oml outbox prune` (run by the owner: the lake writer may only INSERT
-- outbox rows, so a compromised writer cannot delete rows it has not
-- drained) deletes outbox rows every table has applied. The rows of one
-- table (tenant, target) it deletes are always a seq prefix of that
-- table's rows (dead-lettered rows aside, which it keeps and the lake
-- writer never applies). This table records, per table, the end of that
-- prefix, so the readers of old rows know exactly when a row they expect
-- may be gone and must be re-derived from the journal:
--   * the lake writer's rebuild of a missing table (rows at or below
--     through_seq come from the journal, the rest from the outbox);
--   * the continuity check's row count of a recorded batch (a batch that
--     starts below through_seq may hold fewer rows now).
-- One row per table that was ever pruned; through_seq only grows.
CREATE TABLE oml.outbox_pruned (
    tenant_id   uuid        NOT NULL,
    target      text        NOT NULL,
    through_seq bigint      NOT NULL,            -- every row of the table with seq <= this may be gone
    rows_pruned bigint      NOT NULL DEFAULT 0,  -- how many rows of the table were deleted, in total
    pruned_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, target)
);

GRANT SELECT ON oml.outbox_pruned TO oml_lakewriter, oml_auditor;
