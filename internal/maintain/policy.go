package maintain

import (
	"fmt"
	"time"
)

// StateErased is silver's state of an erased claim.
const StateErased = "erased"

// DefaultTargetSize is the size compaction aims for and below which a file
// counts as small.
const DefaultTargetSize int64 = 128 << 20

// Policy holds the thresholds Decide applies. The zero value means the
// defaults below.
type Policy struct {
	// CheckpointInterval overrides the table's delta.checkpointInterval
	// (else 100): checkpoint once this many commits were made since the
	// last one. The lake writer checkpoints as it goes; maintain catches
	// what a crashed or stopped writer left behind.
	CheckpointInterval int64
	// MinSmallFiles is how many small files make compaction worth its
	// read-and-rewrite cost (default 16). Below it a reader pays a few
	// extra GETs; above it, one per file, and the lake writer's MERGE
	// prunes worse because small files' key ranges overlap.
	MinSmallFiles int
	// TargetSize is the compaction target (default 128 MiB).
	TargetSize int64
	// VacuumFraction: vacuum when expired tombstoned bytes reach this share
	// of the live bytes (default 0.25, the "awkward" line of chapter 10's
	// scale note: storage paid for data nobody can read).
	VacuumFraction float64
	// VacuumMinFiles: vacuum when this many tombstones have expired,
	// whatever their size (default 100; many small objects cost listing
	// and requests even when their bytes are few).
	VacuumMinFiles int
}

func (p Policy) withDefaults() Policy {
	if p.MinSmallFiles <= 0 {
		p.MinSmallFiles = 16
	}
	if p.TargetSize <= 0 {
		p.TargetSize = DefaultTargetSize
	}
	if p.VacuumFraction <= 0 {
		p.VacuumFraction = 0.25
	}
	if p.VacuumMinFiles <= 0 {
		p.VacuumMinFiles = 100
	}
	return p
}

// Task is one maintenance step.
type Task string

// The tasks, in the order Run performs them: erasure first (it is an
// obligation with a deadline), then compaction (it reads the bodies the
// erasure already nulled), then the checkpoint (so it covers both
// rewrites), then vacuum and log cleanup (which only delete).
const (
	TaskEraseBodies Task = "erase-bodies"
	TaskOptimize    Task = "optimize"
	TaskCheckpoint  Task = "checkpoint"
	TaskVacuum      Task = "vacuum"
	TaskCleanupLog  Task = "cleanup-log"
)

// Step is a task and the measurement that made it due.
type Step struct {
	Task   Task   `json:"task"`
	Reason string `json:"reason"`
}

// Decide says what is due for a table, and why, from its measurements
// alone. A table that does not exist needs nothing.
func Decide(m Measurements, p Policy) []Step {
	p = p.withDefaults()
	if !m.Exists {
		return nil
	}
	var steps []Step
	if m.ErasedBodyFiles > 0 {
		steps = append(steps, Step{TaskEraseBodies, fmt.Sprintf("%d live file(s) may still hold an erased claim's ciphertext", m.ErasedBodyFiles)})
	}
	if m.SmallFiles >= p.MinSmallFiles {
		steps = append(steps, Step{TaskOptimize, fmt.Sprintf("%d small files (< %s), threshold %d", m.SmallFiles, humanBytes(p.TargetSize), p.MinSmallFiles)})
	}
	interval := m.CheckpointInterval
	if p.CheckpointInterval > 0 {
		interval = p.CheckpointInterval
	}
	if interval <= 0 {
		interval = 100
	}
	// Any rewrite above adds a commit; checkpoint after it when the count
	// would reach the interval anyway, so a reader never replays past it.
	since := m.CommitsSinceCheckpoint
	for _, s := range steps {
		if s.Task == TaskEraseBodies || s.Task == TaskOptimize {
			since++
		}
	}
	if since >= interval {
		steps = append(steps, Step{TaskCheckpoint, fmt.Sprintf("%d commits since the last checkpoint, interval %d", since, interval)})
	}
	switch {
	case m.ErasedTombstonesExpired > 0:
		steps = append(steps, Step{TaskVacuum, fmt.Sprintf("%d expired tombstone(s) may hold an erased claim's ciphertext", m.ErasedTombstonesExpired)})
	case m.ExpiredTombstones >= p.VacuumMinFiles:
		steps = append(steps, Step{TaskVacuum, fmt.Sprintf("%d expired tombstones, threshold %d", m.ExpiredTombstones, p.VacuumMinFiles)})
	case m.ExpiredBytes > 0 && float64(m.ExpiredBytes) >= p.VacuumFraction*float64(m.LiveBytes):
		steps = append(steps, Step{TaskVacuum, fmt.Sprintf("%s of expired tombstones is %.0f%% of %s live, threshold %.0f%%",
			humanBytes(m.ExpiredBytes), 100*float64(m.ExpiredBytes)/float64(max(m.LiveBytes, 1)), humanBytes(m.LiveBytes), 100*p.VacuumFraction)})
	}
	if m.LogCleanable > 0 {
		steps = append(steps, Step{TaskCleanupLog, fmt.Sprintf("%d commits older than the log retention behind a checkpoint", m.LogCleanable)})
	}
	return steps
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// HumanBytes formats a byte count for tables (1.5 MiB).
func HumanBytes(n int64) string { return humanBytes(n) }

// HumanDuration formats a retention (7d, 36h, 90m).
func HumanDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
