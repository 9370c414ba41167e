-- 001_journal: the commit point. The signed per-tenant journal, its chain
-- heads, tenants, signing keys, the claim fold state (with held ciphertext
-- bodies and per-artifact data keys), the outbox the lake writer drains, and
-- the lake writer's own bookkeeping (frontier cache, lease, retry budget,
-- dead letters). Every column is documented in docs/schema.md.
--
-- Runs inside one transaction, under the migrator's advisory lock, as the
-- role that will own every object (the "owner"). Forward-only: never edit
-- this file once released; add 002_... instead (the migrator refuses a
-- changed checksum).

-- The application role. NOLOGIN: operators grant it to a login role
-- (GRANT oml_app TO my_service_login). Roles are cluster-wide, so several
-- databases of one cluster share it; creating it tolerates a concurrent
-- creator in another database.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'oml_app') THEN
        BEGIN
            CREATE ROLE oml_app NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL;
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'the role oml_app does not exist and % may not create roles: ask a superuser to run CREATE ROLE oml_app NOLOGIN, then run oml migrate again', current_user;
        END;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA oml TO oml_app;

-- The tenant the caller acts for, from the transaction-local setting
-- oml.tenant_id (set by the append path with set_config(..., true)). NULL
-- when unset or reset to '' (so RLS then shows nothing, never everything).
CREATE FUNCTION oml.current_tenant() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT NULLIF(current_setting('oml.tenant_id', true), '')::uuid $$;

------------------------------------------------------------------------------
-- Tenants and keys
------------------------------------------------------------------------------

CREATE TABLE oml.tenants (
    id            uuid        PRIMARY KEY,
    name          text        NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL,
    -- The provider-chain event that created the tenant (tenant.created; for
    -- the provider tenant itself, its root key.issued at seq 1).
    provider_seq  bigint      NOT NULL,
    provider_hash bytea       NOT NULL CHECK (length(provider_hash) = 32)
);

CREATE TABLE oml.signing_keys (
    key_id       text        PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{32}$'),
    algorithm    text        NOT NULL DEFAULT 'ed25519' CHECK (algorithm = 'ed25519'),
    public_key   bytea       NOT NULL UNIQUE CHECK (length(public_key) = 32),
    issued_seq   bigint      NOT NULL,  -- provider-chain key.issued event
    issued_hash  bytea       NOT NULL CHECK (length(issued_hash) = 32),
    issued_at    timestamptz NOT NULL,
    revoked_at   timestamptz,
    revoked_seq  bigint
);

------------------------------------------------------------------------------
-- The journal: append-only, per-tenant hash chain
------------------------------------------------------------------------------

CREATE TABLE oml.journal (
    tenant_id   uuid        NOT NULL,
    seq         bigint      NOT NULL CHECK (seq >= 1),
    prev_hash   bytea       NOT NULL CHECK (length(prev_hash) = 32),
    hash        bytea       NOT NULL CHECK (length(hash) = 32),
    signature   bytea       NOT NULL CHECK (length(signature) = 64),
    key_id      text        NOT NULL,
    event_type  text        NOT NULL,
    payload     bytea       NOT NULL,   -- the exact signed bytes (UTF-8 JSON)
    recorded_at timestamptz NOT NULL,
    -- The last defence against a forked chain: two writers that read the
    -- same head both try to insert the same seq, and one fails here.
    PRIMARY KEY (tenant_id, seq)
);

-- Refuse every UPDATE, DELETE and TRUNCATE, whoever asks (the owner and
-- superusers included). Only a superuser or the owner disabling the trigger
-- can get past it, and oml chain verify detects what they change.
CREATE FUNCTION oml.journal_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'oml.journal is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'journal events are never edited or removed; append a new event instead';
END
$$;

CREATE TRIGGER journal_append_only_row
    BEFORE UPDATE OR DELETE ON oml.journal
    FOR EACH ROW EXECUTE FUNCTION oml.journal_refuse_change();
CREATE TRIGGER journal_append_only_truncate
    BEFORE TRUNCATE ON oml.journal
    FOR EACH STATEMENT EXECUTE FUNCTION oml.journal_refuse_change();

CREATE TABLE oml.chain_heads (
    tenant_id  uuid        PRIMARY KEY,
    seq        bigint      NOT NULL CHECK (seq >= 1),
    hash       bytea       NOT NULL CHECK (length(hash) = 32),
    -- recorded_at of the head event (the append path keeps recorded_at
    -- non-decreasing along a chain by clamping to this value).
    updated_at timestamptz NOT NULL
);

------------------------------------------------------------------------------
-- Claim fold state, held bodies, data keys
------------------------------------------------------------------------------

