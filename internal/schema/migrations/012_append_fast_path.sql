-- append_fast_path: oml.append_journal makes the same checks as before in
-- one expression and one statement on the common path, so that the
-- enforcement stays well inside its 10% of the append's throughput
-- (docs/security.md, "What the enforcement costs").
--
-- Why: measured on the append path (one event per transaction), most of
-- what the enforcement still cost was not the checks' work but plpgsql's
-- per-statement and per-expression overhead: about fifteen simple
-- expressions (each compiled again in every transaction and revalidated at
-- every evaluation) and four statements (the previous event's lookup, the
-- journal insert, the outbox insert, the head update; each with its own
-- executor start-up and trigger WHEN set-up).
--
-- What changes, and what does not:
--   * append_journal (the fifteen-argument form) becomes a fast path in
--     front of the function migration append_writes_its_outbox made, which
--     is kept, renamed oml.append_journal_full, unchanged: the one home of
--     the checks' error messages, and the path for everything the fast path
--     does not take (seq 1, the owner's events, any argument that would be
--     refused). It is callable by the owner only (the fast path runs as the
--     owner); the job roles reach it through append_journal.
--   * The fast path takes an append only when every check that needs no
--     query passes in one expression: the transaction acts for p_tenant,
--     the arrays agree in length, the role may journal every event type
--     (oml_app its own types on a tenant chain, oml_lakewriter
--     materialize.skipped), seq 1 is not in it (p_seq[1] > 1), and every
--     outbox row names an event of the append. The checks that need the
--     journal (the previous event exists with hash = p_prev_hash[1] and a
--     recorded_at no later than the first event's; each later event extends
--     the one before it) are conditions of the journal INSERT, in the same
--     statement as the outbox INSERT and the head UPDATE (a data-modifying
--     WITH): when they fail nothing is written, and the full function is
--     called, which checks again and refuses with its named constraint and
--     message (or appends, if the chain moved in between).
--   * Still checked against the journal itself (not oml.chain_heads, which
--     the job roles cannot write but which the check need not trust); the
--     head row is still written by the database only; the triggers
--     (journal_extends_chain for a direct INSERT into the journal,
--     outbox_names_journal_event for a direct INSERT into the outbox) are
--     unchanged and skipped for this function's rows exactly as before (the
--     oml.journal_checked setting, on only for the length of the one
--     statement, plus table-level INSERT, which only the owner has).

------------------------------------------------------------------------------
-- The full checks, kept as they were
------------------------------------------------------------------------------

ALTER FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[],
                                  bigint[], text[], text[], text[], integer[], text[])
    RENAME TO append_journal_full;
REVOKE ALL ON FUNCTION oml.append_journal_full(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[],
                                               bigint[], text[], text[], text[], integer[], text[])
    FROM PUBLIC, oml_app, oml_lakewriter;

------------------------------------------------------------------------------
-- The fast path
------------------------------------------------------------------------------

CREATE FUNCTION oml.append_journal(
    p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[],
    p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamptz[],
    p_outbox_journal_seq bigint[], p_outbox_target text[], p_outbox_op text[],
    p_outbox_artifact_id text[], p_outbox_version integer[], p_outbox_payload text[])
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n  bigint;
    hn bigint;
