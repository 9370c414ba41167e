// Package lineage reads an artifact's history from the lake's
// gold.lineage tables, behind `oml lake lineage`: every change to each
// promoted version of the artifact (its promotion, then demotions,
// reassignments, simulation ends, erasure), in journal order, as the table
// holds it at its current version or at an earlier one (Delta time travel,
// by table version or by commit time).
//
// It reads the lake only (never PostgreSQL): the lake is the audit copy,
// and `oml reconcile` is what checks that copy against the journal. The
// rows' shape is internal/lake/tables' (GoldLineageRow); the lake writer
// writes them (internal/lakewriter, lineage.go).
package lineage