CREATE TABLE oml.claims (
    tenant_id         uuid        NOT NULL,
    artifact_id       text        NOT NULL,
    version           integer     NOT NULL CHECK (version >= 1),
    workarea_id       text        NOT NULL,
    writer            text        NOT NULL,
    principal         text        NOT NULL,
    provenance        text        NOT NULL,
    plaintext_digest  bytea       NOT NULL CHECK (length(plaintext_digest) = 32),
    ciphertext_digest bytea       NOT NULL CHECK (length(ciphertext_digest) = 32),
    state             text        NOT NULL CHECK (state IN
                          ('held', 'promoted', 'demoted', 'erased', 'simulation_ended', 'reassigned')),
    submitted_seq     bigint      NOT NULL,
    submitted_at      timestamptz NOT NULL,
    promoted_by       text,
    promoted_seq      bigint,      -- non-NULL once ever promoted (a silver row exists)
    promoted_at       timestamptz,
    updated_at        timestamptz NOT NULL,
    last_seq          bigint      NOT NULL,  -- journal seq of the last change
    PRIMARY KEY (tenant_id, artifact_id, version)
);

-- Ciphertext bodies (AES-256-GCM under the artifact's data key, made by the
-- workload). Held until promoted; the lake writer copies a promoted body
-- into silver.claims. Never plaintext.
CREATE TABLE oml.claim_bodies (
    tenant_id   uuid    NOT NULL,
    artifact_id text    NOT NULL,
    version     integer NOT NULL,
    ciphertext  bytea   NOT NULL,
    PRIMARY KEY (tenant_id, artifact_id, version)
);

-- Per-artifact data-encryption keys. claim.erased deletes the row in the
-- same transaction (crypto-shredding): every copy of the ciphertext, in
-- PostgreSQL or the lake, becomes unreadable, while the chain still verifies.
CREATE TABLE oml.claim_keys (
    tenant_id   uuid        NOT NULL,
    artifact_id text        NOT NULL,
    dek         bytea       NOT NULL CHECK (length(dek) = 32),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, artifact_id)
);

------------------------------------------------------------------------------
-- The outbox
------------------------------------------------------------------------------

CREATE TABLE oml.outbox (
    -- CACHE 1: seqs are handed out in draw order across sessions, which the
    -- stable-prefix rule below relies on.
    seq         bigint      GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    -- The inserting transaction's id, always set by outbox_stamp_xid (a
    -- caller cannot choose it).
    xid         xid8        NOT NULL,
    tenant_id   uuid        NOT NULL,
    journal_seq bigint      NOT NULL,
    target      text        NOT NULL CHECK (target IN ('bronze.events', 'silver.claims', 'gold.lineage')),
    op          text        NOT NULL CHECK (op IN ('append', 'materialize', 'retract')),
    artifact_id text,
    version     integer,
    payload     jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((target = 'bronze.events') = (op = 'append')),
    CHECK (target <> 'silver.claims' OR (artifact_id IS NOT NULL AND version IS NOT NULL))
);
CREATE INDEX outbox_xid_seq ON oml.outbox (xid, seq);

-- The outbox xid rule: every outbox row's transaction owns its xid BEFORE
-- the row draws its seq. Then "xid < snapshot xmin" (the stable prefix)
-- implies that no smaller seq can still be in flight in a younger
-- transaction. The identity default is evaluated while the row is being
-- built, before any BEFORE ROW trigger, and a transaction gets its xid only
-- at its first write, so without this a transaction could draw seq 7 and
-- only then become xid 754, after another transaction (xid 753) had drawn
-- and committed seq 8. A BEFORE ... FOR EACH STATEMENT trigger fires before
-- the statement produces its first row, so forcing the xid there orders it
-- ahead of every seq the statement draws.
CREATE FUNCTION oml.outbox_take_xid() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id();   -- assigns the xid if not yet assigned
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_take_xid
    BEFORE INSERT ON oml.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION oml.outbox_take_xid();

CREATE FUNCTION oml.outbox_stamp_xid() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.xid := pg_current_xact_id();
    RETURN NEW;
END
$$;
CREATE TRIGGER outbox_stamp_xid
    BEFORE INSERT ON oml.outbox
    FOR EACH ROW EXECUTE FUNCTION oml.outbox_stamp_xid();

------------------------------------------------------------------------------
-- Lake writer bookkeeping (owner only; the app role has no access)
------------------------------------------------------------------------------

