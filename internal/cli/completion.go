package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/tenant"
)

// completionTimeout bounds the database look-ups behind a shell's TAB: a
// slow or absent database must cost the operator a moment, not a hang.
const completionTimeout = 3 * time.Second

// registerCompletions teaches shell completion what oml's arguments name:
// tenants for every --tenant flag, TENANT/LAYER/NAME tables for `lake
// inspect` and `lake history`, open dead-letter ids for `deadletter show`
// and `reenqueue`. All of it comes from the database; without one (or on
// any error) completion offers nothing rather than files.
func registerCompletions(f *cliutil.Factory, c *cobra.Command) {
	for _, sub := range c.Commands() {
		registerCompletions(f, sub)
	}
	if c.Flags().Lookup("tenant") != nil {
		_ = c.RegisterFlagCompletionFunc("tenant", func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
			return filter(completeTenants(cmd.Context(), f), prefix), cobra.ShellCompDirectiveNoFileComp
		})
	}
	switch c.CommandPath() {
	case "oml lake inspect", "oml lake history":
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []string
			for _, t := range completeTenants(cmd.Context(), f) {
				for _, k := range tables.Kinds {
					out = append(out, t+"/"+k.Dir())
				}
			}
			return filter(out, prefix), cobra.ShellCompDirectiveNoFileComp
		}
	case "oml deadletter show", "oml deadletter reenqueue":
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			if c.Name() == "show" && len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return filter(completeDeadLetters(cmd.Context(), f, args), prefix), cobra.ShellCompDirectiveNoFileComp
		}
	}
}

func completionDB(ctx context.Context, f *cliutil.Factory) (deadletter.Querier, context.CancelFunc, bool) {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.DatabaseURL() == "" {
		return nil, func() {}, false
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	pool, err := f.DB(ctx)
	if err != nil {
		cancel()
		return nil, func() {}, false
	}
	return pool, cancel, true
}

// completionQuery is list's result, the query bounded by
// completionTimeout; false without a database or on any error.
func completionQuery[T any](ctx context.Context, f *cliutil.Factory, list func(context.Context, deadletter.Querier) ([]T, error)) ([]T, bool) {
	q, cancel, ok := completionDB(ctx, f)
	defer cancel()
	if !ok {
		return nil, false
	}
	ctx, stop := context.WithTimeout(context.Background(), completionTimeout)
	defer stop()
	rows, err := list(ctx, q)
	if err != nil {
		return nil, false
	}
	return rows, true
}

// completeTenants lists tenant names, the provider's included.
func completeTenants(ctx context.Context, f *cliutil.Factory) []string {
	ts, ok := completionQuery(ctx, f, func(ctx context.Context, q deadletter.Querier) ([]tenant.Tenant, error) { return tenant.List(ctx, q) })
	if !ok {
		return nil
	}
	out := make([]string, 0, len(ts)+1)
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return append(out, tenant.ProviderName)
}

// completeDeadLetters lists open dead-letter ids (not already on the
// command line), each with its claim and error as the description.
func completeDeadLetters(ctx context.Context, f *cliutil.Factory, given []string) []string {
	ls, ok := completionQuery(ctx, f, func(ctx context.Context, q deadletter.Querier) ([]deadletter.Letter, error) {
		return deadletter.List(ctx, q, deadletter.ListOptions{})
	})
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for _, g := range given {
		seen[g] = true
	}
	var out []string
	for _, l := range ls {
		id := fmt.Sprint(l.ID)
		if seen[id] {
			continue
		}
		desc := strings.Join(strings.Fields(l.TenantName+" "+l.Claim()+": "+l.Error), " ")
		out = append(out, id+"\t"+cliutil.FitLine(desc, 60))
	}
	return out
}

func filter(cands []string, prefix string) []string {
	var out []string
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}
