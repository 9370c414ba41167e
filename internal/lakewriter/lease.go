package lakewriter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/backoff"
)

// LeaseName is the lake writer's lease row in oml.lake_lease.
const LeaseName = "oml-lakewriter"

// Lease describes who holds the lake writer lease.
type Lease struct {
	Holder      string    `json:"holder"`
	Host        string    `json:"host"`
	PID         int32     `json:"pid"`
	AcquiredAt  time.Time `json:"acquired_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// NotLeaderError says another lake writer holds the lease.
type NotLeaderError struct{ Holder Lease }

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("another lake writer holds the lease: %s (host %s, pid %d, since %s, expires %s); only one may drain at a time",
		e.Holder.Holder, e.Holder.Host, e.Holder.PID, e.Holder.AcquiredAt.UTC().Format(time.RFC3339), e.Holder.ExpiresAt.UTC().Format(time.RFC3339))
}

// lease is the single-writer lease in PostgreSQL. It is an availability
// measure, not the correctness fence: if two writers ever run at once (a
// lease lost to a partition), Delta put-if-absent and the txn version check
// keep the lake exactly-once.
type lease struct {
	db     *pgxpool.Pool
	holder string
	host   string
	pid    int
	ttl    time.Duration
}

func newLease(db *pgxpool.Pool, holder string, ttl time.Duration) *lease {
	host, _ := os.Hostname()
	return &lease{db: db, holder: holder, host: host, pid: os.Getpid(), ttl: ttl}
}

// acquire takes or renews the lease. It fails with *NotLeaderError when
// another live holder has it. A holder that let go between the upsert and
// the read (the row is gone) is no holder: the upsert is tried again.
func (l *lease) acquire(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		var got string
		err := l.db.QueryRow(ctx, `
INSERT INTO oml.lake_lease AS l (name, holder, host, pid, acquired_at, heartbeat_at, expires_at)
VALUES ($1, $2, $3, $4, now(), now(), now() + $5 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder, host = EXCLUDED.host, pid = EXCLUDED.pid,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END,
    heartbeat_at = now(), expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
RETURNING holder`, LeaseName, l.holder, l.host, l.pid, l.ttl.Milliseconds()).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			cur, cerr := ReadLease(ctx, l.db)
			if cerr != nil {
				return cerr
			}
			if cur == nil && attempt < 3 {
				continue // released meanwhile: take it
			}
			if cur == nil {
				return fmt.Errorf("the lake writer lease changed hands %d times while acquiring it; retry", attempt+1)
			}
			return &NotLeaderError{Holder: *cur}
		}
		if err != nil {
			return fmt.Errorf("take the lake writer lease: %w", err)
		}
		return nil
	}
}

// keep renews the lease every ttl/3 in the background until stop is
// called. The returned context is cancelled (cause errLeaseLost) when
// another holder took the lease; lost is called then. A renewal that
// fails for another reason is passed to warn and retried.
func (l *lease) keep(ctx context.Context, ttl time.Duration, lost func(), warn func(error)) (context.Context, func()) {
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				err := l.acquire(lctx)
				var nl *NotLeaderError
				if errors.As(err, &nl) {
					lost()
					cancel(errLeaseLost)
					return
				}
				if err != nil && lctx.Err() == nil {
					warn(err)
				}
			}
		}
	}()
	return lctx, func() {
		cancel(nil)
		<-done
	}
}

// HoldLease takes the lake writer lease for a process that writes to the
// lake without being a Drainer (`oml lake repair`), so it never runs
// beside a drain. It waits up to wait for a live holder to let go (a
// drain stops between batches and releases it), then gives up with the
// *NotLeaderError naming the holder. The lease is renewed in the
// background; the returned context is cancelled if it is lost. release
// gives it up.
func HoldLease(ctx context.Context, db *pgxpool.Pool, holder string, ttl, wait time.Duration) (release func(), lctx context.Context, err error) {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	l := newLease(db, holder, ttl)
	deadline := time.Now().Add(wait)
	for {
		err = l.acquire(ctx)
		var nl *NotLeaderError
		if err == nil {
			break
		}
		if !errors.As(err, &nl) || !time.Now().Before(deadline) {
			return nil, ctx, err
		}
		pause := min(ttl/10, time.Until(deadline))
		if err := backoff.Sleep(ctx, max(pause, 10*time.Millisecond)); err != nil {
			return nil, ctx, err
		}
	}
	lctx, stop := l.keep(ctx, ttl, func() {}, func(error) {})
	return func() {
		stop()
		l.release(context.WithoutCancel(ctx))
	}, lctx, nil
}

// release gives the lease up (on a clean stop).
func (l *lease) release(ctx context.Context) {
	_, _ = l.db.Exec(ctx, `DELETE FROM oml.lake_lease WHERE name = $1 AND holder = $2`, LeaseName, l.holder)
}

// ReadLease returns the current lease row, or nil if nobody holds it.
func ReadLease(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*Lease, error) {
	var le Lease
	err := q.QueryRow(ctx, `SELECT holder, host, pid, acquired_at, heartbeat_at, expires_at FROM oml.lake_lease WHERE name = $1`, LeaseName).
		Scan(&le.Holder, &le.Host, &le.PID, &le.AcquiredAt, &le.HeartbeatAt, &le.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the lake writer lease: %w", err)
	}
	return &le, nil
}