-- The frontier cache: one row. The Delta log's txn versions are the
-- recovery authority; this is for cheap restarts and lag metrics.
CREATE TABLE oml.lake_frontier (
    id                boolean     PRIMARY KEY DEFAULT true CHECK (id),
    frontier          bigint      NOT NULL DEFAULT 0,  -- last applied outbox seq
    batch_start       bigint,                          -- bounds of the last batch (start, end]
    batch_end         bigint,
    horizon_xid       xid8,                            -- snapshot xmin used for the last cut
    system_identifier text,                            -- pg_control_system() at the last cut
    timeline          text,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
INSERT INTO oml.lake_frontier (id) VALUES (true);

CREATE TABLE oml.lake_lease (
    name         text        PRIMARY KEY DEFAULT 'oml-lakewriter',
    holder       text        NOT NULL,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    acquired_at  timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- Retry budget per outbox row, so a restart does not reset it.
CREATE TABLE oml.outbox_attempts (
    outbox_seq      bigint      PRIMARY KEY,
    attempts        integer     NOT NULL DEFAULT 0,
    first_failed_at timestamptz NOT NULL DEFAULT now(),
    last_failed_at  timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT ''
);

CREATE TABLE oml.dead_letter (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_seq       bigint      NOT NULL UNIQUE,
    tenant_id        uuid        NOT NULL,
    journal_seq      bigint      NOT NULL,   -- the event whose outbox row failed
    target           text        NOT NULL,
    op               text        NOT NULL,
    artifact_id      text,
    version          integer,
    payload          jsonb       NOT NULL,   -- the original outbox payload
    attempts         integer     NOT NULL,
    first_failed_at  timestamptz NOT NULL,
    last_failed_at   timestamptz NOT NULL,
    error            text        NOT NULL,
    skipped_seq      bigint      NOT NULL,   -- journal seq of materialize.skipped
    reenqueued_at    timestamptz,
    reenqueued_seq   bigint,                 -- journal seq of deadletter.reenqueued
    new_outbox_seq   bigint,
    reenqueued_by    text,
    reenqueue_reason text
);
CREATE INDEX dead_letter_open ON oml.dead_letter (id) WHERE reenqueued_at IS NULL;

------------------------------------------------------------------------------
-- The application role: privileges and row-level security
------------------------------------------------------------------------------

-- The journal: read and append only. UPDATE/DELETE/TRUNCATE are not
-- granted (and explicitly revoked, in case a default privilege granted them).
GRANT SELECT, INSERT ON oml.journal TO oml_app;
REVOKE UPDATE, DELETE, TRUNCATE ON oml.journal FROM oml_app;
GRANT SELECT, INSERT, UPDATE ON oml.chain_heads TO oml_app;
GRANT SELECT, INSERT ON oml.tenants TO oml_app;
GRANT SELECT, INSERT ON oml.signing_keys TO oml_app;
GRANT SELECT, INSERT, UPDATE ON oml.claims TO oml_app;
GRANT SELECT, INSERT ON oml.claim_bodies TO oml_app;
GRANT SELECT, INSERT, DELETE ON oml.claim_keys TO oml_app;
GRANT SELECT, INSERT ON oml.outbox TO oml_app;
GRANT SELECT, INSERT, UPDATE ON oml.dead_letter TO oml_app;
GRANT EXECUTE ON FUNCTION oml.current_tenant() TO oml_app;

-- RLS applies to oml_app only: the owner (migrations, lake writer, verifier,
-- operator commands) is not subject to it, because PostgreSQL exempts a
-- table's owner unless FORCE ROW LEVEL SECURITY is set, which it is not.
ALTER TABLE oml.journal      ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.chain_heads  ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.tenants      ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.claims       ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.claim_bodies ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.claim_keys   ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.outbox       ENABLE ROW LEVEL SECURITY;
ALTER TABLE oml.dead_letter  ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_scope ON oml.journal      TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
CREATE POLICY tenant_scope ON oml.chain_heads  TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
-- A tenant row is inserted by the provider chain's tenant.created, so the
-- provider context may insert any tenant; otherwise a tenant sees itself.
CREATE POLICY tenant_scope ON oml.tenants      TO oml_app
    USING (id = oml.current_tenant()
           OR oml.current_tenant() = '00000000-0000-0000-0000-000000000000')
    WITH CHECK (id = oml.current_tenant()
           OR oml.current_tenant() = '00000000-0000-0000-0000-000000000000');
CREATE POLICY tenant_scope ON oml.claims       TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
CREATE POLICY tenant_scope ON oml.claim_bodies TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
CREATE POLICY tenant_scope ON oml.claim_keys   TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
CREATE POLICY tenant_scope ON oml.outbox       TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
CREATE POLICY tenant_scope ON oml.dead_letter  TO oml_app
    USING (tenant_id = oml.current_tenant()) WITH CHECK (tenant_id = oml.current_tenant());
