package lakewriter

import (
	"context"

	"github.com/google/uuid"
)

// PublishWitnessesNow runs the witness publisher for tenants as it runs
// after a batch that touched them (tests of the durability fence).
func (d *Drainer) PublishWitnessesNow(ctx context.Context, tenants []uuid.UUID) {
	var touched []TableKey
	for _, t := range tenants {
		touched = append(touched, TableKey{Tenant: t, Kind: Kinds[0]})
	}
	d.witnessTouched(ctx, touched)
}
