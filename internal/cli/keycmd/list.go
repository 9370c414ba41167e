package keycmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keyring"
)

// ListOptions are `oml key list`'s dependencies.
type ListOptions struct {
	F *cliutil.Factory
}

// NewCmdList builds `oml key list`.
func NewCmdList(f *cliutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{F: f}
	return &cobra.Command{
		Use:   "list",
		Short: "Every deployment key the provider chain issued: role, issued, revoked, last used",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *ListOptions) error {
	f := opts.F
	format, _ := f.Format()
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return err
	}
	ks, err := keyring.List(ctx, pool)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, ks)
	}
	rows := make([][]string, 0, len(ks))
	for _, k := range ks {
		revoked, last := "-", "-"
		if k.RevokedSeq != nil && k.RevokedAt != nil {
			revoked = fmt.Sprintf("%s (provider seq %d)", cliutil.Time(*k.RevokedAt), *k.RevokedSeq)
		}
		if k.LastUsedAt != nil {
			last = cliutil.Time(*k.LastUsedAt)
		}
		rows = append(rows, []string{k.KeyID, k.Role, fmt.Sprintf("%s (provider seq %d)", cliutil.Time(k.IssuedAt), k.IssuedSeq), revoked, last})
	}
	return cliutil.Table(f.IO, []string{"KEY ID", "ROLE", "ISSUED", "REVOKED", "LAST SIGNED"}, rows)
}
