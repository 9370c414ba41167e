package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Claim states (oml.claims.state and silver.claims.state).
const (
	StateHeld            = "held"
	StatePromoted        = "promoted"
	StateDemoted         = "demoted"
	StateErased          = "erased"
	StateSimulationEnded = "simulation_ended"
	StateReassigned      = "reassigned"
	// StateBodyLost: a claim that was held when a failover lost its body
	// (held bodies never reach the lake), brought back by `oml chain
	// restore-tail` and named in its chain.tail_restored. It can be
	// demoted, reassigned, erased or ended like a held claim, never
	// promoted: there is no body to materialize.
	StateBodyLost = "body_lost"
)

// Outbox targets and ops (the CHECK constraints of oml.outbox).
const (
	TargetBronzeEvents = "bronze.events"
	TargetSilverClaims = "silver.claims"
	TargetGoldLineage  = "gold.lineage"
	// TargetGoldWorkareas: one row per change to a promoted claim, beside
	// its gold.lineage row and with the same payload; the lake writer
	// MERGEs it into the claim's workarea's row of gold/workareas.
	TargetGoldWorkareas = "gold.workareas"
	OpAppend            = "append"
	OpMaterialize       = "materialize"
	OpRetract           = "retract"
)

// ProviderTenant is the reserved provider tenant id (all zero).
var ProviderTenant = uuid.UUID{}

// ProviderTenantName is the name of the provider tenant's oml.tenants row.
// Tenant names may not start with "_", so it cannot collide.
const ProviderTenantName = "_provider"

// Applied is what the chain assigned to one event: the fold needs its
// position and hash (tenant.created is referenced by them).
type Applied struct {
	Seq        uint64
	Hash       [32]byte
	RecordedAt time.Time
}

// ErrRejected wraps every fold refusal: the event is not allowed in the
// current state (unknown claim, wrong state, wrong chain, ...). Nothing is
// written when an append is rejected.
var ErrRejected = errors.New("event rejected")

// ErrUnknownTenant is returned (wrapped in ErrRejected) when appending to a
// tenant that has no oml.tenants row.
var ErrUnknownTenant = errors.New("unknown tenant")

func reject(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRejected, fmt.Sprintf(format, args...))
}

// Claim is one row of the claim fold state.
type Claim struct {
	ArtifactID       string
	Version          int
	WorkareaID       string
	Writer           string
	Principal        string
	Provenance       string
	PlaintextDigest  []byte
	CiphertextDigest []byte
	State            string
	SubmittedSeq     int64
	SubmittedAt      time.Time
	PromotedBy       *string
	PromotedSeq      *int64
	PromotedAt       *time.Time
	UpdatedAt        time.Time
	LastSeq          int64

	isNew   bool // inserted by this append
	touched bool
}

// TenantRow is an oml.tenants row.
type TenantRow struct {
	ID           uuid.UUID
	Name         string
	CreatedAt    time.Time
	ProviderSeq  int64
	ProviderHash []byte
}

// OutboxRow is a row of oml.outbox as the fold sees or creates it.
type OutboxRow struct {
	Seq        int64 // 0 for rows not yet inserted
	TenantID   uuid.UUID
	JournalSeq int64
	Target     string
	Op         string
	ArtifactID *string
	Version    *int
	Payload    []byte // JSON
}

// DeadLetter is the part of an oml.dead_letter row the fold needs.
type DeadLetter struct {
	ID           int64
	OutboxSeq    int64
	TenantID     uuid.UUID
	Reenqueued   bool
	ReenqueuedAt *time.Time
	// Abandoned: a deadletter.abandoned closed it for good.
	Abandoned bool
	// TenantHasChain: the dead letter's tenant has a chain (a row whose
	// tenant has none is abandoned on the provider chain).
	TenantHasChain bool
}

// SigningKey is the part of an oml.signing_keys row the fold needs.
type SigningKey struct {
	KeyID   string
	Revoked bool
}

// State is the slice of fold state one append reads, loaded after the
// tenant lock is taken (so it cannot change underneath the append).
type State struct {
	Tenant      uuid.UUID
	TenantRow   *TenantRow
	Claims      map[ClaimRef]*Claim
	DataKeys    map[string][]byte // artifact_id -> dek
	Outbox      map[int64]*OutboxRow
	DeadLetters map[int64]*DeadLetter
	DeadOutbox  map[int64]bool // outbox seqs already dead-lettered
	// OutboxTenantCreated: the outbox row's tenant was created by the
	// provider chain (TenantCreatedBy). A row of a tenant that was not (a
	// ghost tenant id, a tenants row inserted behind the append path) is
	// dead-lettered on the provider chain.
	OutboxTenantCreated map[int64]bool
	SigningKeys         map[string]SigningKey
}

// NewState returns an empty state for tenant (a fresh chain with no rows).
func NewState(tenant uuid.UUID) *State {
	return &State{
		Tenant:      tenant,
		Claims:      map[ClaimRef]*Claim{},
		DataKeys:    map[string][]byte{},
		Outbox:      map[int64]*OutboxRow{},
		DeadLetters: map[int64]*DeadLetter{},
		DeadOutbox:  map[int64]bool{},
		SigningKeys: map[string]SigningKey{},

		OutboxTenantCreated: map[int64]bool{},
	}
}

