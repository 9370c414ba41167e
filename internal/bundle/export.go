package bundle

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// ExportOptions say what to put in a bundle.
type ExportOptions struct {
	Tenant     uuid.UUID
	TenantName string
	// From is the first tenant event (0 or 1: from the genesis).
	From int64
	// Lake, when set, supplies the tenant's witnessed heads.
	Lake store.Store
	// Signer, when set, signs the exported head (source "export"), so the
	// bundle carries a signed statement of where the chain stood.
	Signer witness.Signer
	Now    func() time.Time
}

// ErrNoSuchEvent means --from names a seq the chain does not have.
var ErrNoSuchEvent = errors.New("no such event")

// Export writes a bundle of one tenant's chain to w, from one consistent
// snapshot of the journal.
func Export(ctx context.Context, pool *pgxpool.Pool, w io.Writer, opts ExportOptions) (Trailer, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	from := max(opts.From, 1)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Trailer{}, fmt.Errorf("open a snapshot of the journal: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only

	h := Header{Tenant: opts.Tenant, TenantName: opts.TenantName, FromSeq: from, ExportedAt: now()}
	if err := tx.QueryRow(ctx, `SELECT key_id FROM oml.journal WHERE tenant_id = $1 AND seq = 1`, chainverify.ProviderTenant).Scan(&h.RootKeyID); err != nil {
		return Trailer{}, fmt.Errorf("read the provider chain's root key.issued (is the deployment initialised?): %w", err)
	}
	var head int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM oml.journal WHERE tenant_id = $1`, opts.Tenant).Scan(&head); err != nil {
		return Trailer{}, fmt.Errorf("read the chain of tenant %s: %w", opts.Tenant, err)
	}
	if head == 0 {
		return Trailer{}, fmt.Errorf("%w: tenant %s has no chain", ErrNoSuchEvent, opts.Tenant)
	}
	if from > head {
		return Trailer{}, fmt.Errorf("%w: --from %d is past the chain's head (seq %d)", ErrNoSuchEvent, from, head)
	}
	if from > 1 {
		hash, err := journal.EventHash(ctx, tx, opts.Tenant, from-1)
		if err != nil {
			return Trailer{}, fmt.Errorf("read the anchor event %d of tenant %s: %w", from-1, opts.Tenant, err)
		}
		h.Anchor = &Anchor{Seq: from - 1, Hash: hex.EncodeToString(hash)}
	}

	bw, err := NewWriter(w, h)
	if err != nil {
		return Trailer{}, err
	}
	if opts.Tenant != chainverify.ProviderTenant {
		for ev, err := range chainverify.Chain(ctx, tx, chainverify.ProviderTenant, 0) {
			if err != nil {
				return Trailer{}, err
			}
			if err := bw.Event(ev); err != nil {
				return Trailer{}, err
			}
		}
	}
	var last *chainverify.Event
	for ev, err := range chainverify.Chain(ctx, tx, opts.Tenant, from-1) {
		if err != nil {
			return Trailer{}, err
		}
		if err := bw.Event(ev); err != nil {
			return Trailer{}, err
		}
		c := *ev
		c.Hash = append([]byte(nil), ev.Hash...)
		last = &c
	}
	if opts.Lake != nil {
		if err := witnesses(ctx, opts.Lake, opts.Tenant, bw); err != nil {
			return Trailer{}, err
		}
	}
	if opts.Signer != nil && last != nil {
		sys, tl, err := witness.Identity(ctx, tx)
		if err != nil {
			return Trailer{}, err
		}
		sh := &witness.Head{Version: 1, Tenant: opts.Tenant, Seq: last.Seq, Hash: hex.EncodeToString(last.Hash), Time: now().UTC(),
			SystemIdentifier: sys, Timeline: tl}
		if err := sh.Sign(opts.Signer); err != nil {
			return Trailer{}, fmt.Errorf("sign the exported head: %w", err)
		}
		if err := bw.Witness("export", sh); err != nil {
			return Trailer{}, err
		}
	}
	return bw.Close()
}

// witnesses copies every signed head of tenant from the lake, as stored
// (the verifier judges each; an unreadable one is copied as an empty head so
// the verdict says so rather than the export hiding it).
func witnesses(ctx context.Context, st store.Store, tenant uuid.UUID, bw *Writer) error {
	return eachWitness(ctx, st, tenant, bw.Witness)
}

// eachWitness calls fn for every signed head of tenant in the lake, in key
// (seq) order.
func eachWitness(ctx context.Context, st store.Store, tenant uuid.UUID, fn func(source string, h *witness.Head) error) error {
	prefix := witness.Prefix + tenant.String() + "/"
	after := ""
	for {
		infos, err := st.List(ctx, prefix, after)
		if err != nil {
			return fmt.Errorf("list the witnessed heads of tenant %s in %s: %w", tenant, st, err)
		}
		if len(infos) == 0 {
			return nil
		}
		for _, info := range infos {
			file := strings.TrimPrefix(info.Key, prefix)
			if !strings.HasSuffix(file, ".json") {
				continue
			}
			if _, err := strconv.ParseInt(strings.TrimSuffix(file, ".json"), 10, 64); err != nil {
				continue
			}
			h, err := witness.Read(ctx, st, info.Key)
			if err != nil || h == nil {
				if err := fn("lake (unreadable: "+info.Key+")", &witness.Head{Tenant: tenant}); err != nil {
					return err
				}
				continue
			}
			if err := fn("lake", h); err != nil {
				return err
			}
		}
		after = infos[len(infos)-1].Key
	}
}
