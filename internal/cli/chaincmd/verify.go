package chaincmd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// VerifyOptions are `oml chain verify`'s flags and what its run functions
// need, as functions (NewCmdVerify fills them from the Factory; a test
// replaces them).
type VerifyOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// LakeURL is --lake or OML_LAKE_URL (--bronze names a table under it).
	LakeURL func() string
	// Verify opens the database (and the lake, when one is configured) and
	// verifies the journal as the flags say (verifyDB), feeding p's
	// progress bar. Its errors are the command's.
	Verify func(ctx context.Context, opts *VerifyOptions, p verifyProgress) (*dbVerify, error)

	Tenant          string
	From            int64
	FromHash        string
	Full            bool
	SinceCheckpoint bool
	Strict          bool
	NoCheckpoint    bool
	RootKeyID       string
	// Bundle verifies an exported bundle file instead of the database.
	Bundle string
	// Bronze verifies a tenant's bronze.events table instead of the database.
	Bronze string
}

// NewCmdVerify builds `oml chain verify`. runF replaces the run function in
// tests of flag parsing.
func NewCmdVerify(f *cliutil.Factory, runF func(context.Context, *VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: f.IO, Format: f.Format, LakeURL: f.LakeURL,
		Verify: func(ctx context.Context, o *VerifyOptions, p verifyProgress) (*dbVerify, error) {
			return verifyDB(ctx, f, o, p)
		}}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Verify every chain end to end and report the first bad event of each broken one",
		Long: `Verify the journal from its stored rows alone.

For every chain (the provider chain and every tenant's), in seq order:
recompute each event's payload digest, envelope and hash; check seq runs
without gaps from the genesis and prev_hash links to the previous event;
verify the ed25519 signature against a key the provider chain issued; check
each tenant's genesis references the provider tenant.created that created it
(by seq and hash); and check oml.chain_heads agrees with the last event.
Stored checkpoints and the heads witnessed in the lake (when --lake is set)
are compared with the journal: a journal that no longer reaches one lost its
tail (tail-lost), one holding another hash there forked (fork). A witness
that cannot be trusted (garbage, a bad signature, a key the verified
provider chain never issued) is itself a finding (bad-witness); older valid
witnesses are still compared.

Each broken chain is reported once, at its first bad event, with one of the
reasons: hash-mismatch, broken-link, seq-gap, bad-signature, unknown-key,
bad-genesis, bad-payload, head-mismatch, tail-lost, fork, bad-witness.

By default every chain is verified from its genesis, so an event edited
after an earlier clean run is found. A clean chain's verified head is stored
as a checkpoint (oml.chain_checkpoints); --since-checkpoint is the fast path
that resumes each chain after its checkpoint and reads only what is new (it
cannot see an edit below a checkpoint: oml doctor's scrub and a plain verify
can). A finding moves a checkpoint at or above it back below it, so every
later run, --since-checkpoint and oml doctor included, finds it again until
the chain is repaired. --full is accepted for compatibility and does nothing
(verifying everything is the default).
--from SEQ --from-hash HEX resumes one tenant from a head you trust (one you
wrote down); --from SEQ alone takes the hash from the head witnessed at that
seq in the lake (oml chain head shows witnessed seqs). Signatures are checked on every core;
by default in batches under the cofactored rule, --strict one by one with
crypto/ed25519 (see docs/chain-verify.md, "Signatures oml accepts").

Exit status: 0 every chain verified; 1 findings; 2 usage or connection error.`,
		Example: `  oml chain verify
  oml chain verify --tenant acme -o json
  oml chain verify --since-checkpoint
  oml chain verify --tenant acme --from 1200 --from-hash 3b1f...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.From < 0 {
				return cliutil.FlagErrorf("--from must be a seq of 1 or more")
			}
			if opts.From > 0 && opts.Tenant == "" {
				return cliutil.FlagErrorf("--from needs --tenant: a trusted head belongs to one chain")
			}
			if opts.FromHash != "" && opts.From == 0 {
				return cliutil.FlagErrorf("--from-hash needs --from SEQ")
			}
			if opts.FromHash != "" {
				if b, err := hex.DecodeString(opts.FromHash); err != nil || len(b) != 32 {
					return cliutil.FlagErrorf("--from-hash must be 64 hex characters (a SHA-256 event hash)")
				}
			}
			if opts.Bronze != "" {
				if opts.Bundle != "" || opts.Tenant != "" || opts.From > 0 || opts.NoCheckpoint {
					return cliutil.FlagErrorf("--bronze verifies the table alone: drop --bundle, --tenant, --from and --no-checkpoint")
				}
				if runF != nil {
					return runF(cmd.Context(), opts)
				}
				return verifyBronzeRun(cmd.Context(), opts)
			}
			if opts.Bundle != "" {
				if opts.Tenant != "" || opts.From > 0 || opts.NoCheckpoint || opts.SinceCheckpoint {
					return cliutil.FlagErrorf("--bundle verifies the file alone: drop --tenant, --from, --since-checkpoint and --no-checkpoint")
				}
				if runF != nil {
					return runF(cmd.Context(), opts)
				}
				return verifyBundleRun(cmd.Context(), opts)
			}
			if opts.From > 0 && opts.SinceCheckpoint {
				return cliutil.FlagErrorf("--from and --since-checkpoint contradict each other: pick one")
			}
			if opts.Strict && opts.SinceCheckpoint {
				return cliutil.FlagErrorf("--strict verifies every chain from its genesis; it cannot be combined with --since-checkpoint")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return verifyRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Tenant, "tenant", "", "verify only this tenant (name or id; the provider chain is always verified)")
	fl.Int64Var(&opts.From, "from", 0, "with --tenant: resume after this trusted seq instead of the genesis or the checkpoint")
	fl.StringVar(&opts.FromHash, "from-hash", "", "the trusted hash of the --from event (64 hex characters)")
	fl.BoolVar(&opts.SinceCheckpoint, "since-checkpoint", false, "fast path: resume each chain after its stored checkpoint and verify only what is new")
	fl.BoolVar(&opts.Full, "full", false, "no-op, kept for compatibility: every chain is verified from its genesis by default")
	fl.BoolVar(&opts.Strict, "strict", false, "verify each signature alone with crypto/ed25519 (slower; always from every genesis)")
	fl.BoolVar(&opts.NoCheckpoint, "no-checkpoint", false, "do not store verified heads in oml.chain_checkpoints")
	fl.StringVar(&opts.RootKeyID, "root-key-id", "", "the deployment root key id to trust (refuses a provider chain rooted in another key)")
	fl.StringVar(&opts.Bundle, "bundle", "", "verify this bundle file (from oml chain export) with no database and no lake")
	fl.StringVar(&opts.Bronze, "bronze", "", "verify a tenant's bronze.events table on its own, with no database (a URL ending in TENANT_ID/bronze/events, or TENANT_ID/bronze/events under --lake)")
	return cmd
}

// verifyJSON is the -o json document.
type verifyJSON struct {
	OK             bool                  `json:"ok"`
	Chains         []chainJSON           `json:"chains"`
	Findings       []chainverify.Finding `json:"findings"`
	Events         int64                 `json:"events"`
	Resumed        int                   `json:"resumed"`
	ElapsedSeconds float64               `json:"elapsed_seconds"`
	SignatureRule  string                `json:"signature_rule"`
	Checkpoints    int                   `json:"checkpoints_stored"`
	Invalidated    int                   `json:"checkpoints_invalidated"`
	Witnesses      witnessCheckJSON      `json:"witnesses"`
	// AcceptedForks lists the forks and lost tails a chain.fork_accepted
	// accepted: listed for ever, never failing.
	AcceptedForks []chainverify.AcceptedFinding `json:"accepted_forks"`
}

type chainJSON struct {
	chainverify.ChainReport
	Name string `json:"name"`
}

type witnessCheckJSON struct {
	Checked  bool     `json:"checked"`
	Tenants  int      `json:"tenants"`
	Bronze   int      `json:"bronze_tables"`
	Problems []string `json:"problems"`
}

// verifyProgress is the progress bar's side of a verification: the
// counter and the plan hook VerifyDB feeds (onPlan nil off a terminal),
// and start, called just before the journal is read, which draws the bar
// until the stop it returns is called.
type verifyProgress struct {
	progress *chainverify.Progress
	onPlan   func(int64)
	start    func() (stop func())
}

// dbVerify is what `oml chain verify` reports: the journal's verification
// (with the invalid-witness findings merged in), the tenants' names, the
// witness check and the accepted forks.
type dbVerify struct {
	rep           chainverify.Report
	names         map[uuid.UUID]string
	wj            witnessCheckJSON
	acceptedForks []chainverify.AcceptedFinding
}

// verifyDB is VerifyOptions.Verify over the Factory's database and lake.
func verifyDB(ctx context.Context, f *cliutil.Factory, opts *VerifyOptions, p verifyProgress) (*dbVerify, error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, err
	}
	dbo := chainverify.DBOptions{
		SinceCheckpoint: opts.SinceCheckpoint, Strict: opts.Strict, NoCheckpoint: opts.NoCheckpoint, RootKeyID: opts.RootKeyID,
		Progress: p.progress, OnPlan: p.onPlan,
	}
	if opts.Tenant != "" {
		id, err := resolveTenant(ctx, pool, opts.Tenant)
		if err != nil {
			return nil, err
		}
		dbo.Tenant = &id
		if opts.From > 0 {
			h, _ := hex.DecodeString(opts.FromHash)
			if opts.FromHash == "" {
				if h, err = witnessedHash(ctx, f, pool, id, opts.From); err != nil {
					return nil, err
				}
			}
			dbo.From = &chainverify.Head{Seq: opts.From, Hash: h}
		}
	}

	v := &dbVerify{wj: witnessCheckJSON{Problems: []string{}}}
	var witnessFindings []chainverify.Finding
	st, err := f.OptionalLake(ctx)
	if err != nil {
		return nil, err
	}
	if st != nil {
		// The fork check reads the witnesses and the bronze heads (before
		// the journal snapshot VerifyDB takes) and the fork acceptances.
		fc, err := chainverify.ForkCheck(ctx, pool, st, dbo.Tenant)
		if err != nil {
			return nil, cliutil.AsConfigError(err)
		}
		acc, err := chainverify.ReadAcceptances(ctx, pool)
		if err != nil {
			return nil, cliutil.AsConfigError(err)
		}
		v.wj = witnessCheck(fc)
		v.acceptedForks = fc.Accepted
		witnessFindings = chainverify.InvalidWitnessFindings(fc.Untrusted)
		dbo.Witnessed, dbo.Bronze = witnessedHeads(fc)
		dbo.Accepted = func(id uuid.UUID, a chainverify.Head) bool {
			_, ok := acc.Covers(id, a)
			return ok
		}
	}

	stop := p.start()
	v.rep, err = chainverify.VerifyDB(ctx, pool, dbo)
	stop()
	if err != nil {
		return nil, cliutil.AsConfigError(fmt.Errorf("verify the journal: %w", err))
	}
	if v.names, err = tenantNames(ctx, pool); err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	if len(witnessFindings) > 0 {
		v.rep.Findings = append(v.rep.Findings, witnessFindings...)
		slices.SortStableFunc(v.rep.Findings, func(a, b chainverify.Finding) int {
			if c := bytes.Compare(a.Tenant[:], b.Tenant[:]); c != 0 {
				return c
			}
			return cmp.Compare(a.Seq, b.Seq)
		})
	}
	return v, nil
}

// witnessCheck is the witnesses part of the report.
func witnessCheck(fc *chainverify.ForkCheckResult) witnessCheckJSON {
	wj := witnessCheckJSON{Checked: true, Tenants: len(fc.Witnessed), Bronze: len(fc.Bronze), Problems: []string{}}
	for _, e := range fc.Untrusted {
		wj.Problems = append(wj.Problems, e.Error())
	}
	for _, e := range fc.BronzeProblems {
		wj.Problems = append(wj.Problems, "bronze table not compared: "+e.Error())
	}
	return wj
}

// witnessedHeads are DBOptions.Witnessed and DBOptions.Bronze: the newest
// witnessed head and the newest bronze event of each tenant.
func witnessedHeads(fc *chainverify.ForkCheckResult) (witnessed, bronze func(uuid.UUID) (chainverify.Head, bool)) {
	witnessed = func(id uuid.UUID) (chainverify.Head, bool) {
		h, ok := fc.Witnessed[id]
		if !ok {
			return chainverify.Head{}, false
		}
		return chainverify.Head{Seq: h.Seq, Hash: h.HashBytes()}, true
	}
	bronze = func(id uuid.UUID) (chainverify.Head, bool) {
		b, ok := fc.Bronze[id]
		if !ok {
			return chainverify.Head{}, false
		}
		return chainverify.Head{Seq: b.Seq, Hash: b.Hash}, true
	}
	return witnessed, bronze
}

func verifyRun(ctx context.Context, opts *VerifyOptions) error {
	io := opts.IO
	format, _ := opts.Format()
	p := verifyProgress{progress: &chainverify.Progress{}, start: func() func() { return func() {} }}
	if io.IsStderrTTY() {
		var total int64
		var mu sync.Mutex
		p.onPlan = func(n int64) { mu.Lock(); total = n; mu.Unlock() }
		p.start = func() func() {
			return startProgress(io.ErrOut, p.progress, func() int64 { mu.Lock(); defer mu.Unlock(); return total })
		}
	}
	v, err := opts.Verify(ctx, opts, p)
	if err != nil {
		return err
	}
	rep, names, wj, acceptedForks := v.rep, v.names, v.wj, v.acceptedForks

	if format == cliutil.FormatJSON {
		doc := verifyJSON{OK: len(rep.Findings) == 0, Findings: rep.Findings, Events: rep.Events,
			Resumed: rep.Resumed, ElapsedSeconds: rep.Elapsed.Seconds(), SignatureRule: rep.Rule, Witnesses: wj,
			Checkpoints: rep.Checkpoints, Invalidated: rep.Invalidated, AcceptedForks: acceptedForks,
			Chains: make([]chainJSON, 0, len(rep.Chains))}
		doc.AcceptedForks = cliutil.NonNil(doc.AcceptedForks)
		doc.Findings = cliutil.NonNil(doc.Findings)
		for _, c := range rep.Chains {
			doc.Chains = append(doc.Chains, chainJSON{ChainReport: c, Name: names[c.Tenant]})
		}
		if err := cliutil.WriteJSON(io.Out, doc); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(rep.Chains))
		for _, c := range rep.Chains {
			status := "ok"
			if !c.OK {
				status = string(c.Reason)
			}
			rows = append(rows, []string{c.Tenant.String(), names[c.Tenant], fmt.Sprint(c.FromSeq),
				fmt.Sprint(c.Seq), short(c.Hash), fmt.Sprint(c.Events), status})
		}
		if err := cliutil.Table(io, []string{"TENANT", "NAME", "FROM", "SEQ", "HASH", "EVENTS", "STATUS"}, rows); err != nil {
			return err
		}
		if len(rep.Findings) > 0 {
			fmt.Fprintln(io.Out)
			frows := make([][]string, 0, len(rep.Findings))
			for _, fd := range rep.Findings {
				frows = append(frows, []string{fd.Tenant.String(), names[fd.Tenant], fmt.Sprint(fd.Seq), string(fd.Reason), fd.Detail})
			}
			if err := cliutil.Table(io, []string{"TENANT", "NAME", "FIRST BAD SEQ", "REASON", "DETAIL"}, frows); err != nil {
				return err
			}
		}
		for _, a := range acceptedForks {
			fmt.Fprintf(io.ErrOut, "oml: accepted fork: tenant %s (%s): %s at seq %d (%s), accepted by provider seq %d (%s, by %s)\n",
				a.Finding.Tenant, names[a.Finding.Tenant], a.Finding.Reason, a.Finding.Seq, a.Finding.Evidence["anchor"], a.AcceptedAt, a.Reason, a.By)
		}
		for _, p := range wj.Problems {
			fmt.Fprintf(io.ErrOut, "oml: warning: %s\n", p)
		}
		if !wj.Checked {
			fmt.Fprintln(io.ErrOut, "oml: note: no lake configured (--lake or OML_LAKE_URL): heads were checked against checkpoints only, not against witnessed heads")
		}
		rate := float64(rep.Events) / max(rep.Elapsed.Seconds(), 1e-9)
		fmt.Fprintf(io.ErrOut, "verified %d chains (%d resumed from checkpoints, %d checkpoints stored, %d moved back below a finding), %d events in %s (%.0f events/s), signature rule %s\n",
			len(rep.Chains), rep.Resumed, rep.Checkpoints, rep.Invalidated, rep.Events, rep.Elapsed.Round(time.Millisecond), rate, rep.Rule)
		if rep.Resumed > 0 {
			fmt.Fprintln(io.ErrOut, "oml: note: --since-checkpoint: events below the checkpoints were not re-read; a plain oml chain verify checks every event")
		}
	}
	if n := len(rep.Findings); n > 0 {
		if format == cliutil.FormatJSON {
			return cliutil.ErrFindings
		}
		return cliutil.Findingsf("%d chain(s) failed verification: see the findings above (docs/chain-verify.md explains each reason)", n)
	}
	return nil
}

// witnessedHash is the hash of tenant's head witnessed at exactly seq, for
// --from without --from-hash. The witness must verify under an issued key.
func witnessedHash(ctx context.Context, f *cliutil.Factory, pool *pgxpool.Pool, tenant uuid.UUID, seq int64) ([]byte, error) {
	st, err := f.OptionalLake(ctx)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, cliutil.FlagErrorf("--from %d needs --from-hash, or a lake (--lake or OML_LAKE_URL) holding a head witnessed at seq %d", seq, seq)
	}
	h, err := witness.Read(ctx, st, witness.Key(tenant, seq))
	if errors.Is(err, store.ErrNotFound) {
		return nil, cliutil.FlagErrorf("no head of tenant %s is witnessed at seq %d: give --from-hash, or a witnessed seq (see oml chain head)", tenant, seq)
	}
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	trusted, err := issuedKeys(ctx, pool)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	pub, ok := trusted(h.KeyID, h.Tenant, h.Seq)
	if !ok {
		return nil, cliutil.ConfigErrorf("the head witnessed at seq %d is signed by key %s, which the deployment never issued: give --from-hash", seq, h.KeyID)
	}
	if err := h.Verify(pub); err != nil {
		return nil, cliutil.ConfigErrorf("%v: give --from-hash", err)
	}
	return h.HashBytes(), nil
}
