package keyring

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
)

// Key is one issued signing key.
type Key struct {
	KeyID      string     `json:"key_id"`
	Role       string     `json:"role"`
	PublicKey  string     `json:"public_key"` // standard base64
	IssuedSeq  int64      `json:"issued_seq"` // provider-chain key.issued
	IssuedAt   time.Time  `json:"issued_at"`
	RevokedSeq *int64     `json:"revoked_seq"` // provider-chain key.revoked
	RevokedAt  *time.Time `json:"revoked_at"`
	// LastUsedAt is when the key last signed an event (any chain).
	LastUsedAt *time.Time `json:"last_used_at"`
}

// ErrRefused wraps a rotation or revocation the journal fold refused.
var ErrRefused = errors.New("refused")

// List returns every key the provider chain issued, in issuance order.
func List(ctx context.Context, pool *pgxpool.Pool) ([]Key, error) {
	rows, err := pool.Query(ctx, `
SELECT k.key_id, coalesce(convert_from(j.payload, 'UTF8')::jsonb->>'role', ''), k.public_key, k.issued_seq, k.issued_at,
       k.revoked_seq, k.revoked_at,
       (SELECT max(recorded_at) FROM oml.journal u WHERE u.key_id = k.key_id)
  FROM oml.signing_keys k
  LEFT JOIN oml.journal j ON j.tenant_id = $1 AND j.seq = k.issued_seq
 ORDER BY k.issued_seq`, chain.ProviderTenant)
	if err != nil {
		return nil, fmt.Errorf("list the signing keys: %w", err)
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		var k Key
		var pub []byte
		if err := rows.Scan(&k.KeyID, &k.Role, &pub, &k.IssuedSeq, &k.IssuedAt, &k.RevokedSeq, &k.RevokedAt, &k.LastUsedAt); err != nil {
			return nil, fmt.Errorf("list the signing keys: %w", err)
		}
		k.PublicKey = base64.StdEncoding.EncodeToString(pub)
		out = append(out, k)
	}
	return out, rows.Err()
}

// RoleRotated is the role of a key issued by Rotate.
const RoleRotated = "rotated"

// Rotate issues next on the provider chain, signed by current, and returns
// the key.issued event's provider seq.
func Rotate(ctx context.Context, pool *pgxpool.Pool, current chain.Signer, next *keys.Key) (int64, error) {
	if next.KeyID() == current.KeyID() {
		return 0, fmt.Errorf("%w: the new key is the key that signs: generate a new one (oml key generate --out FILE)", ErrRefused)
	}
	ev, err := journal.New(journal.KeyIssued{KeyID: next.KeyID(), Algorithm: "ed25519",
		PublicKey: base64.StdEncoding.EncodeToString(next.Public()), Role: RoleRotated})
	if err != nil {
		return 0, err
	}
	recs, err := chain.Append(ctx, pool, current, chain.ProviderTenant, ev)
	if err != nil {
		return 0, refused(err, "issue key %s", next.KeyID())
	}
	return int64(recs[0].Seq), nil
}

// RevokeResult is what Revoke journalled.
type RevokeResult struct {
	KeyID       string `json:"key_id"`
	ProviderSeq int64  `json:"provider_seq"`
	Chains      int    `json:"chains"` // heads recorded
	SignedBy    string `json:"signed_by"`
}

// Revoke journals key.revoked for keyID, signed by signer (another key
// that is still valid), with every tenant chain's head read under the
// provider chain's lock in the same transaction.
func Revoke(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, keyID, by, reason string) (RevokeResult, error) {
	res := RevokeResult{KeyID: keyID, SignedBy: signer.KeyID()}
	if keyID == signer.KeyID() {
		return res, fmt.Errorf("%w: key %s cannot revoke itself: sign the revocation with another issued key (rotate first, then point --signing-key at the new key)", ErrRefused, keyID)
	}
	return chain.InTx(ctx, pool, func(tx pgx.Tx) (RevokeResult, error) {
		if err := chain.Lock(ctx, tx, chain.ProviderTenant); err != nil {
			return res, err
		}
		rows, err := tx.Query(ctx, `SELECT tenant_id, seq, hash FROM oml.chain_heads WHERE tenant_id <> $1 ORDER BY tenant_id`, chain.ProviderTenant)
		if err != nil {
			return res, fmt.Errorf("read the chain heads: %w", err)
		}
		var heads []journal.RevokedHead
		for rows.Next() {
			var t uuid.UUID
			var seq int64
			var hash []byte
			if err := rows.Scan(&t, &seq, &hash); err != nil {
				rows.Close()
				return res, fmt.Errorf("read the chain heads: %w", err)
			}
			heads = append(heads, journal.RevokedHead{TenantID: t.String(), Seq: seq, Hash: hex.EncodeToString(hash)})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("read the chain heads: %w", err)
		}
		if heads == nil {
			heads = []journal.RevokedHead{}
		}
		ev, err := journal.New(journal.KeyRevoked{KeyID: keyID, By: by, Reason: reason, Heads: heads})
		if err != nil {
			return res, err
		}
		recs, err := chain.AppendTx(ctx, tx, signer, chain.ProviderTenant, ev)
		if err != nil {
			return res, refused(err, "revoke key %s", keyID)
		}
		res.ProviderSeq, res.Chains = int64(recs[0].Seq), len(heads)
		return res, nil
	})
}

func refused(err error, what string, args ...any) error {
	if errors.Is(err, journal.ErrRejected) {
		return fmt.Errorf("%w: %s: %v", ErrRefused, fmt.Sprintf(what, args...), err)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(what, args...), err)
}
