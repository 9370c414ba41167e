package chainverify

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ForkCheckResult is the fork check's verdict for the tenants that have a
// witnessed head.
type ForkCheckResult struct {
	// Findings holds one tail-lost or fork finding per tenant whose journal
	// disagrees with its newest witness (both heads in the evidence).
	Findings []Finding
	// Witnessed maps each checked tenant to its newest trusted witness.
	Witnessed map[uuid.UUID]*witness.Head
	// Untrusted lists witnesses that were ignored because their signature
	// does not verify under an issued key (evidence of tampering with the
	// witness store; never silently trusted).
	Untrusted []error
}

// Forked reports whether tenant has a tail-lost or fork finding.
func (r *ForkCheckResult) Forked(tenant uuid.UUID) (*Finding, bool) {
	for i := range r.Findings {
		if r.Findings[i].Tenant == tenant {
			return &r.Findings[i], true
		}
	}
	return nil, false
}

// IssuedKeys reads the deployment's issued public keys (oml.signing_keys),
// for checking witness signatures.
func IssuedKeys(ctx context.Context, q Querier) (witness.KeyLookup, error) {
	rows, err := q.Query(ctx, `SELECT key_id, public_key FROM oml.signing_keys`)
	if err != nil {
		return nil, fmt.Errorf("read oml.signing_keys: %w", err)
	}
	defer rows.Close()
	m := map[string]ed25519.PublicKey{}
	for rows.Next() {
		var id string
		var pub []byte
		if err := rows.Scan(&id, &pub); err != nil {
			return nil, fmt.Errorf("read oml.signing_keys: %w", err)
		}
		m[id] = pub
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read oml.signing_keys: %w", err)
	}
	return func(id string) (ed25519.PublicKey, bool) { k, ok := m[id]; return k, ok }, nil
}

// ForkCheck compares the journal with the newest head witnessed in st for
// every tenant (or only one), in the order of the design notes: a journal
// that does not reach the witnessed seq lost its tail (tail-lost); one that
// holds another hash there forked (fork). It is cheap (two index lookups
// per witnessed tenant) and is what a writer runs before building on a
// chain: `oml lake drain` must not materialize a tenant it reports.
func ForkCheck(ctx context.Context, q Querier, st store.Store, only *uuid.UUID) (*ForkCheckResult, error) {
	trusted, err := IssuedKeys(ctx, q)
	if err != nil {
		return nil, err
	}
	newest, bad, err := witness.Newest(ctx, st, only, trusted)
	if err != nil {
		return nil, err
	}
	res := &ForkCheckResult{Witnessed: newest, Untrusted: bad}
	for id, w := range newest {
		f, err := checkAnchorQ(ctx, q, id, "witness", Head{Seq: w.Seq, Hash: w.HashBytes()})
		if err != nil {
			return nil, err
		}
		if f != nil {
			f.Evidence["witness_time"] = w.Time.UTC().Format("2006-01-02T15:04:05.999999Z07:00")
			f.Evidence["witness_system_identifier"] = w.SystemIdentifier
			f.Evidence["witness_timeline"] = w.Timeline
			res.Findings = append(res.Findings, *f)
		}
	}
	sortFindings(res.Findings)
	return res, nil
}
