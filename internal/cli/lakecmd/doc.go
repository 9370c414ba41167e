// Package lakecmd is `oml lake`: the commands on the Delta lake. This
// package owns the parent command, TABLE resolution (a full URL, or
// TENANT/LAYER/NAME under --lake/OML_LAKE_URL) and the read-only views
// `inspect` and `history`; other subcommands (drain, status, maintenance)
// live one verb per file and are added to the parent explicitly in NewCmd.
//
// The views never write to a table. A missing table, a bad URL and a table
// the strict Delta gate refuses are one-line errors with exit code 2.
package lakecmd