// Needs is what Load must read for a list of events.
type Needs struct {
	Artifacts   []string
	OutboxSeqs  []int64
	DeadLetters []int64
	KeyIDs      []string
}

// NeedsOf computes what the fold of evs will read, besides the tenant row.
func NeedsOf(signerKeyID string, evs []Event) Needs {
	var n Needs
	seenA := map[string]bool{}
	addA := func(a string) {
		if !seenA[a] {
			seenA[a] = true
			n.Artifacts = append(n.Artifacts, a)
		}
	}
	n.KeyIDs = append(n.KeyIDs, signerKeyID)
	for _, e := range evs {
		switch p := e.decoded.(type) {
		case ClaimSubmitted:
			addA(p.ArtifactID)
		case ClaimPromoted:
			addA(p.ArtifactID)
		case ClaimDemoted:
			addA(p.ArtifactID)
		case ClaimErased:
			addA(p.ArtifactID)
		case ClaimReassigned:
			addA(p.ArtifactID)
		case SimulationEnded:
			for _, c := range p.Claims {
				addA(c.ArtifactID)
			}
		case ChainTailRestored:
			for _, c := range p.BodyLost {
				addA(c.ArtifactID)
			}
		case MaterializeSkipped:
			n.OutboxSeqs = append(n.OutboxSeqs, p.OutboxSeq)
		case DeadletterReenqueued:
			n.DeadLetters = append(n.DeadLetters, p.DeadLetterID)
		case DeadletterAbandoned:
			n.DeadLetters = append(n.DeadLetters, p.DeadLetterID)
		case KeyIssued:
			if p.KeyID != signerKeyID {
				n.KeyIDs = append(n.KeyIDs, p.KeyID)
			}
		case KeyRevoked:
			if p.KeyID != signerKeyID {
				n.KeyIDs = append(n.KeyIDs, p.KeyID)
			}
		}
	}
	return n
}

// Plan is the ordered list of writes an append's fold implies.
type Plan struct {
	tenant uuid.UUID
	steps  []step
	// claims touched, in first-touch order, written after the other steps
	// that do not depend on them.
	claimOrder []ClaimRef
	claims     map[ClaimRef]*Claim
	bodies     []bodyRow
	keyInserts map[string][]byte
	keyOrder   []string
	keyDeletes []string
	// Outbox rows in order; also what Append reports.
	Outbox []OutboxRow
	// outboxSeqs, when set, fixes each Outbox row's seq (SetOutboxSeqs).
	outboxSeqs []int64
}

type bodyRow struct {
	ref  ClaimRef
	body []byte
}

// A step is one ordered write besides claims/bodies/keys: a run of plain
// outbox rows, or a statement with its own semantics.
type step struct {
	outbox []OutboxRow // plain outbox rows (when non-nil)
	stmt   *stmt
}

type stmt struct {
	sql  string
	args []any
	// wantRows: the statement must affect exactly this many rows (-1: any).
	wantRows int64
	what     string
}

func (p *Plan) addOutbox(r OutboxRow) {
	p.Outbox = append(p.Outbox, r)
	if n := len(p.steps); n > 0 && p.steps[n-1].outbox != nil {
		p.steps[n-1].outbox = append(p.steps[n-1].outbox, r)
		return
	}
	p.steps = append(p.steps, step{outbox: []OutboxRow{r}})
}

func (p *Plan) addStmt(s stmt) { p.steps = append(p.steps, step{stmt: &s}) }

func (p *Plan) touch(c *Claim) {
	ref := ClaimRef{c.ArtifactID, c.Version}
	if !c.touched {
		c.touched = true
		p.claimOrder = append(p.claimOrder, ref)
	}
	p.claims[ref] = c
}

