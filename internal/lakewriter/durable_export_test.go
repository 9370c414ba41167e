package lakewriter

import (
	"context"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/tables"
)

// PublishWitnessesNow runs the witness publisher for tenants as it runs
// after a batch that touched them (tests of the durability fence).
func (d *Drainer) PublishWitnessesNow(ctx context.Context, tenants []uuid.UUID) {
	var touched []tables.TableKey
	for _, t := range tenants {
		touched = append(touched, tables.TableKey{Tenant: t, Kind: tables.Kinds[0]})
	}
	d.witnessTouched(ctx, touched)
}
