// Package tenantcmd is `oml tenant`: create tenants (provider-chain
// tenant.created plus the tenant's genesis) and list them.
package tenantcmd

import (
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/tenant"
)

// NewCmd builds `oml tenant`.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Create and list tenants",
		Long: `Every tenant has its own hash chain. Creating one appends tenant.created to
the provider chain and opens the tenant's chain with tenant.genesis, which
references that provider event by seq and hash, in one transaction.`,
	}
	cmd.AddCommand(NewCmdCreate(f, nil), NewCmdList(f, nil))
	return cmd
}

type tenantJSON struct {
	tenant.Tenant
	Created bool `json:"created"`
}
