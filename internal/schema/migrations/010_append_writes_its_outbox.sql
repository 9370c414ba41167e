-- append_writes_its_outbox: oml.append_journal also writes the outbox rows
-- of the events it appends, so that the outbox check
-- (outbox_names_journal_event, migration 004) need not run for them
-- (docs/security.md, "What the enforcement costs").
--
-- The append path's enforcement is held to 10% of its throughput. The
-- largest single part of it was the statement-level trigger that checks
-- every outbox INSERT statement against the journal: a plpgsql call and a
-- primary-key probe of the journal per row, for rows whose events the same
-- transaction had inserted one statement earlier. The function that inserts
-- those events knows them, so it checks its outbox rows against its own
-- arguments (every row names one of the events of this append, of this
-- tenant) and inserts them with the trigger skipped. Nothing else changes:
--   * a direct INSERT into oml.outbox, by any role, is checked by the
--     trigger as before; the skip needs both the setting append_journal
--     sets (oml.journal_checked = on) and table-level INSERT on oml.outbox,
--     which only the owner (and a superuser) has: the job roles hold INSERT
--     on seven columns only (migration trust_copies_and_event_rights), so a
--     job role that sets the setting itself is still checked;
--   * the owner or a superuser can skip the check, as they could disable
--     the trigger anyway (and can skip journal_extends_chain the same way);
--   * an outbox row that names another tenant or an event outside the
--     append is refused by the function (the append path inserts such rows,
--     e.g. a re-enqueue's copy, with their own INSERT, checked as before).

------------------------------------------------------------------------------
-- The append with its outbox rows
------------------------------------------------------------------------------

-- As trust_copies_and_event_rights' append_journal, plus six outbox column
-- arrays (one element per outbox row; the rows' tenant is p_tenant),
-- inserted after the journal rows, in array order (so their seqs follow
-- it). NULL or empty arrays: no outbox rows.
CREATE FUNCTION oml.append_journal(
    p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[],
    p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamptz[],
    p_outbox_journal_seq bigint[], p_outbox_target text[], p_outbox_op text[],
    p_outbox_artifact_id text[], p_outbox_version integer[], p_outbox_payload text[])
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n    integer := coalesce(array_length(p_seq, 1), 0);
    m    integer := coalesce(array_length(p_outbox_journal_seq, 1), 0);
    prev record;
    bad  bigint;
    at   bigint;
    why  text;
    who  text;
    ok   text[];
    deny text;
    flag text;
BEGIN
    IF p_tenant IS DISTINCT FROM oml.current_tenant() THEN
        RAISE EXCEPTION 'append to tenant % refused: this transaction acts for tenant %', p_tenant, coalesce(oml.current_tenant()::text, '(none)')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'set oml.tenant_id to the tenant appended to (chain.AppendTx does)';
    END IF;
    IF n = 0 THEN
        IF m > 0 THEN
            RAISE EXCEPTION 'append_journal: outbox rows without events' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN 0;
    END IF;

    -- One simple expression on the common path (a job role appending its
    -- own types): no query, no catalog lookup by name beyond the roles'.
    who := coalesce(nullif(current_setting('role'), 'none'), session_user);
    ok := CASE WHEN p_tenant <> '00000000-0000-0000-0000-000000000000'::uuid AND pg_has_role(who, 'oml_app', 'USAGE')
               THEN '{claim.submitted,claim.promoted,claim.demoted,claim.erased,claim.reassigned,simulation.ended}'::text[]
               ELSE '{}'::text[] END
          || CASE WHEN pg_has_role(who, 'oml_lakewriter', 'USAGE') THEN '{materialize.skipped}'::text[] ELSE '{}'::text[] END;
    IF NOT (p_event_type <@ ok) AND NOT has_table_privilege(who, 'oml.journal'::regclass, 'INSERT') THEN
        SELECT t INTO deny FROM unnest(p_event_type) AS u(t) WHERE NOT (t = ANY (ok)) LIMIT 1;
        RAISE EXCEPTION 'append of a % event to tenant % refused: role % may not journal it%', deny, p_tenant, who,
              CASE WHEN p_tenant = '00000000-0000-0000-0000-000000000000'::uuid THEN ' on the provider chain' ELSE '' END
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'provider-chain and operator events (keys, tenants, dead-letter repairs, recovery) are journalled by the owner: run the oml command as the owner login';
    END IF;

    IF array_length(p_prev_hash, 1) IS DISTINCT FROM n OR array_length(p_hash, 1) IS DISTINCT FROM n
       OR array_length(p_signature, 1) IS DISTINCT FROM n OR array_length(p_event_type, 1) IS DISTINCT FROM n
       OR array_length(p_payload, 1) IS DISTINCT FROM n OR array_length(p_recorded_at, 1) IS DISTINCT FROM n
       OR coalesce(array_length(p_outbox_target, 1), 0) <> m OR coalesce(array_length(p_outbox_op, 1), 0) <> m
       OR coalesce(array_length(p_outbox_artifact_id, 1), 0) <> m OR coalesce(array_length(p_outbox_version, 1), 0) <> m
       OR coalesce(array_length(p_outbox_payload, 1), 0) <> m THEN
        RAISE EXCEPTION 'append_journal: the arrays differ in length' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    at := p_seq[1];
    IF p_seq[1] = 1 THEN
        IF p_prev_hash[1] <> '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea THEN
            why := 'seq 1 must carry the all-zero prev_hash';
        ELSIF p_tenant <> '00000000-0000-0000-0000-000000000000'::uuid
              AND NOT EXISTS (SELECT 1 FROM oml.tenants WHERE id = p_tenant) THEN
            why := 'it opens the chain of a tenant that has no oml.tenants row';
        END IF;
    ELSE
        SELECT hash, recorded_at INTO prev FROM oml.journal WHERE tenant_id = p_tenant AND seq = p_seq[1] - 1;
        IF NOT FOUND THEN
            why := format('the chain has no event at seq %s (its head is lower)', p_seq[1] - 1);
        ELSIF prev.hash <> p_prev_hash[1] THEN
            why := format('its prev_hash is not the hash of seq %s', p_seq[1] - 1);
        ELSIF p_recorded_at[1] < prev.recorded_at THEN
            why := format('its recorded_at %s is before that of seq %s', p_recorded_at[1], p_seq[1] - 1);
        END IF;
    END IF;
    IF why IS NULL AND n > 1 THEN
        -- One pass over the arrays (unnest and lag, no subscripting: an
        -- element of a bytea[] is found by walking the ones before it).
        SELECT s, ps INTO at, bad
          FROM (SELECT s, p, r, lag(s) OVER w AS ps, lag(h) OVER w AS ph, lag(r) OVER w AS pr
                  FROM unnest(p_seq, p_prev_hash, p_hash, p_recorded_at) WITH ORDINALITY AS u(s, p, h, r, ord)
                WINDOW w AS (ORDER BY ord)) x
         WHERE ps IS NOT NULL AND (s <> ps + 1 OR p <> ph OR r < pr)
         LIMIT 1;
        IF FOUND THEN
            why := format('it does not extend the event before it in the same append (seq %s)', bad);
        END IF;
    END IF;
    IF why IS NOT NULL THEN
        RAISE EXCEPTION 'journal event seq % of tenant % does not extend its chain: %', at, p_tenant, why
            USING ERRCODE = 'check_violation', CONSTRAINT = 'journal_extends_chain',
                  HINT = 'append through oml (chain.AppendTx), which links each event to the journal''s last one';
    END IF;

    -- The outbox rows name events of this append: the seqs are p_seq[1] ..
    -- p_seq[1] + n - 1 (consecutive, checked above), all of p_tenant. This
    -- is the check outbox_names_journal_event would make, against the
    -- arguments instead of the journal.
    -- (A simple expression, no query, on the common path; the query finds
    -- the row to name only when one is wrong.)
    IF m > 0 AND (p_seq[1] <= ALL (p_outbox_journal_seq) AND p_seq[1] + n - 1 >= ALL (p_outbox_journal_seq)) IS NOT TRUE THEN
        SELECT j INTO bad FROM unnest(p_outbox_journal_seq) AS u(j)
         WHERE j IS NULL OR j < p_seq[1] OR j > p_seq[1] + n - 1
         LIMIT 1;
        RAISE EXCEPTION 'outbox row for tenant % journal seq % refused: it names no event of this append (seqs % to %)', p_tenant, coalesce(bad::text, 'NULL'), p_seq[1], p_seq[1] + n - 1
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'outbox_names_journal_event',
                  HINT = 'append_journal writes the outbox rows of the events it appends; insert any other outbox row with INSERT, which checks it against the journal';
    END IF;

    -- Assignments, not PERFORM: a simple expression needs no query.
    flag := set_config('oml.journal_checked', 'on', true);
    INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
    SELECT p_tenant, s, p, h, g, p_key_id, t, b, r
      FROM unnest(p_seq, p_prev_hash, p_hash, p_signature, p_event_type, p_payload, p_recorded_at)
           WITH ORDINALITY AS u(s, p, h, g, t, b, r, ord)
     ORDER BY ord;
    IF m > 0 THEN
        -- ORDER BY ordinality: the identity draws seqs in the rows' order.
        INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
        SELECT p_tenant, j, g, o, a, v, pl::jsonb
          FROM unnest(p_outbox_journal_seq, p_outbox_target, p_outbox_op, p_outbox_artifact_id,
                      p_outbox_version, p_outbox_payload) WITH ORDINALITY AS u(j, g, o, a, v, pl, ord)
         ORDER BY ord;
    END IF;
    flag := set_config('oml.journal_checked', '', true);

    UPDATE oml.chain_heads SET seq = p_seq[n], hash = p_hash[n], updated_at = p_recorded_at[n]
     WHERE tenant_id = p_tenant;
    IF NOT FOUND THEN
        INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at)
        VALUES (p_tenant, p_seq[n], p_hash[n], p_recorded_at[n]);
    END IF;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[],
                                          bigint[], text[], text[], text[], integer[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[],
                                             bigint[], text[], text[], text[], integer[], text[])
    TO oml_app, oml_lakewriter;

-- The nine-argument form (an append without outbox rows, as older callers
-- make it) is the same checks: one home for them.
CREATE OR REPLACE FUNCTION oml.append_journal(
    p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[],
    p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamptz[])
    RETURNS bigint
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT oml.append_journal(p_tenant, p_key_id, p_seq, p_prev_hash, p_hash, p_signature, p_event_type,
                              p_payload, p_recorded_at, NULL::bigint[], NULL::text[], NULL::text[], NULL::text[],
                              NULL::integer[], NULL::text[])
$$;

------------------------------------------------------------------------------
-- The outbox check, skipped for append_journal's own rows only
------------------------------------------------------------------------------

-- WHEN rather than a test inside the function: a skipped statement costs
-- no plpgsql call. has_table_privilege(regclass, text) asks for
-- current_user, which inside append_journal (SECURITY DEFINER) is the
-- owner; for a job role's own INSERT it is that role, which has column
-- grants only, so the check runs whatever the setting says.
DROP TRIGGER outbox_names_journal_event ON oml.outbox;
CREATE TRIGGER outbox_names_journal_event
    AFTER INSERT ON oml.outbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (current_setting('oml.journal_checked', true) IS DISTINCT FROM 'on'
          OR NOT has_table_privilege('oml.outbox'::regclass, 'INSERT'))
    EXECUTE FUNCTION oml.outbox_require_event();