// Fold validates evs (already sealed at the positions in applied) against
// st and returns the writes they imply. It mutates st as it goes, so a
// batch may submit and then promote the same claim. signerKeyID is the key
// that signed the events.
func Fold(st *State, signerKeyID string, applied []Applied, evs []Event) (*Plan, error) {
	if len(applied) != len(evs) {
		return nil, fmt.Errorf("fold: %d events but %d positions", len(evs), len(applied))
	}
	plan := &Plan{tenant: st.Tenant, claims: map[ClaimRef]*Claim{}, keyInserts: map[string][]byte{}}
	f := &folder{st: st, plan: plan, signer: signerKeyID}
	for i, ev := range evs {
		ev, err := ev.Prepared()
		if err != nil {
			return nil, err
		}
		if err := f.apply(applied[i], ev); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

type folder struct {
	st     *State
	plan   *Plan
	signer string
	// replay skips the checks that need data a stored chain alone does not
	// have: the tenant row, the signing keys, bodies and data keys, outbox
	// and dead-letter rows (see Replay).
	replay bool
	// restore folds events re-inserted from the lake (see Restore): a
	// submission comes without its body and data key, and an outbox row an
	// earlier restored event implies may not be loaded yet.
	restore bool
	// versions indexes st.Claims by artifact, built on first use and kept
	// as submissions add to st.Claims (the only place a fold adds a claim),
	// so the erased-artifact check and claim.erased look up one artifact's
	// versions: a whole-chain Replay holds every claim of the tenant, and a
	// scan of them all per submission made the replay quadratic.
	versions map[string][]*Claim
}

// artifactVersions is every claim of artifact in st.Claims, in no order.
// The slice is the index's own: a caller that reorders it copies it first.
func (f *folder) artifactVersions(artifact string) []*Claim {
	if f.versions == nil {
		f.versions = make(map[string][]*Claim, len(f.st.Claims))
		for r, c := range f.st.Claims {
			f.versions[r.ArtifactID] = append(f.versions[r.ArtifactID], c)
		}
	}
	return f.versions[artifact]
}

func (f *folder) isProvider() bool { return f.st.Tenant == ProviderTenant }

// apply folds one event, one step each: check it (tenant, chain shape,
// signing key), mirror it into bronze.events, then its own effects, one
// method per event type (applyKeyIssued, applyClaimPromoted, ...).
func (f *folder) apply(a Applied, ev Event) error {
	st, plan := f.st, f.plan
	seq := int64(a.Seq)
	t := ev.Type

	if err := f.check(a, ev); err != nil {
		return err
	}

	// Every event is mirrored into bronze.events, first, so the event's own
	// row precedes the rows of its effects in outbox order.
	plan.addOutbox(OutboxRow{TenantID: st.Tenant, JournalSeq: seq, Target: TargetBronzeEvents, Op: OpAppend,
		Payload: jsonObj("event_type", string(t))})

	switch p := ev.decoded.(type) {
	case KeyIssued:
		return f.applyKeyIssued(a, ev, p)
	case KeyRevoked:
		return f.applyKeyRevoked(a, ev, p)
	case TenantCreated:
		return f.applyTenantCreated(a, ev, p)
	case TenantGenesis:
		return f.applyTenantGenesis(a, ev, p)
	case ClaimSubmitted:
		return f.applyClaimSubmitted(a, ev, p)
	case ClaimPromoted:
		return f.applyClaimPromoted(a, ev, p)
	case ClaimDemoted:
		return f.applyClaimDemoted(a, ev, p)
	case ClaimReassigned:
		return f.applyClaimReassigned(a, ev, p)
	case ClaimErased:
		return f.applyClaimErased(a, ev, p)
	case SimulationEnded:
		return f.applySimulationEnded(a, ev, p)
	case MaterializeSkipped:
		return f.applyMaterializeSkipped(a, ev, p)
	case DeadletterReenqueued:
		return f.applyDeadletterReenqueued(a, ev, p)
	case DeadletterAbandoned:
		return f.applyDeadletterAbandoned(a, ev, p)
	case ChainTailRestored:
		return f.applyChainTailRestored(a, ev, p)
	case ChainForkAccepted:
		// Recorded on the provider chain; read by the fork check.

	case LakeRepaired:
		// The audit record of a lake repair: the lake is derived, so no
		// fold state changes (its bronze row is implied like any event's).

	default:
		return reject("no fold for event type %s", t)
	}
	return nil
}

// check is the part of apply that every event passes before its effects:
// the tenant exists, the chain's shape rules, and the signing key.
func (f *folder) check(a Applied, ev Event) error {
	st := f.st
	t := ev.Type
	if st.TenantRow == nil && !(f.isProvider() && a.Seq == 1) && !f.replay {
		if f.isProvider() {
			return fmt.Errorf("%w: the deployment is not initialised (no provider tenant): run `oml init`", ErrUnknownTenant)
		}
		return fmt.Errorf("%w: no tenant with id %s: create it with `oml tenant create NAME`", ErrUnknownTenant, st.Tenant)
	}

	// Chain shape rules.
	switch {
	case f.isProvider() && !t.OnProvider() && t != TypeMaterializeSkipped:
		return reject("%s cannot be appended to the provider chain (it holds key.issued, tenant.created, chain.fork_accepted, chain.tail_restored, lake.repaired and the lake writer's materialize.skipped for rows of no tenant only)", t)
	case !f.isProvider() && t.ProviderOnly():
		return reject("%s belongs on the provider chain, not on tenant %s", t, st.Tenant)
	case f.isProvider() && a.Seq == 1 && t != TypeKeyIssued:
		return reject("the provider chain must open with key.issued (run `oml init`)")
	case !f.isProvider() && a.Seq == 1 && t != TypeTenantGenesis:
		return reject("tenant %s's chain must open with tenant.genesis", st.Tenant)
	case !f.isProvider() && a.Seq != 1 && t == TypeTenantGenesis:
		return reject("tenant.genesis can only be seq 1; tenant %s already has a chain", st.Tenant)
	}
	// The signing key must be issued and not revoked; the only exception is
	// the root key.issued at provider seq 1, which issues its own signer.
	if f.replay {
		// not checked: the verifier checks keys and signatures
	} else if k, ok := st.SigningKeys[f.signer]; !ok {
		ki, isKI := ev.decoded.(KeyIssued)
		if !(f.isProvider() && a.Seq == 1 && isKI && ki.KeyID == f.signer) {
			return reject("the signing key %s is not issued in this deployment: use the deployment's key (the one `oml init` issued)", f.signer)
		}
	} else if k.Revoked {
		return reject("the signing key %s is revoked", f.signer)
	}
	return nil
}

func (f *folder) applyKeyIssued(a Applied, ev Event, p KeyIssued) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	if _, dup := st.SigningKeys[p.KeyID]; dup {
		return reject("key %s is already issued", p.KeyID)
	}
	pub, _ := base64.StdEncoding.DecodeString(p.PublicKey)
	if a.Seq == 1 && p.KeyID != f.signer && !f.replay {
		return reject("the root key.issued must issue the key that signs it (%s), not %s", f.signer, p.KeyID)
	}
	if want := keyIDOf(pub); want != p.KeyID {
		return reject("key.issued key_id %s does not match its public key (expected %s)", p.KeyID, want)
	}
	st.SigningKeys[p.KeyID] = SigningKey{KeyID: p.KeyID}
	plan.addStmt(stmt{
		sql: `INSERT INTO oml.signing_keys (key_id, algorithm, public_key, issued_seq, issued_hash, issued_at)
		      VALUES ($1, $2, $3, $4, $5, $6)`,
		args:     []any{p.KeyID, p.Algorithm, pub, seq, a.Hash[:], a.RecordedAt},
		wantRows: 1, what: "register the signing key",
	})
	if a.Seq == 1 {
		st.TenantRow = &TenantRow{ID: ProviderTenant, Name: ProviderTenantName, CreatedAt: a.RecordedAt, ProviderSeq: 1, ProviderHash: a.Hash[:]}
		plan.addStmt(stmt{
			sql: `INSERT INTO oml.tenants (id, name, created_at, provider_seq, provider_hash)
			      VALUES ($1, $2, $3, $4, $5)`,
			args:     []any{ProviderTenant, ProviderTenantName, a.RecordedAt, seq, a.Hash[:]},
			wantRows: 1, what: "create the provider tenant",
		})
	}
	return nil
}

func (f *folder) applyKeyRevoked(a Applied, ev Event, p KeyRevoked) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	if f.replay {
		return nil
	}
	if p.KeyID == f.signer {
		return reject("key.revoked: key %s cannot revoke itself: issue a new key (oml key rotate), sign with it, then revoke this one", p.KeyID)
	}
	k, ok := st.SigningKeys[p.KeyID]
	if !ok {
		return reject("key.revoked: key %s was never issued", p.KeyID)
	}
	if k.Revoked {
		return reject("key.revoked: key %s is already revoked", p.KeyID)
	}
	k.Revoked = true
	st.SigningKeys[p.KeyID] = k
	tenants := make([]uuid.UUID, len(p.Heads))
	seqs := make([]int64, len(p.Heads))
	hashes := make([][]byte, len(p.Heads))
	for i, h := range p.Heads {
		tenants[i], seqs[i], hashes[i] = uuid.MustParse(h.TenantID), h.Seq, hexDigest(h.Hash)
	}
	// One statement: the key is marked revoked only if every head the
	// event names is in the journal (the heads are what verifiers cut
	// at; a head that is not there would make the cut a lie).
	plan.addStmt(stmt{
		sql: `UPDATE oml.signing_keys SET revoked_at = $2, revoked_seq = $3
		       WHERE key_id = $1 AND revoked_at IS NULL
		         AND (SELECT count(*) FROM unnest($4::uuid[], $5::bigint[], $6::bytea[]) AS h(t, s, x)
		                JOIN oml.journal j ON j.tenant_id = h.t AND j.seq = h.s AND j.hash = h.x) = $7`,
		args:     []any{p.KeyID, a.RecordedAt, seq, tenants, seqs, hashes, len(p.Heads)},
		wantRows: 1, what: "revoke the signing key (every head it names must be in the journal)",
	})
	return nil
}

