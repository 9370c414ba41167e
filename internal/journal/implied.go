package journal

import (
	"bytes"
	"fmt"

	"github.com/google/uuid"
)

// What a journal event implies for the lake, derived from the signed events
// alone (never from a row the application could have written). The lake
// writer checks every outbox row against these before the row enters the
// lake; a row that disagrees is poison (docs/lake-writer.md, "Every row is
// checked against the journal").

// ImpliedMaterialize is the materialize payload the journal implies for a
// claim promoted by prom (at promSeq) that was submitted by sub (at
// subSeq). It refuses a pair that could not both be in one valid chain: a
// submission of another claim, a submission not before the promotion, or a
// promotion by the claim's own writer.
func ImpliedMaterialize(sub ClaimSubmitted, subSeq int64, prom ClaimPromoted, promSeq int64) (MaterializePayload, error) {
	switch {
	case sub.ArtifactID != prom.ArtifactID || sub.Version != prom.Version:
		return MaterializePayload{}, fmt.Errorf("journal seq %d submits %s v%d, not the promoted %s v%d",
			subSeq, sub.ArtifactID, sub.Version, prom.ArtifactID, prom.Version)
	case subSeq >= promSeq:
		return MaterializePayload{}, fmt.Errorf("the submission (journal seq %d) is not before the promotion (journal seq %d)", subSeq, promSeq)
	case prom.By == sub.Writer:
		return MaterializePayload{}, fmt.Errorf("the promotion at journal seq %d is by the claim's own writer %q, which the fold never accepts", promSeq, prom.By)
	}
	return MaterializePayload{
		WorkareaID: sub.WorkareaID, Writer: sub.Writer, Principal: sub.Principal, Provenance: sub.Provenance,
		PlaintextDigest: sub.PlaintextDigest, CiphertextDigest: sub.CiphertextDigest, State: StatePromoted,
		PromotedBy: prom.By, SubmittedSeq: subSeq, PromotedSeq: promSeq,
	}, nil
}

// ImpliedRetract is the retract payload the event ev (decoded) implies for
// claim (artifact, version), or an error when ev retracts no such claim.
func ImpliedRetract(ev Payload, artifact string, version int) (RetractPayload, error) {
	names := func(a string, v int) bool { return a == artifact && v == version }
	switch e := ev.(type) {
	case ClaimDemoted:
		if names(e.ArtifactID, e.Version) {
			return RetractPayload{State: StateDemoted, By: e.By, Reason: e.Reason}, nil
		}
	case ClaimErased:
		if e.ArtifactID == artifact {
			return RetractPayload{State: StateErased, By: e.By, Reason: e.Reason}, nil
		}
	case ClaimReassigned:
		if names(e.ArtifactID, e.Version) {
			return RetractPayload{State: StateReassigned, By: e.By, Reason: e.Reason}, nil
		}
	case SimulationEnded:
		for _, c := range e.Claims {
			if names(c.ArtifactID, c.Version) {
				return RetractPayload{State: StateSimulationEnded, By: e.By, Reason: e.SimulationID}, nil
			}
		}
	default:
		return RetractPayload{}, fmt.Errorf("a %s event retracts nothing", ev.EventType())
	}
	return RetractPayload{}, fmt.Errorf("the %s event does not retract %s v%d", ev.EventType(), artifact, version)
}

// TenantCreatedBy reports whether the provider-chain event (evType, evHash,
// evPayload) at the position an oml.tenants row names is the event that
// created tenant id: for an ordinary tenant a tenant.created naming it,
// whose hash is the row's provider_hash; for the provider tenant its root
// key.issued. A tenants row without such an event (a row inserted behind
// the append path) is no tenant.
func TenantCreatedBy(id uuid.UUID, providerHash []byte, evType string, evHash, evPayload []byte) bool {
	if len(evHash) == 0 || !bytes.Equal(evHash, providerHash) {
		return false
	}
	if id == ProviderTenant {
		return Type(evType) == TypeKeyIssued
	}
	if Type(evType) != TypeTenantCreated {
		return false
	}
	p, err := Decode(TypeTenantCreated, evPayload)
	if err != nil {
		return false
	}
	tc, ok := p.(TenantCreated)
	return ok && tc.TenantID == id.String()
}

