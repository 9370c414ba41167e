// Package tables owns the layout of oml's lake: which Delta tables there
// are and where they live, how the lake writer marks its commits, and
// (rows.go) what a row of each table holds.
//
// It is the one home of these shapes. The lake writer (internal/lakewriter)
// writes them; reconcile, maintain, doctor, recovery, bronze and the CLI
// read them. None of those import the lake writer for the layout, so the
// lake writer is only the drain engine, and a change to the layout is made
// here, once.
//
// What it owns, all part of the lake format (changing any of it makes
// existing lakes unreadable or misread):
//
//   - Kind and TableKey: the four per-tenant tables, named as outbox
//     targets (bronze.events, silver.claims, gold.lineage,
//     gold.workareas), each at
//     <lake>/<tenant_id>/<kind dir> (TableKey.Path, TableKey.Store).
//   - AppID: the Delta txn appId of every lake-writer commit. A table's txn
//     version under it means "every outbox row for this table with seq ≤ v
//     is in it" (lakewriter invariant 3).
//   - BatchBounds and Anchor: the record the lake writer puts in every
//     commit's commitInfo under "omlBatch" (CommitInfoKey): the batch's
//     (start, end], and the database history it was read from (lakewriter
//     invariant 7). How the record is computed and checked is the lake
//     writer's; its shape is here.
//   - The rows (rows.go, schema.go): BronzeRow, SilverRow, GoldLineageRow
//     and GoldWorkareaRow (with Apply, the one definition of how a
//     workarea's row adds up its changes),
//     each table's Delta schema (Kind.Schema, TableKey.Spec), the mapping
//     of a typed row to its Parquet row (Row) and back (DecodeBronze, ...),
//     and named columns (BronzeSeq, SilverState, ...) whose value is the
//     column's position. A scan of some columns goes through a Projection
//     (SilverColumns(SilverArtifactID, SilverVersion)): its Columns are the
//     names to scan, its Decode reads the scanned rows. The schemas are
//     built from the column constants, so a constant, its name and its
//     position cannot disagree; the tests round-trip every column through
//     Parquet.
//
// Nobody outside this package reads a lake row by a bare index: a new
// column is added here, and the readers that need it name it (existing
// tables would still need migrating: the lake writer's checkSchema refuses
// a table whose columns are not these). Rejected: keeping rows as []any built
// and read by position in four packages (lakewriter, reconcile, maintain,
// recovery) — a column added to the schema and not to one of the readers'
// own lists put values in the wrong fields without an error.
//
// It holds no drain logic and reads no database.
package tables