func (f *folder) applyTenantCreated(a Applied, ev Event, p TenantCreated) error {
	plan := f.plan
	seq := int64(a.Seq)
	id := uuid.MustParse(p.TenantID)
	if id == ProviderTenant {
		return reject("tenant.created cannot create the provider tenant")
	}
	plan.addStmt(stmt{
		sql: `INSERT INTO oml.tenants (id, name, created_at, provider_seq, provider_hash)
		      VALUES ($1, $2, $3, $4, $5)`,
		args:     []any{id, p.Name, a.RecordedAt, seq, a.Hash[:]},
		wantRows: 1, what: "create the tenant",
	})
	return nil
}

func (f *folder) applyTenantGenesis(a Applied, ev Event, p TenantGenesis) error {
	st := f.st
	if f.replay {
		return nil
	}
	tr := st.TenantRow
	if p.TenantID != st.Tenant.String() || p.Name != tr.Name {
		return reject("tenant.genesis names tenant %s (%s) but is appended to tenant %s (%s)", p.TenantID, p.Name, st.Tenant, tr.Name)
	}
	if uint64(tr.ProviderSeq) != p.ProviderSeq || hex.EncodeToString(tr.ProviderHash) != p.ProviderHash {
		return reject("tenant.genesis references provider event %d/%s but the tenant was created by provider event %d/%x", p.ProviderSeq, p.ProviderHash, tr.ProviderSeq, tr.ProviderHash)
	}
	return nil
}

