-- 004_trust_boundaries: roles by job with least privilege, and a chain the
-- database itself protects, whoever inserts (docs/security.md is the threat
-- model, docs/schema.md the reference).
--
--   * oml_app        the application: reads its own tenant; appends journal
--                    events only through oml.append_journal (SECURITY
--                    DEFINER); writes the claim fold state and the outbox
--                    rows of its own events; nothing else.
--   * oml_lakewriter the lake writer: reads what it materializes, writes its
--                    own bookkeeping (frontier, lease, attempts), dead
--                    letters, and journals materialize.skipped.
--   * oml_auditor    verify, reconcile, doctor: reads everything, writes
--                    only the verifier's own checkpoints.
--   * the owner      the role that runs the migrations and owns every object.
--
-- The database enforces, for every inserter (owner and superuser included,
-- short of disabling triggers):
--   * a journal insert extends its chain: seq 1 has the all-zero prev_hash
--     (and, except on the provider chain, names an existing tenant); seq n>1
--     has prev_hash = the hash of the journal's own row n-1 and a recorded_at
--     not before it. The primary key refuses a second row at a seq.
--   * oml.chain_heads follows the journal (trigger), and no job role may
--     write it.
--   * an outbox row names a journal event (tenant_id, journal_seq) of its
--     tenant (trigger; the event's tenant exists by the rule above).
--   * an oml.tenants row is backed by its provider-chain event
--     (tenant.created naming it; key.issued at seq 1 for the provider), and
--     an oml.signing_keys row by its key.issued.

------------------------------------------------------------------------------
-- The job roles (cluster-wide, NOLOGIN; operators grant them to logins)
------------------------------------------------------------------------------

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['oml_lakewriter', 'oml_auditor'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN NULL;
                WHEN insufficient_privilege THEN
                    RAISE EXCEPTION 'the role % does not exist and % may not create roles: ask a superuser to run CREATE ROLE % NOLOGIN, then run oml migrate again', r, current_user, r;
            END;
        END IF;
    END LOOP;
END
$$;

GRANT USAGE ON SCHEMA oml TO oml_lakewriter, oml_auditor;
GRANT EXECUTE ON FUNCTION oml.current_tenant() TO oml_lakewriter, oml_auditor;
-- Every command checks the schema version first (schema.RequireCurrent).
GRANT SELECT ON oml.schema_migrations TO oml_app, oml_lakewriter, oml_auditor;

------------------------------------------------------------------------------
-- The chain's shape, enforced on insert
------------------------------------------------------------------------------

-- A row-level AFTER INSERT trigger: it fires once the statement's rows are
-- all in, so each row is checked against the journal itself, the rows of
-- its own statement included (a batch links to its own earlier rows), and
-- only the row with no successor moves the tenant's head: one head update
-- per statement, not per row (updating the head row once per event made a
-- batch of 100 events about a quarter slower). Row-level rather than one
-- statement-level trigger with a transition table: measured at about a
-- third of the cost per append (its queries keep their cached plans).
--
-- Not SECURITY DEFINER, on purpose: it runs with the inserter's rights, and
-- every role that may insert into the journal may also write chain_heads
-- (the owner, and oml.append_journal, which runs as the owner). A role given
-- INSERT on the journal but not UPDATE on chain_heads fails safe. It also
-- spares every journal row a search_path switch.
CREATE FUNCTION oml.journal_extend_chain() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    prev record;
    why  text;
BEGIN
    IF NEW.seq = 1 THEN
        IF NEW.prev_hash <> '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea THEN
            why := 'seq 1 must carry the all-zero prev_hash';
        ELSIF NEW.tenant_id <> '00000000-0000-0000-0000-000000000000'::uuid
              AND NOT EXISTS (SELECT 1 FROM oml.tenants WHERE id = NEW.tenant_id) THEN
            why := 'it opens the chain of a tenant that has no oml.tenants row';
        END IF;
    ELSE
        SELECT hash, recorded_at INTO prev
          FROM oml.journal WHERE tenant_id = NEW.tenant_id AND seq = NEW.seq - 1;
        IF NOT FOUND THEN
            why := format('the chain has no event at seq %s (its head is lower)', NEW.seq - 1);
        ELSIF prev.hash <> NEW.prev_hash THEN
            why := format('its prev_hash is not the hash of seq %s', NEW.seq - 1);
        ELSIF NEW.recorded_at < prev.recorded_at THEN
            why := format('its recorded_at %s is before that of seq %s', NEW.recorded_at, NEW.seq - 1);
        END IF;
    END IF;
    IF why IS NOT NULL THEN
        RAISE EXCEPTION 'journal event seq % of tenant % does not extend its chain: %', NEW.seq, NEW.tenant_id, why
            USING ERRCODE = 'check_violation', CONSTRAINT = 'journal_extends_chain',
                  HINT = 'append through oml (chain.AppendTx), which links each event to the journal''s last one';
    END IF;

    -- The journal's last row is the head.
    IF NOT EXISTS (SELECT 1 FROM oml.journal WHERE tenant_id = NEW.tenant_id AND seq = NEW.seq + 1) THEN
        UPDATE oml.chain_heads SET seq = NEW.seq, hash = NEW.hash, updated_at = NEW.recorded_at
         WHERE tenant_id = NEW.tenant_id;
        IF NOT FOUND THEN
            INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at)
            VALUES (NEW.tenant_id, NEW.seq, NEW.hash, NEW.recorded_at);
        END IF;
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION oml.journal_extend_chain() FROM PUBLIC;

-- oml.append_journal checks its rows itself, set-based and once per
-- append, and says so with the transaction-local setting
-- oml.journal_checked for the length of its INSERT; the WHEN clause (cheap:
-- evaluated without calling the function) then skips the per-row trigger.
-- No job role may insert into the journal directly, so only the owner or a
-- superuser could set it to skip the trigger, and they can disable it
-- anyway.
CREATE TRIGGER journal_extends_chain
    AFTER INSERT ON oml.journal
    FOR EACH ROW
    WHEN (current_setting('oml.journal_checked', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION oml.journal_extend_chain();

-- The application's one way into the journal. It inserts the sealed rows
-- of one tenant, in order, for the tenant the transaction acts for
-- (oml.tenant_id, as set by the append path), after checking, set-based,
-- the same rules as the trigger above: the first row extends the journal's
-- last one, each later row the one before it. Then it moves the head, once.
-- Callers without INSERT on oml.journal (oml_app, oml_lakewriter) append
-- only through here.
CREATE FUNCTION oml.append_journal(
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
BEGIN
    IF p_tenant IS DISTINCT FROM oml.current_tenant() THEN
        RAISE EXCEPTION 'append to tenant % refused: this transaction acts for tenant %', p_tenant, coalesce(oml.current_tenant()::text, '(none)')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'set oml.tenant_id to the tenant appended to (chain.AppendTx does)';
    END IF;
    IF n = 0 THEN
        RETURN 0;
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
REVOKE ALL ON FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION oml.append_journal(uuid, text, bigint[], bytea[], bytea[], bytea[], text[], bytea[], timestamptz[])
    TO oml_app, oml_lakewriter;

------------------------------------------------------------------------------
-- Outbox rows name a journal event of their tenant
------------------------------------------------------------------------------

-- A statement-level trigger rather than a foreign key: one probe of the
-- journal's primary key per row, in one query per INSERT statement, and no
-- row locks on journal rows (a foreign key takes FOR KEY SHARE on every
-- referenced event). Rows already in the outbox are not checked (a
-- database attacked before this migration may hold rows for no event; the
-- lake writer dead-letters those). It runs with the inserter's rights: the
-- application's row-level security lets it insert outbox rows of its own
-- tenant only and shows it exactly that tenant's journal, which is all the
-- check needs; the lake writer and the owner see every tenant.
CREATE FUNCTION oml.outbox_require_event() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.seq, n.tenant_id, n.journal_seq
      INTO bad
      FROM new_rows n
      -- One primary-key probe per row (see journal_extend_chain).
      LEFT JOIN LATERAL (SELECT 1 AS found FROM oml.journal j
                          WHERE j.tenant_id = n.tenant_id AND j.seq = n.journal_seq
                          LIMIT 1) e ON true
     WHERE e.found IS NULL
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox row for tenant % journal seq % refused: the journal has no such event', bad.tenant_id, bad.journal_seq
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'outbox_names_journal_event',
                  HINT = 'outbox rows are written by the append path, with the event they come from';
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION oml.outbox_require_event() FROM PUBLIC;
CREATE TRIGGER outbox_names_journal_event
    AFTER INSERT ON oml.outbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION oml.outbox_require_event();

------------------------------------------------------------------------------
-- Tenants and signing keys are backed by their provider-chain events
------------------------------------------------------------------------------

CREATE FUNCTION oml.tenants_require_event() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ev record;
BEGIN
    SELECT event_type, hash, convert_from(payload, 'UTF8')::jsonb AS body
      INTO ev
      FROM oml.journal
     WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND seq = NEW.provider_seq;
    IF NOT FOUND OR ev.hash <> NEW.provider_hash
       -- (parenthesized: plpgsql ends an IF condition at the first bare THEN)
       OR (CASE WHEN NEW.id = '00000000-0000-0000-0000-000000000000'
                THEN NEW.provider_seq <> 1 OR ev.event_type <> 'key.issued'
                ELSE ev.event_type <> 'tenant.created' OR ev.body->>'tenant_id' IS DISTINCT FROM NEW.id::text
                     OR ev.body->>'name' IS DISTINCT FROM NEW.name
           END) THEN
        RAISE EXCEPTION 'tenant % (%) refused: provider event % is not its tenant.created', NEW.id, NEW.name, NEW.provider_seq
            USING ERRCODE = 'check_violation', CONSTRAINT = 'tenants_backed_by_event',
                  HINT = 'create tenants with oml tenant create';
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION oml.tenants_require_event() FROM PUBLIC;
CREATE TRIGGER tenants_backed_by_event
    BEFORE INSERT OR UPDATE ON oml.tenants
    FOR EACH ROW EXECUTE FUNCTION oml.tenants_require_event();

CREATE FUNCTION oml.signing_keys_require_event() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ev record;
BEGIN
    SELECT event_type, hash, convert_from(payload, 'UTF8')::jsonb AS body
      INTO ev
      FROM oml.journal
     WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND seq = NEW.issued_seq;
    IF NOT FOUND OR ev.hash <> NEW.issued_hash OR ev.event_type <> 'key.issued'
       OR ev.body->>'key_id' IS DISTINCT FROM NEW.key_id
       OR ev.body->>'public_key' IS DISTINCT FROM encode(NEW.public_key, 'base64') THEN
        RAISE EXCEPTION 'signing key % refused: provider event % is not its key.issued', NEW.key_id, NEW.issued_seq
            USING ERRCODE = 'check_violation', CONSTRAINT = 'signing_keys_backed_by_event',
                  HINT = 'keys are issued by journalled key.issued events only';
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION oml.signing_keys_require_event() FROM PUBLIC;
CREATE TRIGGER signing_keys_backed_by_event
    BEFORE INSERT OR UPDATE OF key_id, public_key, issued_seq, issued_hash ON oml.signing_keys
    FOR EACH ROW EXECUTE FUNCTION oml.signing_keys_require_event();

------------------------------------------------------------------------------
-- oml_app: least privilege
------------------------------------------------------------------------------

-- The journal only through oml.append_journal; the head only by trigger;
-- tenants, keys and dead letters are other jobs' (oml tenant create,
-- oml init, the lake writer, oml deadletter reenqueue).
REVOKE INSERT ON oml.journal FROM oml_app;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON oml.chain_heads FROM oml_app;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON oml.tenants FROM oml_app;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON oml.signing_keys FROM oml_app;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON oml.dead_letter FROM oml_app;
-- What stays (from 001): SELECT on its tenant's rows of journal,
-- chain_heads, tenants, claims, claim_bodies, claim_keys, outbox,
-- dead_letter, and every signing key; INSERT, UPDATE on claims; INSERT on
-- claim_bodies and outbox; INSERT, DELETE on claim_keys.

------------------------------------------------------------------------------
-- oml_lakewriter
------------------------------------------------------------------------------

GRANT SELECT ON oml.journal, oml.chain_heads, oml.tenants, oml.signing_keys, oml.claims,
                oml.claim_bodies, oml.claim_keys, oml.outbox, oml.dead_letter,
                oml.chain_checkpoints
    TO oml_lakewriter;
GRANT SELECT, INSERT, UPDATE, DELETE ON oml.lake_frontier, oml.lake_lease, oml.outbox_attempts TO oml_lakewriter;
-- materialize.skipped: its bronze outbox row and its dead letter.
GRANT INSERT ON oml.outbox, oml.dead_letter TO oml_lakewriter;
-- pg_sequence_last_value (the fence) needs SELECT on the sequence.
GRANT SELECT ON SEQUENCE oml.outbox_seq_seq TO oml_lakewriter;

------------------------------------------------------------------------------
-- oml_auditor
------------------------------------------------------------------------------

GRANT SELECT ON ALL TABLES IN SCHEMA oml TO oml_auditor;
-- And every table a later migration adds (made by the same owner).
ALTER DEFAULT PRIVILEGES IN SCHEMA oml GRANT SELECT ON TABLES TO oml_auditor;
GRANT SELECT ON SEQUENCE oml.outbox_seq_seq TO oml_auditor;
-- Its only write: the verifier's own resume points.
GRANT INSERT, UPDATE, DELETE ON oml.chain_checkpoints TO oml_auditor;

------------------------------------------------------------------------------
-- Row-level security for the two roles that see every tenant
------------------------------------------------------------------------------

-- RLS is enabled on these tables (001) with a policy for oml_app only; a
-- role with no policy sees no rows. The lake writer and the auditor work
-- across tenants.
CREATE POLICY all_tenants_read ON oml.journal      FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.chain_heads  FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.tenants      FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.claims       FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.claim_bodies FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.claim_keys   FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.outbox       FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY all_tenants_read ON oml.dead_letter  FOR SELECT TO oml_lakewriter, oml_auditor USING (true);
CREATE POLICY lakewriter_insert ON oml.outbox      FOR INSERT TO oml_lakewriter WITH CHECK (true);
CREATE POLICY lakewriter_insert ON oml.dead_letter FOR INSERT TO oml_lakewriter WITH CHECK (true);
