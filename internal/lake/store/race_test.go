package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

// The two-process race re-executes this test binary as a child (selected by
// raceChildEnv in TestMain). The parent and the child put-if-absent the same
// keys round by round: the parent writes the round number to the child's
// stdin and immediately races for the key itself; the child races as soon as
// it reads the line and answers with its outcome.
const (
	raceChildEnv = "OML_STORE_RACE_CHILD"
	raceURLEnv   = "OML_STORE_RACE_URL"
)

func raceKey(round int) string { return fmt.Sprintf("_delta_log/%020d.json", round) }

func raceBody(who string, round int) []byte {
	return []byte(fmt.Sprintf(`{"commitInfo":{"writer":%q,"round":%d}}`, who, round))
}

func raceChild() int {
	ctx := context.Background()
	s, err := store.Open(ctx, os.Getenv(raceURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		round, err := strconv.Atoi(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		err = s.PutIfAbsent(ctx, raceKey(round), raceBody("child", round))
		outcome := "won"
		switch {
		case errors.Is(err, store.ErrExists):
			outcome = "lost"
		case err != nil:
			outcome = "error " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		fmt.Printf("%d %s\n", round, outcome)
	}
	return 0
}

func runTwoProcessRace(t *testing.T, s store.Store, url string, env []string, rounds int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), raceChildEnv+"=1", raceURLEnv+"="+url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	out := bufio.NewReader(stdout)
	defer func() {
		stdin.Close()
		_, _ = io.Copy(io.Discard, out)
		require.NoError(t, cmd.Wait())
	}()

	childWins := 0
	for round := 0; round < rounds; round++ {
		_, err := fmt.Fprintf(stdin, "%d\n", round)
		require.NoError(t, err)
		parentErr := s.PutIfAbsent(ctx, raceKey(round), raceBody("parent", round))
		line, err := out.ReadString('\n')
		require.NoError(t, err, "reading the child's answer")
		var childRound int
		var childOutcome string
		_, err = fmt.Sscanf(line, "%d %s", &childRound, &childOutcome)
		require.NoError(t, err, "child answered %q", line)
		require.Equal(t, round, childRound)

		var winner string
		switch {
		case parentErr == nil && childOutcome == "lost":
			winner = "parent"
		case errors.Is(parentErr, store.ErrExists) && childOutcome == "won":
			winner = "child"
			childWins++
		default:
			t.Fatalf("round %d: parent %v, child %s: want exactly one winner and the loser told ErrExists", round, parentErr, strings.TrimSpace(line))
		}
		got, err := s.Get(ctx, raceKey(round))
		require.NoError(t, err)
		require.Equal(t, string(raceBody(winner, round)), string(got), "round %d: the stored commit is not the winner's", round)
	}
	t.Logf("%d rounds: the child won %d, the parent %d", rounds, childWins, rounds-childWins)
}

func TestTwoProcessRaceFileStoreHasOneWinnerPerKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := store.NewFile(dir)
	require.NoError(t, err)
	table := store.MustSub(s, "tenant/bronze/events")
	runTwoProcessRace(t, table, "file://"+dir+"/tenant/bronze/events", nil, 200)
}

func TestTwoProcessRaceS3HasOneWinnerPerKey(t *testing.T) {
	t.Parallel()
	b := s3test.NewBucket(t, nil)
	table := store.MustSub(b.Store, "tenant/bronze/events")
	runTwoProcessRace(t, table, b.URL("tenant/bronze/events"), b.Env(), 100)
}