func (f *folder) applyClaimSubmitted(a Applied, ev Event, p ClaimSubmitted) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	ref := ClaimRef{p.ArtifactID, p.Version}
	if _, exists := st.Claims[ref]; exists {
		return reject("claim %s v%d already exists in tenant %s; submit a new version instead", p.ArtifactID, p.Version, st.Tenant)
	}
	for _, c := range f.artifactVersions(p.ArtifactID) {
		if c.State == StateErased {
			return reject("artifact %s was erased; its data key is destroyed and it takes no new versions", p.ArtifactID)
		}
	}
	if f.replay || f.restore {
		// bodies and data keys are not in the chain (nor in the lake)
	} else if sum := sha256.Sum256(ev.Body); hex.EncodeToString(sum[:]) != p.CiphertextDigest {
		return reject("claim %s v%d: the ciphertext body's SHA-256 is %x, not the ciphertext_digest %s the event carries", p.ArtifactID, p.Version, sum, p.CiphertextDigest)
	} else if dek, ok := st.DataKeys[p.ArtifactID]; ok {
		if !bytes.Equal(dek, ev.DataKey) {
			return reject("claim %s v%d: artifact %s already has a different data key; encrypt new versions under the artifact's key", p.ArtifactID, p.Version, p.ArtifactID)
		}
	} else {
		st.DataKeys[p.ArtifactID] = ev.DataKey
		plan.keyInserts[p.ArtifactID] = ev.DataKey
		plan.keyOrder = append(plan.keyOrder, p.ArtifactID)
	}
	c := &Claim{
		ArtifactID: p.ArtifactID, Version: p.Version, WorkareaID: p.WorkareaID, Writer: p.Writer,
		Principal: p.Principal, Provenance: p.Provenance,
		PlaintextDigest: hexDigest(p.PlaintextDigest), CiphertextDigest: hexDigest(p.CiphertextDigest),
		State: StateHeld, SubmittedSeq: seq, SubmittedAt: a.RecordedAt, UpdatedAt: a.RecordedAt, LastSeq: seq,
		isNew: true,
	}
	st.Claims[ref] = c
	if f.versions != nil {
		f.versions[p.ArtifactID] = append(f.versions[p.ArtifactID], c)
	}
	plan.touch(c)
	if !f.restore {
		plan.bodies = append(plan.bodies, bodyRow{ref: ref, body: ev.Body})
	}
	return nil
}

func (f *folder) applyClaimPromoted(a Applied, ev Event, p ClaimPromoted) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	t := ev.Type
	c, err := f.claim(t, p.ArtifactID, p.Version)
	if err != nil {
		return err
	}
	if c.State == StateBodyLost {
		return reject("claim %s v%d is body_lost: its held body was lost in a failover (chain.tail_restored at journal seq %d) and never reached the lake, so it cannot be promoted; submit its content again as a new version", p.ArtifactID, p.Version, c.LastSeq)
	}
	if c.State != StateHeld {
		return reject("claim %s v%d is %s; only a held claim can be promoted", p.ArtifactID, p.Version, c.State)
	}
	if p.By == c.Writer {
		return reject("claim %s v%d cannot be promoted by its own writer %q; promotion needs a second identity", p.ArtifactID, p.Version, p.By)
	}
	by := p.By
	before, prev := c.State, c.LastSeq
	c.State, c.PromotedBy, c.PromotedSeq, c.PromotedAt = StatePromoted, &by, &seq, &a.RecordedAt
	f.changed(c, a)
	ref := ClaimRef{c.ArtifactID, c.Version}
	plan.addOutbox(OutboxRow{TenantID: st.Tenant, JournalSeq: seq, Target: TargetSilverClaims, Op: OpMaterialize,
		ArtifactID: &ref.ArtifactID, Version: &ref.Version, Payload: materializePayload(c)})
	// Its lineage starts here: gold.lineage has one row per change to a
	// promoted claim, the promotion first (and gold.workareas one beside it).
	f.addGold(seq, ref, OpMaterialize, lineagePayload(c, before, by, "", "", prev))
	return nil
}

func (f *folder) applyClaimDemoted(a Applied, ev Event, p ClaimDemoted) error {
	t := ev.Type
	c, err := f.claim(t, p.ArtifactID, p.Version)
	if err != nil {
		return err
	}
	if !heldLike(c.State) && c.State != StatePromoted {
		return reject("claim %s v%d is %s; only a held (or body_lost) or promoted claim can be demoted", p.ArtifactID, p.Version, c.State)
	}
	f.retire(c, a, StateDemoted, p.By, p.Reason)
	return nil
}

