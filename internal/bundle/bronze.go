package bundle

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// VerifyBronze checks a tenant's bronze.events table — the lake's copy of
// the chain — on its own, with no database: the provider chain from the
// provider tenant's bronze table, then the tenant's, through the same
// verifier as a bundle, and the tenant's signed heads in the lake against
// it. A finding names the data file of the row it is about. Rows repeated
// with the same hash are read once (a duplicate is reconcile's finding, not
// the chain's); two different events at one seq are a fork.
func VerifyBronze(ctx context.Context, lake store.Store, tenant uuid.UUID, opts VerifyOptions) (*Result, error) {
	var provider []bronze.Event
	var err error
	if tenant != chainverify.ProviderTenant {
		if provider, err = bronze.Events(ctx, lake, chainverify.ProviderTenant, 1); err != nil {
			return nil, err
		}
		if len(provider) == 0 {
			return nil, fmt.Errorf("%w: the lake has no bronze.events table for the provider chain (%s): nothing issued the keys", ErrMalformed, bronze.Key(chainverify.ProviderTenant))
		}
	}
	own, err := bronze.Events(ctx, lake, tenant, 1)
	if err != nil {
		return nil, err
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("%w: the lake has no bronze.events rows for tenant %s", ErrMalformed, tenant)
	}
	h := Header{Kind: KindHeader, Format: Format, Version: Version, Tenant: tenant, FromSeq: 1, ExportedAt: time.Now().UTC()}
	var forks []chainverify.Finding
	files := map[[2]string]string{} // (tenant, seq) -> data file
	events := iter.Seq2[*chainverify.Event, error](func(yield func(*chainverify.Event, error) bool) {
		for _, chainRows := range [][]bronze.Event{provider, own} {
			var last *bronze.Event
			for i := range chainRows {
				r := &chainRows[i]
				t, err := uuid.Parse(r.Tenant)
				if err != nil {
					yield(nil, fmt.Errorf("%w: a bronze row of %s names tenant %q", ErrMalformed, r.File, r.Tenant))
					return
				}
				if last != nil && last.Seq == r.Seq {
					if !bytes.Equal(last.Hash, r.Hash) {
						forks = append(forks, chainverify.Finding{Tenant: t, Seq: r.Seq, Reason: chainverify.ReasonFork,
							Detail: fmt.Sprintf("bronze holds two different events at seq %d (%s and %s)", r.Seq, last.File, r.File),
							Evidence: map[string]string{"hash": hex.EncodeToString(last.Hash), "other_hash": hex.EncodeToString(r.Hash),
								"file": last.File, "other_file": r.File}})
					}
					continue
				}
				last = r
				files[[2]string{t.String(), fmt.Sprint(r.Seq)}] = r.File
				if !yield(&chainverify.Event{Tenant: t, Seq: r.Seq, PrevHash: r.PrevHash, Hash: r.Hash, Signature: r.Signature,
					KeyID: r.KeyID, EventType: r.EventType, Payload: r.Payload, RecordedAt: r.RecordedAt}, nil) {
					return
				}
			}
		}
	})
	wls, err := lakeWitnesses(ctx, lake, tenant)
	if err != nil {
		return nil, err
	}
	res, _, err := verifyStream(ctx, h, events, wls, opts)
	if err != nil {
		return nil, err
	}
	res.Findings = append(res.Findings, forks...)
	for i := range res.Findings {
		f := &res.Findings[i]
		if file, ok := files[[2]string{f.Tenant.String(), fmt.Sprint(f.Seq)}]; ok {
			if f.Evidence == nil {
				f.Evidence = map[string]string{}
			}
			f.Evidence["file"] = file
			if !strings.Contains(f.Detail, file) {
				f.Detail += " (bronze row in " + file + ")"
			}
		}
	}
	return res, nil
}

// lakeWitnesses reads every signed head of tenant the lake holds, as
// witness lines (an unreadable one as an empty head, judged invalid).
func lakeWitnesses(ctx context.Context, lake store.Store, tenant uuid.UUID) ([]WitnessLine, error) {
	var out []WitnessLine
	err := eachWitness(ctx, lake, tenant, func(source string, h *witness.Head) error {
		out = append(out, WitnessLine{Kind: KindWitness, Source: source, Head: h})
		return nil
	})
	return out, err
}
