package keycmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keyring"
)

// ListOptions are what `oml key list`'s run function needs, as functions
// (NewCmdList fills them from the Factory; a test replaces them).
type ListOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Keys opens the database and lists the issued keys (keyring.List);
	// its errors are the command's.
	Keys func(ctx context.Context) ([]keyring.Key, error)
}

// NewCmdList builds `oml key list`.
func NewCmdList(f *cliutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IO, Format: f.Format, Keys: cliutil.Query(f, keyring.List)}
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
	format, _ := opts.Format()
	ks, err := opts.Keys(ctx)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, ks)
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
	return cliutil.Table(opts.IO, []string{"KEY ID", "ROLE", "ISSUED", "REVOKED", "LAST SIGNED"}, rows)
}
