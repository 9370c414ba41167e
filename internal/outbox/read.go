package outbox

import (
	"context"
	"fmt"
)

// Limits bound a batch when it is first cut. Zero means unlimited.
type Limits struct {
	Rows  int
	Bytes int
}

// Cut chooses a batch end inside the stable prefix (frontier, stable]: the
// largest end such that the rows in (frontier, end] respect the limits, and
// stable itself when every row fits (so trailing gaps are consumed too). It
// returns the end and the number of rows in (frontier, end]. Cut reads only
// seqs and sizes, never payloads it does not need.
func Cut(ctx context.Context, q Querier, frontier, stable int64, lim Limits) (end int64, n int, err error) {
	if stable <= frontier {
		return frontier, 0, nil
	}
	limit := lim.Rows
	if limit <= 0 {
		limit = -1
	}
	// Ask for one row beyond the limit so "everything fits" is known.
	// A row's weight counts the held body a materialize row will carry
	// into the lake, not just the outbox payload.
	query := `SELECT o.seq, 64 + length(o.target) + length(o.op) + coalesce(length(o.artifact_id), 0) + octet_length(o.payload::text)
       + coalesce((SELECT octet_length(b.ciphertext) FROM oml.claim_bodies b
                   WHERE o.op = 'materialize' AND b.tenant_id = o.tenant_id
                     AND b.artifact_id = o.artifact_id AND b.version = o.version), 0)
FROM oml.outbox o WHERE o.seq > $1 AND o.seq <= $2 ORDER BY o.seq`
	args := []any{frontier, stable}
	if limit > 0 {
		query += ` LIMIT $3`
		args = append(args, limit+1)
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox: cut a batch in (%d, %d]: %w", frontier, stable, err)
	}
	defer rows.Close()
	end, bytes := frontier, 0
	full := false
	for rows.Next() {
		var seq int64
		var size int
		if err := rows.Scan(&seq, &size); err != nil {
			return 0, 0, fmt.Errorf("outbox: cut: %w", err)
		}
		if (limit > 0 && n == limit) || (lim.Bytes > 0 && n > 0 && bytes+size > lim.Bytes) {
			full = true
			break
		}
		end, bytes, n = seq, bytes+size, n+1
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("outbox: cut: %w", err)
	}
	if !full {
		end = stable
	}
	return end, n, nil
}
