package chaincmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/store"
)

// verifyBundleRun is `oml chain verify --bundle FILE`: no database, no lake.
func verifyBundleRun(ctx context.Context, opts *VerifyOptions) error {
	res, err := bundle.VerifyFile(ctx, opts.Bundle, bundle.VerifyOptions{RootKeyID: opts.RootKeyID, Strict: opts.Strict})
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cliutil.FlagErrorf("no bundle at %s", opts.Bundle)
	case errors.Is(err, bundle.ErrMalformed):
		return cliutil.ConfigErrorf("%s: %v", opts.Bundle, err)
	case err != nil:
		return cliutil.AsConfigError(fmt.Errorf("verify %s: %w", opts.Bundle, err))
	}
	return printOffline(opts, res, "Bundle")
}

// verifyBronzeRun is `oml chain verify --bronze TABLE`: the lake's copy of
// one chain, with no database.
func verifyBronzeRun(ctx context.Context, opts *VerifyOptions) error {
	root, tenant, err := splitBronzeTable(opts.Bronze, opts.LakeURL())
	if err != nil {
		return err
	}
	lake, err := store.Open(ctx, root)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	res, err := bundle.VerifyBronze(ctx, lake, tenant, bundle.VerifyOptions{RootKeyID: opts.RootKeyID, Strict: opts.Strict})
	switch {
	case errors.Is(err, bundle.ErrMalformed):
		return cliutil.ConfigErrorf("%s: %v", opts.Bronze, err)
	case err != nil:
		return cliutil.AsConfigError(fmt.Errorf("verify %s: %w", opts.Bronze, err))
	}
	return printOffline(opts, res, "bronze.events table")
}

// splitBronzeTable turns --bronze into the lake root URL and the tenant.
func splitBronzeTable(table, lakeURL string) (string, uuid.UUID, error) {
	t := strings.TrimSuffix(table, "/")
	if !strings.HasSuffix(t, "/bronze/events") {
		return "", uuid.UUID{}, cliutil.FlagErrorf("--bronze %s: name a tenant's bronze table, a URL or path ending in TENANT_ID/bronze/events", table)
	}
	t = strings.TrimSuffix(t, "/bronze/events")
	i := strings.LastIndex(t, "/")
	idText, root := t[i+1:], ""
	if i >= 0 {
		root = t[:i]
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return "", uuid.UUID{}, cliutil.FlagErrorf("--bronze %s: %q is not a tenant id (the table path is TENANT_ID/bronze/events)", table, idText)
	}
	if !strings.Contains(table, "://") {
		if root != "" {
			return "", uuid.UUID{}, cliutil.FlagErrorf("--bronze %s: give a URL, or TENANT_ID/bronze/events under --lake", table)
		}
		if lakeURL == "" {
			return "", uuid.UUID{}, cliutil.FlagErrorf("--bronze %s is relative: pass --lake (or OML_LAKE_URL), or give the table's URL", table)
		}
		root = lakeURL
	}
	return root, id, nil
}

// printOffline prints an offline verification (bundle or bronze table).
func printOffline(opts *VerifyOptions, res *bundle.Result, what string) error {
	io := opts.IO
	format, _ := opts.Format()
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
		if what == "Bundle" {
			fmt.Fprintf(io.Out, "Bundle of %s exported %s: %d event(s) from %s.\n", name, cliutil.Time(res.Header.ExportedAt), res.Events, from)
		} else {
			fmt.Fprintf(io.Out, "The %s of %s: %d event(s) from %s.\n", what, name, res.Events, from)
		}
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
		return cliutil.Findingsf("the %s does not verify: see the findings above (docs/chain-bundle.md)", strings.ToLower(what))
	}
	return nil
}
