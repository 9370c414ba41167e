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
