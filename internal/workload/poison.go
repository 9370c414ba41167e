package workload

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/outbox"
)

// Poison kinds.
const (
	PoisonDigestMismatch = "digest-mismatch"
	PoisonMissingBody    = "missing-body"
	PoisonBadPayload     = "bad-payload"
)

// PlantPoison corrupts n outbox rows the lake writer has not applied yet,
// cycling through the kinds: a held body whose bytes no longer match the
// journalled digest, a missing held body, and an undecodable retract
// payload. It picks materialize rows whose claim is never retracted (so one
// planted row is one dead letter, not a cascade) and needs the owner role
// (it writes behind the application's back). Fewer than n rows are planted
// when there are not enough candidates.
func PlantPoison(ctx context.Context, pool *pgxpool.Pool, n int, seed uint64) ([]Poison, error) {
	fr, err := outbox.ReadFrontier(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	frontier := fr.Seq
	type cand struct {
		seq      int64
		tenant   uuid.UUID
		artifact string
		version  int
	}
	load := func(sql string) ([]cand, error) {
		rows, err := pool.Query(ctx, sql, frontier)
		if err != nil {
			return nil, fmt.Errorf("workload: find poison candidates: %w", err)
		}
		defer rows.Close()
		var out []cand
		for rows.Next() {
			var c cand
			if err := rows.Scan(&c.seq, &c.tenant, &c.artifact, &c.version); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, rows.Err()
	}
	mats, err := load(`
SELECT o.seq, o.tenant_id, o.artifact_id, o.version FROM oml.outbox o
WHERE o.op = 'materialize' AND o.seq > $1
  AND NOT EXISTS (SELECT 1 FROM oml.outbox r WHERE r.op = 'retract' AND r.tenant_id = o.tenant_id
                  AND r.artifact_id = o.artifact_id AND r.version = o.version)
ORDER BY o.seq`)
	if err != nil {
		return nil, err
	}
	rets, err := load(`
SELECT o.seq, o.tenant_id, o.artifact_id, o.version FROM oml.outbox o
WHERE o.op = 'retract' AND o.seq > $1 ORDER BY o.seq`)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x706f69736f6e))
	rng.Shuffle(len(mats), func(i, j int) { mats[i], mats[j] = mats[j], mats[i] })
	rng.Shuffle(len(rets), func(i, j int) { rets[i], rets[j] = rets[j], rets[i] })

	var out []Poison
	for i := 0; i < n; i++ {
		kind := []string{PoisonDigestMismatch, PoisonMissingBody, PoisonBadPayload}[i%3]
		if kind == PoisonBadPayload && len(rets) == 0 {
			kind = PoisonDigestMismatch
		}
		var c cand
		switch {
		case kind == PoisonBadPayload:
			c, rets = rets[0], rets[1:]
		case len(mats) > 0:
			c, mats = mats[0], mats[1:]
		default:
			return out, nil
		}
		p := Poison{Kind: kind, Tenant: c.tenant, OutboxSeq: c.seq, ArtifactID: c.artifact, Version: c.version}
		var err error
		switch kind {
		case PoisonDigestMismatch:
			err = pool.QueryRow(ctx, `
WITH old AS (SELECT ciphertext FROM oml.claim_bodies WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3)
UPDATE oml.claim_bodies b SET ciphertext = b.ciphertext || '\x00'::bytea
FROM old WHERE b.tenant_id = $1 AND b.artifact_id = $2 AND b.version = $3
RETURNING old.ciphertext`, c.tenant, c.artifact, c.version).Scan(&p.Body)
		case PoisonMissingBody:
			err = pool.QueryRow(ctx, `DELETE FROM oml.claim_bodies WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3
RETURNING ciphertext`, c.tenant, c.artifact, c.version).Scan(&p.Body)
		case PoisonBadPayload:
			err = pool.QueryRow(ctx, `
WITH old AS (SELECT payload FROM oml.outbox WHERE seq = $1)
UPDATE oml.outbox o SET payload = '{"state": 17}'::jsonb FROM old WHERE o.seq = $1
RETURNING old.payload::text`, c.seq).Scan(&p.Payload)
		}
		if err != nil {
			return out, fmt.Errorf("workload: plant %s poison on outbox row %d: %w", kind, c.seq, err)
		}
		out = append(out, p)
	}
	return out, nil
}