BEGIN
    -- Every check that needs no query, as append_journal_full makes it, in
    -- one expression (CASE: the flag is set only when all pass). The role
    -- is the caller's: coalesce(nullif(current_setting('role'), 'none'),
    -- session_user), as in append_journal_full.
    IF (CASE WHEN p_seq[1] > 1
             AND p_tenant = oml.current_tenant()
             AND array_length(p_seq, 1) = ALL (ARRAY[array_length(p_prev_hash, 1), array_length(p_hash, 1),
                                                     array_length(p_signature, 1), array_length(p_event_type, 1),
                                                     array_length(p_payload, 1), array_length(p_recorded_at, 1)])
             AND (CASE WHEN array_length(p_outbox_journal_seq, 1) IS NULL
                       THEN coalesce(array_length(p_outbox_target, 1), array_length(p_outbox_op, 1),
                                     array_length(p_outbox_artifact_id, 1), array_length(p_outbox_version, 1),
                                     array_length(p_outbox_payload, 1)) IS NULL
                       ELSE array_length(p_outbox_journal_seq, 1) = ALL (ARRAY[array_length(p_outbox_target, 1),
                                     array_length(p_outbox_op, 1), array_length(p_outbox_artifact_id, 1),
                                     array_length(p_outbox_version, 1), array_length(p_outbox_payload, 1)])
                            AND p_seq[1] <= ALL (p_outbox_journal_seq)
                            AND p_seq[1] + array_length(p_seq, 1) - 1 >= ALL (p_outbox_journal_seq) END)
             AND CASE WHEN p_event_type <@ '{claim.submitted,claim.promoted,claim.demoted,claim.erased,claim.reassigned,simulation.ended}'::text[]
                      THEN p_tenant <> '00000000-0000-0000-0000-000000000000'::uuid
                           AND pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user), 'oml_app', 'USAGE')
                      WHEN p_event_type <@ '{materialize.skipped}'::text[]
                      THEN pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user), 'oml_lakewriter', 'USAGE')
                 END
        THEN set_config('oml.journal_checked', 'on', true) END) IS NULL THEN
        RETURN oml.append_journal_full(p_tenant, p_key_id, p_seq, p_prev_hash, p_hash, p_signature, p_event_type,
                                       p_payload, p_recorded_at, p_outbox_journal_seq, p_outbox_target, p_outbox_op,
                                       p_outbox_artifact_id, p_outbox_version, p_outbox_payload);
    END IF;

    -- Each later event extends the one before it (one pass over the
    -- arrays, as append_journal_full makes it; a query of its own, so that a
    -- one-event append does not even set it up).
    IF array_length(p_seq, 1) > 1 THEN
        IF EXISTS (SELECT 1
                     FROM (SELECT s, p, r, lag(s) OVER w AS ps, lag(h) OVER w AS ph, lag(r) OVER w AS pr
                             FROM unnest(p_seq, p_prev_hash, p_hash, p_recorded_at) WITH ORDINALITY AS u(s, p, h, r, ord)
                           WINDOW w AS (ORDER BY ord)) x
                    WHERE ps IS NOT NULL AND (s <> ps + 1 OR p <> ph OR r < pr) IS NOT FALSE) THEN
            RETURN oml.append_journal_full(p_tenant, p_key_id, p_seq, p_prev_hash, p_hash, p_signature, p_event_type,
                                           p_payload, p_recorded_at, p_outbox_journal_seq, p_outbox_target, p_outbox_op,
                                           p_outbox_artifact_id, p_outbox_version, p_outbox_payload);
        END IF;
    END IF;

    -- One statement: the journal rows, only if they extend the journal's
    -- last event (an uncorrelated subquery, run once); then, only if they
    -- went in, the outbox rows (ORDER BY ordinality: the identity draws seqs
    -- in the rows' order) and the head.
    WITH j AS (
        INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
        SELECT p_tenant, s, p, h, g, p_key_id, t, b, r
          FROM unnest(p_seq, p_prev_hash, p_hash, p_signature, p_event_type, p_payload, p_recorded_at)
               WITH ORDINALITY AS u(s, p, h, g, t, b, r, ord)
         WHERE EXISTS (SELECT 1 FROM oml.journal
                        WHERE tenant_id = p_tenant AND seq = p_seq[1] - 1
                          AND hash = p_prev_hash[1] AND recorded_at <= p_recorded_at[1])
         ORDER BY ord
        RETURNING 1
    ), o AS (
        INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
        SELECT p_tenant, js, tg, op, a, v, pl::jsonb
          FROM unnest(p_outbox_journal_seq, p_outbox_target, p_outbox_op, p_outbox_artifact_id,
                      p_outbox_version, p_outbox_payload) WITH ORDINALITY AS u(js, tg, op, a, v, pl, ord)
         WHERE EXISTS (SELECT 1 FROM j)
         ORDER BY ord
    ), hd AS (
        UPDATE oml.chain_heads
           SET seq = p_seq[array_length(p_seq, 1)], hash = p_hash[array_length(p_seq, 1)],
               updated_at = p_recorded_at[array_length(p_seq, 1)]
         WHERE tenant_id = p_tenant AND EXISTS (SELECT 1 FROM j)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM j), (SELECT count(*) FROM hd) INTO n, hn;

    -- CASE: the setting is cleared before anything else is looked at.
    IF (CASE WHEN set_config('oml.journal_checked', '', true) = '' THEN n = array_length(p_seq, 1) AND hn = 1 END) THEN
        RETURN n;
    END IF;
    IF n = 0 THEN
        -- Nothing was written: the full checks say why (or append).
        RETURN oml.append_journal_full(p_tenant, p_key_id, p_seq, p_prev_hash, p_hash, p_signature, p_event_type,
                                       p_payload, p_recorded_at, p_outbox_journal_seq, p_outbox_target, p_outbox_op,
                                       p_outbox_artifact_id, p_outbox_version, p_outbox_payload);
    END IF;
    -- A chain with events but no head row (append_journal_full makes it
    -- for seq 1; only the owner could have deleted it).
    INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at)
    VALUES (p_tenant, p_seq[n], p_hash[n], p_recorded_at[n]);
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[],
                                          bigint[], text[], text[], text[], integer[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[],
                                             bigint[], text[], text[], text[], integer[], text[])
    TO oml_app, oml_lakewriter;
