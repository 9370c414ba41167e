// Package keycmd is `oml key`: generate the deployment's ed25519 signing
// key file (internal/keys).
package keycmd

import (
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
)

// NewCmd builds `oml key`.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage the deployment's ed25519 signing key",
		Long: `The deployment key signs every journal event. It lives in a file
(PEM, PKCS#8 "PRIVATE KEY", mode 0600) given to journal writers with
--signing-key or OML_SIGNING_KEY_FILE. oml init registers it on the provider
chain with key.issued. Keep it secret; anyone holding it can sign events.
oml key rotate issues a new key, oml key revoke stops trusting an old one,
oml key list shows them all (docs/chain-verify.md, "Key rotation and
revocation").`,
	}
	cmd.AddCommand(NewCmdGenerate(f, nil), NewCmdShow(f, nil), NewCmdList(f, nil), NewCmdRotate(f, nil), NewCmdRevoke(f, nil))
	return cmd
}
