-- trust_copies_and_event_rights: trust boundaries, continued (docs/security.md
-- is the threat model).
--
--   * An outbox row the journal implies is in the outbox once. A second
--     copy of a legitimate row (same tenant, journal_seq, target, op,
--     artifact and version: its payload is then determined by the journal
--     too) passes the lake writer's row check, since the journal does imply
--     it, and would reach the lake twice. The one legitimate copy is the
--     re-enqueue of a dead letter (deadletter.reenqueued): it names the
--     dead-lettered row in copy_of, which only the owner can set.
--   * oml.append_journal appends, for a job role, only the event types
--     that role's job journals, and only the lake writer may append to the
--     provider chain (a ghost row's materialize.skipped).

------------------------------------------------------------------------------
-- One copy of each implied outbox row
------------------------------------------------------------------------------

-- copy_of: the outbox seq of the dead-lettered row this row re-enqueues
-- (set by the deadletter.reenqueued fold), NULL for a row its event wrote.
-- A row this migration found already duplicated (a copy made before the rule
-- existed, not by a re-enqueue) is marked with its own seq, so the rule can
-- hold from here on; the lake writer's row check still refuses to apply
-- such a copy twice (docs/lake-writer.md).
ALTER TABLE oml.outbox ADD COLUMN copy_of bigint;

UPDATE oml.outbox o SET copy_of = d.outbox_seq
  FROM oml.dead_letter d
 WHERE d.new_outbox_seq = o.seq;

UPDATE oml.outbox o SET copy_of = o.seq
  FROM (SELECT seq, row_number() OVER (PARTITION BY tenant_id, journal_seq, target, op, artifact_id, version
                                       ORDER BY seq) AS n
          FROM oml.outbox WHERE copy_of IS NULL) x
 WHERE x.seq = o.seq AND x.n > 1;

-- The rule: one row per implied identity with copy_of NULL, one copy per
-- dead-lettered row (the copy's identity is the dead letter's, checked
-- below). Its leading columns are also the lake writer's probe for earlier
-- rows of the same identity.
CREATE UNIQUE INDEX outbox_implied_once
    ON oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, copy_of) NULLS NOT DISTINCT;

-- A copy must name a dead letter (not abandoned) of the same identity.
-- The fold's re-enqueue inserts the copy and marks the dead letter in one
-- statement, so "not yet re-enqueued" is left to the
-- unique index above (one copy per dead letter). An abandoned dead letter
-- is never copied. Runs only for rows that set copy_of (the WHEN clause),
-- i.e. never on the append path.
CREATE FUNCTION oml.outbox_copy_names_dead_letter() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM oml.dead_letter d
                    WHERE d.outbox_seq = NEW.copy_of AND d.abandoned_at IS NULL
                      AND d.tenant_id = NEW.tenant_id AND d.journal_seq = NEW.journal_seq
                      AND d.target = NEW.target AND d.op = NEW.op
                      AND d.artifact_id IS NOT DISTINCT FROM NEW.artifact_id
                      AND d.version IS NOT DISTINCT FROM NEW.version) THEN
        RAISE EXCEPTION 'outbox row copying row % refused: no open dead letter of that row with the same tenant, event, target, op and claim', NEW.copy_of
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'outbox_copy_names_dead_letter',
                  HINT = 'a dead-lettered row is re-enqueued with oml deadletter reenqueue';
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION oml.outbox_copy_names_dead_letter() FROM PUBLIC;
CREATE TRIGGER outbox_copy_names_dead_letter
    BEFORE INSERT ON oml.outbox
    FOR EACH ROW
    WHEN (NEW.copy_of IS NOT NULL)
    EXECUTE FUNCTION oml.outbox_copy_names_dead_letter();

-- The job roles insert outbox rows without copy_of: INSERT on the columns
-- they write, not on the table (a table-level grant covers every column).
REVOKE INSERT ON oml.outbox FROM oml_app, oml_lakewriter;
GRANT INSERT (tenant_id, journal_seq, target, op, artifact_id, version, payload)
    ON oml.outbox TO oml_app, oml_lakewriter;

------------------------------------------------------------------------------
-- append_journal: event types by role
------------------------------------------------------------------------------

-- As 004's, plus the rights check after the tenant check. The caller is
-- the role it acts as (SET ROLE) or else its login: inside a SECURITY
-- DEFINER function current_user is the owner, but the role setting and
-- session_user still name the caller. A caller that may insert into
-- oml.journal directly (the owner, a superuser) is not limited here (it
-- could bypass the function anyway; journal_extends_chain binds it). Any
-- other caller appends only:
--   * as oml_app: claim.submitted, claim.promoted, claim.demoted,
--     claim.erased, claim.reassigned, simulation.ended, never to the
--     provider chain;
--   * as oml_lakewriter: materialize.skipped, on any chain (a ghost row's
--     skip goes on the provider chain).
-- Every other type (key.issued, key.revoked, tenant.created,
-- tenant.genesis, chain.fork_accepted, chain.tail_restored, deadletter.*,
-- and any type a later release adds) is the owner's: operator commands.
CREATE OR REPLACE FUNCTION oml.append_journal(
    p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[],
    p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamptz[])
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n    integer := coalesce(array_length(p_seq, 1), 0);
    prev record;
    bad  bigint;
    at   bigint;
    why  text;
    who  text;
    ok   text[];
    deny text;
BEGIN
    IF p_tenant IS DISTINCT FROM oml.current_tenant() THEN
        RAISE EXCEPTION 'append to tenant % refused: this transaction acts for tenant %', p_tenant, coalesce(oml.current_tenant()::text, '(none)')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'set oml.tenant_id to the tenant appended to (chain.AppendTx does)';
    END IF;
    IF n = 0 THEN
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
       OR array_length(p_payload, 1) IS DISTINCT FROM n OR array_length(p_recorded_at, 1) IS DISTINCT FROM n THEN
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

    PERFORM set_config('oml.journal_checked', 'on', true);
    INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
    SELECT p_tenant, s, p, h, g, p_key_id, t, b, r
      FROM unnest(p_seq, p_prev_hash, p_hash, p_signature, p_event_type, p_payload, p_recorded_at)
           WITH ORDINALITY AS u(s, p, h, g, t, b, r, ord)
     ORDER BY ord;
    PERFORM set_config('oml.journal_checked', '', true);

    UPDATE oml.chain_heads SET seq = p_seq[n], hash = p_hash[n], updated_at = p_recorded_at[n]
     WHERE tenant_id = p_tenant;
    IF NOT FOUND THEN
        INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at)
        VALUES (p_tenant, p_seq[n], p_hash[n], p_recorded_at[n]);
    END IF;
    RETURN n;
END
$$;

------------------------------------------------------------------------------
-- Trigger functions are nobody's to call
------------------------------------------------------------------------------

-- (001's kept PostgreSQL's default EXECUTE to PUBLIC; a trigger function
-- cannot be called directly anyway, and firing a trigger checks no
-- privilege: this only makes the grants matrix say "nothing" for all.)
REVOKE ALL ON FUNCTION oml.journal_refuse_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION oml.outbox_take_xid() FROM PUBLIC;
REVOKE ALL ON FUNCTION oml.outbox_stamp_xid() FROM PUBLIC;
