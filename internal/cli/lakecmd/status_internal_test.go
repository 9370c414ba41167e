package lakecmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
)

// TestSummarizeTables_20000Tables_ListsUnreadableAndWorstOnly: at 20,000
// tables `lake status --tables` prints a summary and a bounded list —
// every table that could not be read, then the ones with the most commits
// since a checkpoint and the most files — never all of them.
func TestSummarizeTables_20000Tables_ListsUnreadableAndWorstOnly(t *testing.T) {
	t.Parallel()
	var all []lakewriter.TableStatus
	for i := 0; i < 20000; i++ {
		ts := lakewriter.TableStatus{Table: fmt.Sprintf("t%05d", i), Exists: i%4 < 2, Version: 3, TxnVersion: 100, Files: 2, SinceCheckpoint: 3}
		if !ts.Exists {
			ts.Version, ts.TxnVersion, ts.Files, ts.SinceCheckpoint = -1, -1, 0, 0
		}
		all = append(all, ts)
	}
	all[7].Error = "open Delta table t00007: corrupt log"
	all[7].Exists = false
	all[400].SinceCheckpoint = 99 // due for a checkpoint
	all[401].Files = 5000         // due for an optimize
	list, summary := summarizeTables(all, 100)
	require.LessOrEqual(t, len(list), 1+2*tablesWorst)
	names := map[string]bool{}
	for _, ts := range list {
		names[ts.Table] = true
	}
	require.True(t, names["t00007"], "the unreadable table is listed")
	require.True(t, names["t00400"], "the table with the most commits since a checkpoint is listed")
	require.True(t, names["t00401"], "the table with the most files is listed")
	text := fmt.Sprint(summary)
	require.Contains(t, text, "10000 of 20000 exist")
	require.Contains(t, text, "1 could not be read")
	require.True(t, strings.Contains(text, "-o json lists all 20000"))
}
