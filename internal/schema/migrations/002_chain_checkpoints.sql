-- 002_chain_checkpoints: the chain verifier's resume points (owned by
-- internal/chainverify, documented in docs/chain-verify.md).
--
-- One row per tenant: the last head `oml chain verify` fully verified
-- (hash links, signatures, genesis reference, chain_heads agreement,
-- anchors). Written only after the whole range up to it was checked, and
-- only forward, so a re-run verifies only what is new. A checkpoint is also
-- an anchor: a journal that no longer reaches it (tail-lost) or holds
-- another hash at its seq (fork) is a finding.
--
-- Owner only: the application role neither reads nor writes it.

CREATE TABLE oml.chain_checkpoints (
    tenant_id   uuid        PRIMARY KEY,
    seq         bigint      NOT NULL CHECK (seq >= 1),
    hash        bytea       NOT NULL CHECK (length(hash) = 32),
    verified_at timestamptz NOT NULL
);