func (f *folder) applyClaimReassigned(a Applied, ev Event, p ClaimReassigned) error {
	t := ev.Type
	c, err := f.claim(t, p.ArtifactID, p.Version)
	if err != nil {
		return err
	}
	if !heldLike(c.State) && c.State != StatePromoted && c.State != StateDemoted {
		return reject("claim %s v%d is %s; only a held (or body_lost), promoted or demoted claim can be reassigned", p.ArtifactID, p.Version, c.State)
	}
	if p.ToWorkareaID == c.WorkareaID {
		return reject("claim %s v%d is already in workarea %s", p.ArtifactID, p.Version, p.ToWorkareaID)
	}
	f.retireTo(c, a, StateReassigned, p.By, p.Reason, p.ToWorkareaID)
	return nil
}

func (f *folder) applyClaimErased(a Applied, ev Event, p ClaimErased) error {
	st := f.st
	plan := f.plan
	versions := slices.Clone(f.artifactVersions(p.ArtifactID))
	if len(versions) == 0 {
		return reject("claim.erased: tenant %s has no artifact %s", st.Tenant, p.ArtifactID)
	}
	sortClaims(versions)
	n := 0
	for _, c := range versions {
		if c.State != StateErased {
			f.retire(c, a, StateErased, p.By, p.Reason)
			n++
		}
	}
	if n == 0 {
		return reject("artifact %s is already erased", p.ArtifactID)
	}
	if _, ok := plan.keyInserts[p.ArtifactID]; ok {
		delete(plan.keyInserts, p.ArtifactID) // submitted and erased in one batch: never store it
	} else if _, ok := st.DataKeys[p.ArtifactID]; ok {
		plan.keyDeletes = append(plan.keyDeletes, p.ArtifactID)
	}
	delete(st.DataKeys, p.ArtifactID)
	return nil
}

func (f *folder) applySimulationEnded(a Applied, ev Event, p SimulationEnded) error {
	t := ev.Type
	for _, r := range p.Claims {
		c, err := f.claim(t, r.ArtifactID, r.Version)
		if err != nil {
			return err
		}
		if c.Provenance != ProvenanceSimulation {
			return reject("simulation.ended lists claim %s v%d whose provenance is %q, not %q", r.ArtifactID, r.Version, c.Provenance, ProvenanceSimulation)
		}
		if !heldLike(c.State) && c.State != StatePromoted && c.State != StateDemoted {
			return reject("simulation.ended lists claim %s v%d which is already %s", r.ArtifactID, r.Version, c.State)
		}
		f.retire(c, a, StateSimulationEnded, p.By, p.SimulationID)
	}
	return nil
}

func (f *folder) applyMaterializeSkipped(a Applied, ev Event, p MaterializeSkipped) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	if f.replay {
		return nil
	}
	o, ok := st.Outbox[p.OutboxSeq]
	if !ok && f.restore {
		// The row may be one this restore puts back; the dead-letter
		// insert below still needs it to exist (exactly one row).
		o = &OutboxRow{TenantID: st.Tenant, Target: p.Target, Op: p.Op, JournalSeq: p.JournalSeq}
	} else if !ok {
		return reject("materialize.skipped: no outbox row %d", p.OutboxSeq)
	}
	if o.TenantID != st.Tenant {
		// The one exception: a row of no tenant (a ghost tenant id the
		// application chose) has no chain of its own, so the provider
		// chain records its skip.
		if !f.isProvider() || st.OutboxTenantCreated[p.OutboxSeq] {
			return reject("materialize.skipped: outbox row %d belongs to tenant %s, not %s", p.OutboxSeq, o.TenantID, st.Tenant)
		}
	}
	if o.Target != p.Target || o.Op != p.Op || o.JournalSeq != p.JournalSeq {
		return reject("materialize.skipped: outbox row %d is %s %s of journal seq %d, not what the event says", p.OutboxSeq, o.Target, o.Op, o.JournalSeq)
	}
	if st.DeadOutbox[p.OutboxSeq] {
		return reject("outbox row %d is already dead-lettered", p.OutboxSeq)
	}
	st.DeadOutbox[p.OutboxSeq] = true
	plan.addStmt(stmt{
		sql: `INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, artifact_id, version,
		          payload, attempts, first_failed_at, last_failed_at, error, skipped_seq)
		      SELECT o.seq, o.tenant_id, o.journal_seq, o.target, o.op, o.artifact_id, o.version, o.payload,
		             $2, coalesce(a.first_failed_at, $3), coalesce(a.last_failed_at, $3), $4, $5
		        FROM oml.outbox o LEFT JOIN oml.outbox_attempts a ON a.outbox_seq = o.seq
		       WHERE o.seq = $1`,
		args:     []any{p.OutboxSeq, p.Attempts, a.RecordedAt, p.Error, seq},
		wantRows: 1, what: "dead-letter the outbox row",
	})
	return nil
}

