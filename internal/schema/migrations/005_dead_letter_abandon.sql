-- 005: a dead letter can be abandoned (oml deadletter abandon).
--
-- When a dead-lettered row can never be repaired (its held body is gone
-- for good), the operator journals deadletter.abandoned; the fold records
-- it here. An abandoned dead letter is closed: not open (doctor and status
-- stop counting it), reported by reconcile as an accepted gap, and refused
-- by re-enqueue. A row is re-enqueued or abandoned, never both.
ALTER TABLE oml.dead_letter
    ADD COLUMN abandoned_at   timestamptz,
    ADD COLUMN abandoned_seq  bigint,        -- journal seq of deadletter.abandoned
    ADD COLUMN abandoned_by   text,
    ADD COLUMN abandon_reason text,
    ADD CONSTRAINT dead_letter_reenqueued_or_abandoned
        CHECK (reenqueued_at IS NULL OR abandoned_at IS NULL);

DROP INDEX oml.dead_letter_open;
CREATE INDEX dead_letter_open ON oml.dead_letter (id)
    WHERE reenqueued_at IS NULL AND abandoned_at IS NULL;
