package chaincmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
)

// verifyBundleRun is `oml chain verify --bundle FILE`: no database, no lake.
func verifyBundleRun(ctx context.Context, opts *VerifyOptions) error {
	f := opts.F
	io := f.IO
	format, _ := f.Format()
	res, err := bundle.VerifyFile(ctx, opts.Bundle, bundle.VerifyOptions{RootKeyID: opts.RootKeyID, Strict: opts.Strict})
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cliutil.FlagErrorf("no bundle at %s", opts.Bundle)
	case errors.Is(err, bundle.ErrMalformed):
		return cliutil.ConfigErrorf("%s: %v", opts.Bundle, err)
	case err != nil:
		return cliutil.AsConfigError(fmt.Errorf("verify %s: %w", opts.Bundle, err))
	}
	if format == cliutil.FormatJSON {
		doc := struct {
			OK bool `json:"ok"`
			*bundle.Result
		}{res.OK(), res}
		if err := cliutil.WriteJSON(io.Out, doc); err != nil {
			return err
		}
	} else {
		name := res.Header.TenantName
		if name == "" {
			name = res.Header.Tenant.String()
		}
		from := "its genesis"
		if res.Header.Anchor != nil {
			from = fmt.Sprintf("the anchor seq %d (%s) — trust that anchor from elsewhere", res.Header.Anchor.Seq, short(res.Header.Anchor.Hash))
		}
		fmt.Fprintf(io.Out, "Bundle of %s exported %s: %d event(s) from %s.\n", name, cliutil.Time(res.Header.ExportedAt), res.Events, from)
		if len(res.Findings) == 0 {
			fmt.Fprintf(io.Out, "Verified: every event links, hashes and is signed by a key the provider chain issued, through seq %d (%s).\n",
				res.HeadSeq, short(res.HeadHash))
		} else {
			rows := make([][]string, 0, len(res.Findings))
			for _, fd := range res.Findings {
				who := fd.Tenant.String()
				if fd.Tenant == chainverify.ProviderTenant {
					who = "provider"
				}
				rows = append(rows, []string{who, fmt.Sprint(fd.Seq), string(fd.Reason), fd.Detail})
			}
			if err := cliutil.Table(io, []string{"CHAIN", "FIRST BAD SEQ", "REASON", "DETAIL"}, rows); err != nil {
				return err
			}
		}
		if len(res.Witnesses) > 0 {
			rows := make([][]string, 0, len(res.Witnesses))
			for _, w := range res.Witnesses {
				rows = append(rows, []string{w.Source, fmt.Sprint(w.Seq), short(w.Hash), w.Status, w.Detail})
			}
			fmt.Fprintln(io.Out)
			if err := cliutil.Table(io, []string{"SIGNED HEAD", "SEQ", "HASH", "STATUS", "DETAIL"}, rows); err != nil {
				return err
			}
		}
		if res.CoveredTo > 0 {
			fmt.Fprintf(io.ErrOut, "complete through seq %d: a valid signed head there agrees with the chain\n", res.CoveredTo)
		} else {
			fmt.Fprintln(io.ErrOut, "oml: note: no valid signed head covers the chain: a bundle cut short before its last event cannot be told from a complete one")
		}
		if !res.RootPinned {
			fmt.Fprintf(io.ErrOut, "oml: note: the root key (%s) was taken from the bundle itself; pin it with --root-key-id to prove the bundle is this deployment's\n", res.Header.RootKeyID)
		}
	}
	if !res.OK() {
		if format == cliutil.FormatJSON {
			return cliutil.ErrFindings
		}
		return cliutil.Findingsf("the bundle does not verify: see the findings above (docs/chain-bundle.md)")
	}
	return nil
}
