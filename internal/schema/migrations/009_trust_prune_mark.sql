-- trust_prune_mark (assigned 011; numbered after the migrations merged before it): trust boundaries after `oml outbox prune`
-- (docs/security.md is the threat model).
--
-- outbox_implied_once (migration trust_copies_and_event_rights) keeps one
-- outbox row per implied identity, and the lake writer's row check refuses
-- a row whose earlier copy is still in the outbox. Both compare with rows
-- that are there: once `oml outbox prune` has deleted a row, the
-- application role could insert it again (the journal still implies it, so
-- every check passed) and the lake writer would apply it a second time.
--
-- The prune mark now says, besides the outbox seq it pruned through, the
-- journal event it pruned through: through_journal_seq, the largest event
-- whose rows of the table inserted before the prune are all gone
-- (dead-lettered rows aside, which prune keeps). The append path inserts a
-- table's rows in event order (under the tenant's chain lock), so any later
-- row of the table that cites an event at or below it, and is not the
-- re-enqueue of a dead letter, was not written by its event's append: the
-- lake writer refuses it as poison (internal/lakewriter/check.go,
-- checkPruned).
--
-- Why the lake writer and not an insert trigger: the check is one indexed
-- probe per batch there, against none on the append path (which is held to
-- a 10% budget for all of its enforcement); it also refuses such a row when
-- the owner planted it with triggers off; and it cannot be raced — a
-- forger's REPEATABLE READ snapshot taken before the prune committed would
-- let its insert pass a trigger that reads the mark (the deleted original
-- no longer conflicts in the unique index), whereas the lake writer reads
-- the row only once it is committed, after the prune that made it possible.

ALTER TABLE oml.outbox_pruned ADD COLUMN through_journal_seq bigint NOT NULL DEFAULT 0;

-- Marks written before this migration: the event before the first row
-- still in the outbox above the mark (an event whose rows straddle the
-- mark is not counted), or, when none is left, the chain's last event (every
-- row of the table so far was pruned). A row forged before this migration
-- and still in the outbox can only lower that; the copy check above it in
-- the lake writer and reconcile still see such a row.
UPDATE oml.outbox_pruned p
   SET through_journal_seq = coalesce(
         (SELECT min(o.journal_seq) - 1 FROM oml.outbox o
           WHERE o.tenant_id = p.tenant_id AND o.target = p.target
             AND o.seq > p.through_seq AND o.copy_of IS NULL),
         (SELECT max(j.seq) FROM oml.journal j WHERE j.tenant_id = p.tenant_id),
         0);
