package deadletter

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// StillBroken says why re-enqueueing l would only dead-letter it again,
// or "" when nothing shows that. It knows the cause it can see from the
// database: a silver materialize row of a claim that is still promoted
// whose held body is still missing, or still does not hash to the
// ciphertext digest the journal recorded (the lake writer would refuse it
// again, under a new dead-letter id). Other rows are re-derived from the
// journal on re-enqueue (ImpliedPayload), so nothing is claimed about them;
// a letter no longer open (re-enqueued, abandoned) is left to Reenqueue.
func StillBroken(ctx context.Context, q Querier, l Letter) (string, error) {
	if !l.Open() || l.Target != "silver.claims" || l.Op != "materialize" || l.ArtifactID == nil || l.Version == nil {
		return "", nil
	}
	var state string
	var present, matches bool
	err := q.QueryRow(ctx, `
SELECT c.state, b.ciphertext IS NOT NULL, coalesce(sha256(b.ciphertext) = c.ciphertext_digest, false)
  FROM oml.claims c
  LEFT JOIN oml.claim_bodies b
    ON b.tenant_id = c.tenant_id AND b.artifact_id = c.artifact_id AND b.version = c.version
 WHERE c.tenant_id = $1 AND c.artifact_id = $2 AND c.version = $3`, l.TenantID, *l.ArtifactID, *l.Version).Scan(&state, &present, &matches)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil // nothing to compare against; let the writer decide
	}
	if err != nil {
		return "", fmt.Errorf("check the held body of %s: %w", l.Claim(), err)
	}
	switch {
	case state != "promoted":
		return "", nil // retracted since: the writer no longer needs the body
	case !present:
		return fmt.Sprintf("the held body of %s is still missing from oml.claim_bodies", l.Claim()), nil
	case !matches:
		return fmt.Sprintf("the held body of %s still does not hash to the ciphertext digest the journal recorded", l.Claim()), nil
	}
	return "", nil
}
