package maintain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecide_FromMeasurements(t *testing.T) {
	t.Parallel()
	healthy := Measurements{
		Exists: true, Version: 500, CheckpointVersion: 480, CommitsSinceCheckpoint: 20, CheckpointInterval: 100,
		LiveFiles: 10, LiveBytes: 10 << 30, SmallFiles: 3, SmallBytes: 3 << 20,
		Tombstones: 40, TombstonedBytes: 1 << 30, ExpiredTombstones: 5, ExpiredBytes: 100 << 20,
		Retention: 7 * 24 * time.Hour,
	}
	with := func(f func(*Measurements)) Measurements {
		m := healthy
		f(&m)
		return m
	}
	for _, tc := range []struct {
		name   string
		m      Measurements
		policy Policy
		want   []Task
	}{
		{"missing table needs nothing", Measurements{}, Policy{}, nil},
		{"healthy table needs nothing", healthy, Policy{}, nil},
		{"commits past the interval: checkpoint", with(func(m *Measurements) { m.CommitsSinceCheckpoint = 100 }), Policy{}, []Task{TaskCheckpoint}},
		{"one commit short of the interval: nothing", with(func(m *Measurements) { m.CommitsSinceCheckpoint = 99 }), Policy{}, nil},
		{"table's own interval is used", with(func(m *Measurements) { m.CommitsSinceCheckpoint = 10; m.CheckpointInterval = 10 }), Policy{}, []Task{TaskCheckpoint}},
		{"policy interval overrides the table's", with(func(m *Measurements) { m.CommitsSinceCheckpoint = 20 }), Policy{CheckpointInterval: 20}, []Task{TaskCheckpoint}},
		{"never checkpointed, many commits", with(func(m *Measurements) { m.CheckpointVersion = -1; m.CommitsSinceCheckpoint = 501 }), Policy{}, []Task{TaskCheckpoint}},
		{"many small files: optimize", with(func(m *Measurements) { m.SmallFiles = 16 }), Policy{}, []Task{TaskOptimize}},
		{"few small files: no optimize", with(func(m *Measurements) { m.SmallFiles = 15 }), Policy{}, nil},
		{"custom small-file threshold", with(func(m *Measurements) { m.SmallFiles = 3 }), Policy{MinSmallFiles: 3}, []Task{TaskOptimize}},
		{"optimize's own commit tips the checkpoint interval", with(func(m *Measurements) { m.SmallFiles = 50; m.CommitsSinceCheckpoint = 99 }), Policy{}, []Task{TaskOptimize, TaskCheckpoint}},
		{"erased body in a live file: erase bodies, whatever the file sizes", with(func(m *Measurements) { m.ErasedBodyFiles = 1 }), Policy{}, []Task{TaskEraseBodies}},
		{"erasure before compaction before checkpoint", with(func(m *Measurements) { m.ErasedBodyFiles = 2; m.SmallFiles = 40; m.CommitsSinceCheckpoint = 98 }), Policy{}, []Task{TaskEraseBodies, TaskOptimize, TaskCheckpoint}},
		{"expired bytes past a quarter of live: vacuum", with(func(m *Measurements) { m.ExpiredBytes = 3 << 30 }), Policy{}, []Task{TaskVacuum}},
		{"expired bytes below a quarter: no vacuum", with(func(m *Measurements) { m.ExpiredBytes = 2 << 30 }), Policy{}, nil},
		{"many expired tombstones: vacuum", with(func(m *Measurements) { m.ExpiredTombstones = 100 }), Policy{}, []Task{TaskVacuum}},
		{"unexpired tombstones never vacuum", with(func(m *Measurements) { m.ExpiredTombstones, m.ExpiredBytes, m.TombstonedBytes = 0, 0, 50<<30 }), Policy{}, nil},
		{"expired tombstone holding an erased body: vacuum now", with(func(m *Measurements) { m.ErasedTombstones, m.ErasedTombstonesExpired = 2, 1 }), Policy{}, []Task{TaskVacuum}},
		{"unexpired tombstone holding an erased body: wait for the retention", with(func(m *Measurements) { m.ErasedTombstones = 2 }), Policy{}, nil},
		{"empty table, expired tombstones: vacuum", with(func(m *Measurements) { m.LiveBytes, m.ExpiredBytes = 0, 1 }), Policy{}, []Task{TaskVacuum}},
		{"old log behind a checkpoint: cleanup", with(func(m *Measurements) { m.LogCleanable = 30 }), Policy{}, []Task{TaskCleanupLog}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []Task
			for _, s := range Decide(tc.m, tc.policy) {
				require.NotEmpty(t, s.Reason)
				got = append(got, s.Task)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMayHoldErasedBody_FromStats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stats string
		want  bool
	}{
		{``, true},
		{`not json`, true},
		{`{"numRecords":3,"minValues":{"state":"promoted"},"maxValues":{"state":"promoted"},"nullCount":{"body":0}}`, false},
		{`{"numRecords":3,"minValues":{"state":"demoted"},"maxValues":{"state":"promoted"},"nullCount":{"body":0}}`, true},
		{`{"numRecords":3,"minValues":{"state":"erased"},"maxValues":{"state":"erased"},"nullCount":{"body":3}}`, false},
		{`{"numRecords":3,"minValues":{"state":"erased"},"maxValues":{"state":"erased"},"nullCount":{"body":2}}`, true},
		{`{"numRecords":3,"minValues":{"state":"demoted"},"maxValues":{"state":"demoted"}}`, false},
		{`{"numRecords":3}`, true},
	} {
		require.Equal(t, tc.want, mayHoldErasedBody(tc.stats), tc.stats)
	}
}