func (f *folder) applyDeadletterReenqueued(a Applied, ev Event, p DeadletterReenqueued) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	if f.replay {
		return nil
	}
	if f.restore {
		// The copy would draw a new outbox seq, not the one the lost
		// primary gave it (which the lake may have applied).
		// recovery refuses such a tail at plan time with the full
		// sentence; this is the fold's own guard.
		return reject("deadletter.reenqueued at seq %d cannot be restored from the lake: accept the fork instead (oml chain accept-fork) and repair the lake (oml lake repair)", seq)
	}
	d, ok := st.DeadLetters[p.DeadLetterID]
	if !ok {
		return reject("deadletter.reenqueued: no dead letter %d", p.DeadLetterID)
	}
	if d.TenantID != st.Tenant || d.OutboxSeq != p.OutboxSeq {
		return reject("deadletter.reenqueued: dead letter %d is outbox row %d of tenant %s, not what the event says", d.ID, d.OutboxSeq, d.TenantID)
	}
	if d.Reenqueued {
		return reject("dead letter %d was already re-enqueued", d.ID)
	}
	if d.Abandoned {
		return reject("dead letter %d was abandoned (deadletter.abandoned): it will never reach the lake and cannot be re-enqueued", d.ID)
	}
	d.Reenqueued = true
	// The copy keeps the original row's journal_seq, target, op and
	// payload: it is the same work, at a new outbox position. copy_of
	// names the dead-lettered row: the one copy of an implied row the
	// database allows (outbox_implied_once, docs/security.md).
	plan.addStmt(stmt{
		sql: `WITH o AS (
		          INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload, copy_of)
		          SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload, outbox_seq
		            FROM oml.dead_letter WHERE id = $1 AND reenqueued_at IS NULL
		          RETURNING seq)
		      UPDATE oml.dead_letter d
		         SET reenqueued_at = $2, reenqueued_seq = $3, new_outbox_seq = o.seq,
		             reenqueued_by = $4, reenqueue_reason = $5
		        FROM o WHERE d.id = $1`,
		args:     []any{p.DeadLetterID, a.RecordedAt, seq, p.By, p.Reason},
		wantRows: 1, what: "re-enqueue the dead letter",
	})
	return nil
}

func (f *folder) applyDeadletterAbandoned(a Applied, ev Event, p DeadletterAbandoned) error {
	st := f.st
	plan := f.plan
	seq := int64(a.Seq)
	if f.replay {
		return nil
	}
	d, ok := st.DeadLetters[p.DeadLetterID]
	if !ok {
		return reject("deadletter.abandoned: no dead letter %d", p.DeadLetterID)
	}
	own := d.TenantID == st.Tenant || (f.isProvider() && !d.TenantHasChain)
	if !own || d.OutboxSeq != p.OutboxSeq {
		return reject("deadletter.abandoned: dead letter %d is outbox row %d of tenant %s, not what the event says (abandon it on its tenant's chain)", d.ID, d.OutboxSeq, d.TenantID)
	}
	if d.Reenqueued {
		return reject("dead letter %d was already re-enqueued; there is nothing to abandon", d.ID)
	}
	if d.Abandoned {
		return reject("dead letter %d was already abandoned", d.ID)
	}
	d.Abandoned = true
	plan.addStmt(stmt{
		sql: `UPDATE oml.dead_letter
		         SET abandoned_at = $2, abandoned_seq = $3, abandoned_by = $4, abandon_reason = $5
		       WHERE id = $1 AND reenqueued_at IS NULL AND abandoned_at IS NULL`,
		args:     []any{p.DeadLetterID, a.RecordedAt, seq, p.By, p.Reason},
		wantRows: 1, what: "abandon the dead letter",
	})
	return nil
}

func (f *folder) applyChainTailRestored(a Applied, ev Event, p ChainTailRestored) error {
	t := ev.Type
	// The claims it lists were held and lost their body with the tail:
	// they become body_lost (migration 007), their named state. It must
	// not name a claim that is not held.
	for _, r := range p.BodyLost {
		c, err := f.claim(t, r.ArtifactID, r.Version)
		if err != nil {
			return err
		}
		if c.State != StateHeld {
			return reject("chain.tail_restored lists claim %s v%d as body_lost, but it is %s, not held", r.ArtifactID, r.Version, c.State)
		}
		c.State = StateBodyLost
		f.changed(c, a)
	}
	return nil
}

