package replication_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/replication"
)

func TestParsePolicy_AutoNoneCountAndUsageErrors(t *testing.T) {
	for in, want := range map[string]replication.Policy{
		"auto": {Mode: replication.ModeAuto}, "AUTO": {Mode: replication.ModeAuto}, "none": {Mode: replication.ModeNone},
		"1": {Mode: replication.ModeCount, N: 1}, " 3 ": {Mode: replication.ModeCount, N: 3},
	} {
		got, err := replication.ParsePolicy(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "0", "-1", "all", "1.5"} {
		_, err := replication.ParsePolicy(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "--durable-on")
	}
	p, err := replication.ParsePolicy(replication.DefaultPolicyText)
	require.NoError(t, err)
	require.Equal(t, replication.DefaultPolicy, p)
	require.Equal(t, replication.Policy{}, replication.DefaultPolicy, "the zero Policy is the default")
	require.False(t, replication.Policy{Mode: replication.ModeNone}.Waits())
}

func TestLSN_RoundTripsPostgresForm(t *testing.T) {
	l, err := replication.ParseLSN("16/B374D848")
	require.NoError(t, err)
	require.Equal(t, replication.LSN(0x16_B374D848), l)
	require.Equal(t, "16/B374D848", l.String())
	_, err = replication.ParseLSN("16B374D848")
	require.Error(t, err)
}

// The insert position right after a page header is reported as the first
// byte past it; the boundary itself covers every record (see InsertCover).
func TestInsertCover_PageHeaderPositionsFallBackToTheBoundary(t *testing.T) {
	const blk, seg = 8192, 16 << 20
	require.Equal(t, replication.LSN(3*blk), replication.InsertCover(3*blk+24, blk, seg), "short header")
	require.Equal(t, replication.LSN(2*seg), replication.InsertCover(2*seg+40, blk, seg), "long header at a segment start")
	require.Equal(t, replication.LSN(3*blk+32), replication.InsertCover(3*blk+32, blk, seg), "mid-page: unchanged")
	require.Equal(t, replication.LSN(3*blk+40), replication.InsertCover(3*blk+40, blk, seg), "40 bytes into a non-first page: unchanged")
}

func standby(name string, flush replication.LSN) replication.Standby {
	return replication.Standby{PID: 7, Name: name, Client: "local", State: "streaming", SyncState: "async", Flush: flush, HasFlush: true}
}

func TestEvaluate_AutoWaitsForEveryStreamingStandby_NamingTheLaggingOne(t *testing.T) {
	r := replication.Reading{Standbys: []replication.Standby{standby("east", 200), standby("west", 150)}}
	v, err := replication.Evaluate(replication.Policy{}, 180, r)
	require.NoError(t, err)
	require.False(t, v.Durable)
	require.Len(t, v.Waiting, 1)
	require.Equal(t, "west", v.Waiting[0].Standby)
	require.EqualValues(t, 30, v.Waiting[0].BehindBytes)
	require.Contains(t, v.Reason, "west")
	v, err = replication.Evaluate(replication.Policy{}, 150, r)
	require.NoError(t, err)
	require.True(t, v.Durable)

	// A single node, or every standby gone: nothing to wait for.
	v, err = replication.Evaluate(replication.Policy{}, 180, replication.Reading{})
	require.NoError(t, err)
	require.True(t, v.Durable)
}

func TestEvaluate_NotCounted_CatchupLogicalAndNoFlushReport(t *testing.T) {
	catchup := standby("late", 0)
	catchup.State = "catchup"
	logical := standby("sub", 0)
	logical.Logical = true
	backup := standby("pg_basebackup", 0)
	backup.HasFlush = false
	r := replication.Reading{Standbys: []replication.Standby{catchup, logical, backup}}
	v, err := replication.Evaluate(replication.Policy{}, 100, r)
	require.NoError(t, err)
	require.True(t, v.Durable, "none of them is a failover target to wait for")
	v, err = replication.Evaluate(replication.Policy{Mode: replication.ModeCount, N: 1}, 100, r)
	require.NoError(t, err)
	require.False(t, v.Durable)
	require.Equal(t, 1, v.Missing)
	require.Contains(t, v.Reason, "none is streaming")
}

func TestEvaluate_CountNeedsNFlushed(t *testing.T) {
	r := replication.Reading{Standbys: []replication.Standby{standby("a", 100), standby("b", 50), standby("c", 120)}}
	v, err := replication.Evaluate(replication.Policy{Mode: replication.ModeCount, N: 2}, 100, r)
	require.NoError(t, err)
	require.True(t, v.Durable)
	v, err = replication.Evaluate(replication.Policy{Mode: replication.ModeCount, N: 3}, 100, r)
	require.NoError(t, err)
	require.False(t, v.Durable)
	require.Contains(t, v.Reason, "b (local")
	v, err = replication.Evaluate(replication.Policy{Mode: replication.ModeCount, N: 4}, 100, r)
	require.NoError(t, err)
	require.False(t, v.Durable)
	require.Equal(t, 1, v.Missing)
}

// A walsender whose details the role may not see is never taken as flushed.
func TestEvaluate_HiddenWalsenders_AreAnErrorWhenTheyCouldMatter(t *testing.T) {
	r := replication.Reading{Hidden: 1, Role: "oml_lakewriter"}
	_, err := replication.Evaluate(replication.Policy{}, 100, r)
	var hidden *replication.HiddenError
	require.True(t, errors.As(err, &hidden))
	require.Contains(t, err.Error(), "GRANT pg_monitor TO oml_lakewriter")
	_, err = replication.Evaluate(replication.Policy{Mode: replication.ModeCount, N: 1}, 100, r)
	require.True(t, errors.As(err, &hidden))

	// N already satisfied by visible standbys: the hidden one cannot change it.
	r.Standbys = []replication.Standby{standby("a", 100)}
	v, err := replication.Evaluate(replication.Policy{Mode: replication.ModeCount, N: 1}, 100, r)
	require.NoError(t, err)
	require.True(t, v.Durable)
	// none never looks.
	v, err = replication.Evaluate(replication.Policy{Mode: replication.ModeNone}, 100, replication.Reading{Hidden: 3})
	require.NoError(t, err)
	require.True(t, v.Durable)
}

func TestParseStandbyNames(t *testing.T) {
	for in, want := range map[string]struct {
		method  string
		num     int
		members []string
	}{
		"":                     {"", 0, nil},
		"s1":                   {"FIRST", 1, []string{"s1"}},
		"s1, s2":               {"FIRST", 1, []string{"s1", "s2"}},
		"FIRST 2 (s1, s2, s3)": {"FIRST", 2, []string{"s1", "s2", "s3"}},
		"2 (s1, s2)":           {"FIRST", 2, []string{"s1", "s2"}},
		`ANY 2 ("a b", c, *)`:  {"ANY", 2, []string{"a b", "c", "*"}},
		"any 1 (x)":            {"ANY", 1, []string{"x"}},
		"MAYBE 2 (s1)":         {"?", 0, nil},
	} {
		m, n, members := replication.ParseStandbyNames(in)
		require.Equal(t, want.method, m, in)
		require.Equal(t, want.num, n, in)
		require.Equal(t, want.members, members, in)
	}
}