// ImpliedLineage is the gold.lineage payload the journal implies for the
// change the event ev (decoded, at seq) made to claim (artifact, version),
// given the claim's submission sub (at subSeq) and prev, the event at
// prevSeq that made the claim's previous change (for a promotion: the
// submission itself, whose payload prev then is). It refuses what no valid
// chain holds: a submission or previous change of another claim, events
// out of order, a promotion not straight after its submission or by the
// claim's own writer, a retirement of a claim that was never promoted (it
// has no lineage), and a state change the fold never makes.
//
// What it cannot see from three events is a change between prev and ev
// that the row skips; reconcile finds that (it replays the whole chain).
func ImpliedLineage(ev Payload, seq int64, artifact string, version int, sub ClaimSubmitted, subSeq int64, prev Payload, prevSeq int64) (LineagePayload, error) {
	switch {
	case sub.ArtifactID != artifact || sub.Version != version:
		return LineagePayload{}, fmt.Errorf("journal seq %d submits %s v%d, not %s v%d", subSeq, sub.ArtifactID, sub.Version, artifact, version)
	case subSeq > prevSeq || prevSeq >= seq:
		return LineagePayload{}, fmt.Errorf("the submission (journal seq %d), the previous change (%d) and the change (%d) are out of order", subSeq, prevSeq, seq)
	}
	want := LineagePayload{
		WorkareaID: sub.WorkareaID, Writer: sub.Writer, Principal: sub.Principal, Provenance: sub.Provenance,
		PlaintextDigest: sub.PlaintextDigest, CiphertextDigest: sub.CiphertextDigest, SubmittedSeq: subSeq, PrevSeq: prevSeq,
	}
	if prom, ok := ev.(ClaimPromoted); ok {
		switch {
		case prom.ArtifactID != artifact || prom.Version != version:
			return LineagePayload{}, fmt.Errorf("journal seq %d promotes %s v%d, not %s v%d", seq, prom.ArtifactID, prom.Version, artifact, version)
		case prevSeq != subSeq:
			return LineagePayload{}, fmt.Errorf("a promotion's previous change is the claim's submission (journal seq %d), not journal seq %d", subSeq, prevSeq)
		case prom.By == sub.Writer:
			return LineagePayload{}, fmt.Errorf("the promotion at journal seq %d is by the claim's own writer %q, which the fold never accepts", seq, prom.By)
		}
		want.Actor, want.StateBefore, want.StateAfter = prom.By, StateHeld, StatePromoted
		return want, nil
	}
	r, err := ImpliedRetract(ev, artifact, version)
	if err != nil {
		return LineagePayload{}, err
	}
	if prevSeq == subSeq {
		return LineagePayload{}, fmt.Errorf("the change at journal seq %d follows the submission directly: a claim that was never promoted has no lineage", seq)
	}
	before, err := lineageStateAfter(prev, artifact, version)
	if err != nil {
		return LineagePayload{}, fmt.Errorf("the previous change (journal seq %d): %w", prevSeq, err)
	}
	if !LineageTransition(before, r.State) {
		return LineagePayload{}, fmt.Errorf("a %s claim never becomes %s", before, r.State)
	}
	if _, ok := ev.(SimulationEnded); ok && sub.Provenance != ProvenanceSimulation {
		return LineagePayload{}, fmt.Errorf("a simulation end of a claim of provenance %q", sub.Provenance)
	}
	want.Actor, want.Reason, want.StateBefore, want.StateAfter = r.By, r.Reason, before, r.State
	if ra, ok := ev.(ClaimReassigned); ok {
		want.ToWorkareaID = ra.ToWorkareaID
	}
	return want, nil
}

// lineageStateAfter is the state a promoted claim is in after the event ev
// changed it.
func lineageStateAfter(ev Payload, artifact string, version int) (string, error) {
	if prom, ok := ev.(ClaimPromoted); ok {
		if prom.ArtifactID != artifact || prom.Version != version {
			return "", fmt.Errorf("it promotes %s v%d, not %s v%d", prom.ArtifactID, prom.Version, artifact, version)
		}
		return StatePromoted, nil
	}
	r, err := ImpliedRetract(ev, artifact, version)
	if err != nil {
		return "", err
	}
	return r.State, nil
}

// LineageTransition reports whether the fold moves a promoted claim (or
// one retired after its promotion) from state before to state after.
func LineageTransition(before, after string) bool {
	switch before {
	case StateHeld:
		return after == StatePromoted
	case StatePromoted:
		return after == StateDemoted || after == StateReassigned || after == StateSimulationEnded || after == StateErased
	case StateDemoted:
		return after == StateReassigned || after == StateSimulationEnded || after == StateErased
	case StateReassigned, StateSimulationEnded:
		return after == StateErased
	}
	return false
}