// Restore folds events re-inserted from the lake after a lost tail (`oml
// chain restore-tail`) over st, with the same state machine and checks as
// an append, except that a claim.submitted comes without its body and data
// key (neither reaches the lake) and an outbox row named by a
// materialize.skipped may be one the restore itself puts back. keyIDs[i]
// is the key that signed evs[i]. A deadletter.reenqueued is refused.
func Restore(st *State, keyIDs []string, applied []Applied, evs []Event) (*Plan, error) {
	if len(applied) != len(evs) || len(keyIDs) != len(evs) {
		return nil, fmt.Errorf("restore fold: %d events, %d positions, %d keys", len(evs), len(applied), len(keyIDs))
	}
	plan := &Plan{tenant: st.Tenant, claims: map[ClaimRef]*Claim{}, keyInserts: map[string][]byte{}}
	f := &folder{st: st, plan: plan, restore: true}
	for i, ev := range evs {
		ev, err := ev.Prepared()
		if err != nil {
			return nil, err
		}
		f.signer = keyIDs[i]
		if err := f.apply(applied[i], ev); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// HeldWithoutBody lists the claims this plan submitted (a Restore plan: with
// no body) that are still held, in submission order.
func (p *Plan) HeldWithoutBody() []ClaimRef {
	var out []ClaimRef
	for _, ref := range p.claimOrder {
		if c := p.claims[ref]; c.isNew && c.State == StateHeld {
			out = append(out, ref)
		}
	}
	return out
}

// SetOutboxSeqs fixes the outbox seq of each row of p.Outbox (in order): a
// positive seq is inserted as given (OVERRIDING SYSTEM VALUE), 0 draws from
// the identity as usual. Used by restore-tail to put back rows at the seqs
// the lake already applied them at.
func (p *Plan) SetOutboxSeqs(seqs []int64) error {
	if len(seqs) != len(p.Outbox) {
		return fmt.Errorf("%d outbox seqs for %d outbox rows", len(seqs), len(p.Outbox))
	}
	p.outboxSeqs = seqs
	return nil
}

func (f *folder) claim(t Type, artifact string, version int) (*Claim, error) {
	c, ok := f.st.Claims[ClaimRef{artifact, version}]
	if !ok {
		return nil, reject("%s: tenant %s has no claim %s v%d (submit it first)", t, f.st.Tenant, artifact, version)
	}
	if c.State == StateErased {
		return nil, reject("%s: claim %s v%d is erased", t, artifact, version)
	}
	return c, nil
}

// heldLike: held, or body_lost (held whose body a failover lost): the
// states a retirement may start from without a silver row.
func heldLike(state string) bool { return state == StateHeld || state == StateBodyLost }

func (f *folder) changed(c *Claim, a Applied) {
	c.UpdatedAt, c.LastSeq = a.RecordedAt, int64(a.Seq)
	f.plan.touch(c)
}

// retire moves c to a retracted state and, if it was ever materialized in
// silver.claims, enqueues the retract that sets its state there and the
// gold.lineage row of the change.
func (f *folder) retire(c *Claim, a Applied, state, by, reason string) {
	f.retireTo(c, a, state, by, reason, "")
}

// retireTo is retire with the workarea a reassignment moves the claim to.
func (f *folder) retireTo(c *Claim, a Applied, state, by, reason, to string) {
	before, prev := c.State, c.LastSeq
	c.State = state
	f.changed(c, a)
	if c.PromotedSeq == nil {
		return // never promoted: there is no silver row to retract, and no lineage
	}
	ref := ClaimRef{c.ArtifactID, c.Version}
	f.plan.addOutbox(OutboxRow{TenantID: f.st.Tenant, JournalSeq: int64(a.Seq), Target: TargetSilverClaims, Op: OpRetract,
		ArtifactID: &ref.ArtifactID, Version: &ref.Version, Payload: retractPayload(state, by, reason)})
	f.addGold(int64(a.Seq), ref, OpRetract, lineagePayload(c, before, by, reason, to, prev))
}

// addGold enqueues the gold rows of one change to a promoted claim: its
// gold.lineage row and, with the same payload, its gold.workareas row (the
// change as the claim's workarea's counts see it). One payload for both:
// the lake writer checks both against the journal the same way.
func (f *folder) addGold(seq int64, ref ClaimRef, op string, payload []byte) {
	for _, target := range []string{TargetGoldLineage, TargetGoldWorkareas} {
		f.plan.addOutbox(OutboxRow{TenantID: f.st.Tenant, JournalSeq: seq, Target: target, Op: op,
			ArtifactID: &ref.ArtifactID, Version: &ref.Version, Payload: payload})
	}
}

// ReplayEvent is one stored journal event, as Replay reads it.
type ReplayEvent struct {
	Seq        uint64
	Hash       [32]byte
	RecordedAt time.Time
	Type       Type
	Payload    []byte
}

// Replay folds a whole stored chain (tenant's events in seq order, from
// seq 1) from empty state, and returns the claims it implies and the outbox
// rows it implies, in order (re-enqueued dead-letter copies excepted: they
// copy rows rather than follow from one event). It is the reference that
// oml.claims and oml.outbox must equal. It skips the checks that need data
// the chain does not hold (tenant rows, signing keys, bodies, data keys,
// outbox and dead-letter rows); the state machine itself is fully checked.
func Replay(tenant uuid.UUID, evs []ReplayEvent) (map[ClaimRef]*Claim, []OutboxRow, error) {
	st := NewState(tenant)
	plan := &Plan{tenant: tenant, claims: map[ClaimRef]*Claim{}, keyInserts: map[string][]byte{}}
	f := &folder{st: st, plan: plan, replay: true}
	for i, e := range evs {
		if e.Seq != uint64(i)+1 {
			return nil, nil, fmt.Errorf("replay of tenant %s: expected seq %d, got %d", tenant, i+1, e.Seq)
		}
		ev, err := Event{Type: e.Type, Payload: e.Payload}.Prepared()
		if err != nil {
			return nil, nil, fmt.Errorf("replay of tenant %s seq %d: %w", tenant, e.Seq, err)
		}
		if err := f.apply(Applied{Seq: e.Seq, Hash: e.Hash, RecordedAt: e.RecordedAt}, ev); err != nil {
			return nil, nil, fmt.Errorf("replay of tenant %s seq %d: %w", tenant, e.Seq, err)
		}
	}
	return st.Claims, plan.Outbox, nil
}
