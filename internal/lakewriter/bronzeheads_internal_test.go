package lakewriter

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/tables"
)

// The fork check's bronze anchors (bronzeheads.go): a head read from the
// lake before a commit the memory has is older and never replaces it; a
// commit's newest row is the head; another hash at the known seq is kept
// beside it as fork evidence, and a row without a seq is no anchor.
func TestBronzeHeads_OlderReadAfterACommit_KeepsTheCommitsHead_AndAnotherHashAtItsSeqIsEvidence(t *testing.T) {
	ten := uuid.New()
	var m bronzeHeads
	m.reset(map[uuid.UUID]bronze.Head{ten: {Seq: 3, Hash: []byte("h3"), Version: 1}})
	row := func(seq int64, hash string) *item {
		return &item{row: tables.BronzeRow{Seq: seq, Hash: []byte(hash)}.Row()}
	}
	m.committed(ten, []*item{row(5, "h5"), row(4, "h4"), {}}, 2)
	m.seen(map[uuid.UUID]bronze.Head{ten: {Seq: 3, Hash: []byte("h3"), Version: 1}}) // read before that commit
	h := m.heads[ten]
	require.Equal(t, int64(5), h.Seq)
	require.Equal(t, []byte("h5"), h.Hash)
	require.Empty(t, h.Others)

	m.seen(map[uuid.UUID]bronze.Head{ten: {Seq: 5, Hash: []byte("x5"), Version: 3}})
	h = m.heads[ten]
	require.Equal(t, []byte("h5"), h.Hash)
	require.Equal(t, [][]byte{[]byte("x5")}, h.Others, "two events at one seq: fork evidence kept")

	other := uuid.New()
	m.committed(other, []*item{{}}, 1)
	_, ok := m.heads[other]
	require.False(t, ok, "a row without a seq is no anchor")
}
