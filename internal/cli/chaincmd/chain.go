// Package chaincmd is `oml chain`: verify every journal chain end to end
// (verify), show stored, checkpointed and witnessed heads (head), publish
// signed heads outside PostgreSQL (witness), and recover after a failover
// that lost a tail (restore-tail, accept-fork). The verification itself
// lives in internal/chainverify, the signed heads in internal/witness, the
// recovery in internal/recovery; this package is flags, output and exit
// codes.
package chaincmd

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/witness"
)

// NewCmd builds `oml chain` and its subcommands.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Verify the signed per-tenant journal chains and their witnessed heads",
		Long: `Commands for the journal's per-tenant hash chains.

Every journal event carries its tenant's seq, the previous event's hash, its
own hash and an ed25519 signature by the deployment key. oml chain verify
checks all of it from the stored rows; oml chain witness keeps signed copies
of the heads in the lake's object store so that a failover that lost
committed events is caught; oml chain head shows where every chain stands;
oml chain export writes a bundle an auditor verifies offline with
oml chain verify --bundle. After a failover that lost a tail, oml chain
restore-tail puts the lost events back from the lake's bronze.events, and
oml chain accept-fork accepts a fork the database already wrote over. See
docs/chain-verify.md, docs/chain-bundle.md and docs/runbooks/failover.md.`,
	}
	cmd.AddCommand(NewCmdVerify(f, nil), NewCmdHead(f, nil), NewCmdWitness(f, nil), NewCmdExport(f, nil),
		NewCmdRestoreTail(f, nil), NewCmdAcceptFork(f, nil))
	return cmd
}

// resolveTenant accepts a tenant name, a tenant id, or the provider's name
// (_provider, or its reserved alias provider).
func resolveTenant(ctx context.Context, pool *pgxpool.Pool, s string) (uuid.UUID, error) {
	if tenant.IsProviderName(s) {
		return chainverify.ProviderTenant, nil
	}
	if id, err := uuid.Parse(s); err == nil {
		return id, nil
	}
	id, err := tenant.IDByName(ctx, pool, s)
	if errors.Is(err, tenant.ErrUnknown) {
		return uuid.UUID{}, cliutil.FlagErrorf("no tenant is named %q: give a tenant name or id (see oml tenant list)", s)
	}
	if err != nil {
		return uuid.UUID{}, cliutil.AsConfigError(err)
	}
	return id, nil
}

// onlyTenant is the --tenant filter: nil (every tenant) when s is empty.
func onlyTenant(ctx context.Context, pool *pgxpool.Pool, s string) (*uuid.UUID, error) {
	if s == "" {
		return nil, nil
	}
	id, err := resolveTenant(ctx, pool, s)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// tenantNames maps tenant ids to names (the provider is tenant.ProviderName,
// the one spelling every command shows).
func tenantNames(ctx context.Context, pool *pgxpool.Pool) (map[uuid.UUID]string, error) {
	names, err := tenant.Names(ctx, pool)
	if err != nil {
		return nil, err
	}
	names[chainverify.ProviderTenant] = tenant.ProviderName
	return names, nil
}

// issuedKeys returns the deployment's issued public keys by id, for
// checking witness signatures.
func issuedKeys(ctx context.Context, pool *pgxpool.Pool) (witness.KeyLookup, error) {
	return chainverify.IssuedKeys(ctx, pool)
}

func short(hexHash string) string {
	if len(hexHash) > 16 {
		return hexHash[:16]
	}
	if hexHash == "" {
		return "-"
	}
	return hexHash
}
