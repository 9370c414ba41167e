package delta

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/store"
)

// A TableState is what a writer needs to commit again, without its
// snapshot: the version, the txn per appId, the checkpoint it stands on,
// and the protocol and metadata — which every table of a kind shares but
// for the metadata's id, creation time and description (oml's names the
// tenant), so the rest is interned (tableShape) and a state costs about
// 300 bytes instead of a few KB. The
// lake writer keeps one for every table it evicts (internal/lakewriter,
// registry.go), so reopening one of 40,000 tables costs one small read
// instead of a listing, the checkpoint hint and up to a hundred commits.
//
// A writer rebuilt from a state (ReopenWriter) is the writer a load at
// the state's version gives, on two conditions ReopenWriter's fence
// checks and the commit protocol settles:
//
//   - The log still holds the state's version as it was: ReopenWriter
//     reads that commit back and compares its bytes with the fingerprint
//     the state recorded (head). A table deleted, rebuilt (another
//     table's commit at that version) or whose log was cleaned past it
//     fails the fence, and the writer is opened from the log instead.
//     Log cleanup only ever deletes a prefix, so when that commit is
//     there, every later one is.
//   - Nothing committed since, or the first commit finds out: it is a
//     put-if-absent of the next version, which loses to any commit made
//     meanwhile (another lake writer, an optimize, an erasure), and the
//     writer then catches up from the log (Writer.lost) exactly as a
//     writer kept open would.
//
// The snapshot it rebuilds is lean, and its base is the whole table at
// the state's version: the base checkpoint and the JSON commits after it,
// which a checkpoint and EachFile stream from the store
// (Snapshot.eachBaseAction). It does not hold the commitInfo of the
// commit that set a txn (TxnCommitInfo reports ok=false, as for a txn
// read from a checkpoint: read the log for it).
//
// A full writer's state (a writer of removes: the lake writer's MERGE
// tables, silver and gold/workareas, prune and rewrite files by their
// stats) also keeps the live files (fullFiles): the add actions of the
// evicted snapshot itself, shared, not copied, in two slices instead of a
// map (no commitInfo either: most of a state's bytes are its files'
// stats, and every byte saved is a state more within the registry's
// budget). It keeps no tombstones. A MERGE table removes a file at every
// commit and Delta keeps each remove for the retention (a week by
// default), so they grew with every commit: at 10,000 tenants in the
// lake writer's steady state few MERGE tables' states fitted the budget,
// and nearly nine in ten of their reopens read the log, at about 9 ms
// each (BenchmarkFrontierLag, session 23). Only a checkpoint
// needs them (it must carry every remove within the retention), so the
// rebuilt snapshot holds the removes since (tombsPartial) and
// Writer.Checkpoint reads the rest from a load of the log at its version
// first: one load per checkpoint interval instead of one per reopen. Its snapshot needs nothing from the store, so log
// cleanup before the state's commit does not matter to it; but a MERGE
// reads the files it lists before its commit's put-if-absent can settle
// anything, so ReopenWriter also requires that the state's commit is the
// table's newest (commit version+1 absent): the file list is then the one
// a load of the log would give. Any commit since (another lake writer, an
// optimize, an erasure rewriting files, a repair) sends the reopen to the
// log. Only a table with at most MaxStateFiles files and tombstones gets
// one: copying a large list at every eviction would cost what it saves.
type TableState struct {
	shape      *tableShape
	id         uuid.UUID // metaData.id
	idText     *string   // metaData.id when it is not a canonical UUID's text
	created    int64     // metaData.createdTime
	hasCreated bool
	// description is metaData.description (the snapshot's string, not a
	// copy); hasDescription false: none.
	description    string
	hasDescription bool
	version        int64
	checkpoint     int64 // the snapshot's checkpointVersion
	// baseAt is the version of the lean base's checkpoint (-1: none);
	// baseRef keeps that checkpoint's reference only when its keys are not
	// the classic single file's (a multi-part checkpoint).
	baseAt  int64
	baseRef *checkpointRef
	txn     stateTxn   // the first appId's (txns == 0: none)
	more    []stateTxn // the others
	txns    int
	head    [headLen]byte // fingerprint of the commit at version
	// full holds a full writer's live files and tombstones (nil: the
	// state of a lean writer).
	full *fullFiles
}

// fullFiles is the part of a full writer's state a lean one does not
// have: the snapshot's live files by decoded path, as parallel slices.
type fullFiles struct {
	keys  []string
	files []*Add
	bytes int64 // ApproxBytes of all of it, measured once
}

// MaxStateFiles bounds the live files of a full writer that gives a
// state (Writer.State): a state copies two pointers per file at every
// eviction and rebuilds a map at every reopen, which past a few hundred
// files approaches what reading the log costs, and its bytes would crowd
// out hundreds of small tables' states.
const MaxStateFiles = 256

// stateTxn is one appId's latest txn in a TableState.
type stateTxn struct {
	appID       string // interned
	version     int64
	lastUpdated int64
	hasUpdated  bool
	at          int64 // the version that set it
}

// headLen is the length of a commit fingerprint (a SHA-256 prefix: the
// fence compares a commit with the one a state recorded, and two
// different commits of one table agreeing on 128 bits does not happen).
const headLen = 16

// setHead records the fingerprint of commit v's bytes.
func (s *Snapshot) setHead(v int64, b []byte) {
	sum := sha256.Sum256(b)
	copy(s.head[:], sum[:headLen])
	s.headAt = v
}

// hasLeanBase reports whether part of a lean snapshot's files live in its
// base (the store) rather than in memory.
func (s *Snapshot) hasLeanBase() bool { return s.lean && s.leanTail >= 0 }

// eachBaseAction streams the adds and removes live at the lean base
// (leanTail): the base checkpoint's (if any) through the JSON commits
// after it up to leanTail, which are read into a small overlay first (a
// TableState's base; after a load or a checkpoint there are none).
func (s *Snapshot) eachBaseAction(ctx context.Context, st store.Store, fn func(*Action) error) error {
	from := int64(0)
	if s.leanBase != nil {
		from = s.leanBase.version + 1
	}
	if from > s.leanTail {
		return readCheckpoint(ctx, st, s.leanBase, fn)
	}
	tail := newSnapshot(s.table)
	tail.setLean(true)
	err := fetchOrdered(ctx, from, s.leanTail, func(ctx context.Context, v int64) ([]byte, error) {
		b, err := st.Get(ctx, CommitKey(v))
		if err != nil {
			return nil, fmt.Errorf("reading commit %d: %w", v, err)
		}
		return b, nil
	}, func(v int64, b []byte) error {
		acts, err := DecodeCommitBytes(b)
		if err != nil {
			return fmt.Errorf("commit %d: %w", v, err)
		}
		for i := range acts {
			if acts[i].Add != nil || acts[i].Remove != nil {
				if err := tail.apply(&acts[i], v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if s.leanBase != nil {
		err := readCheckpoint(ctx, st, s.leanBase, func(a *Action) error {
			var p string
			switch {
			case a.Add != nil:
				p = a.Add.Path
			case a.Remove != nil:
				p = a.Remove.Path
			default:
				return nil
			}
			key, err := DecodePath(p)
			if err != nil {
				return err
			}
			if _, again := tail.files[key]; again {
				return nil // re-added after the checkpoint: the newer add is the tail's
			}
			if a.Add != nil && tail.leanRemoved[key] {
				return nil
			}
			if _, newer := tail.tombstones[key]; a.Remove != nil && newer {
				return nil
			}
			return fn(a)
		})
		if err != nil {
			return err
		}
	}
	for _, a := range tail.files {
		if err := fn(&Action{Add: a}); err != nil {
			return err
		}
	}
	for _, r := range tail.tombstones {
		if err := fn(&Action{Remove: r}); err != nil {
			return err
		}
	}
	return nil
}

// State returns the writer's compact state, or ok=false when it has none
// to give: the writer is full and holds more than MaxStateFiles files and
// tombstones, is in use (a commit holds it), must
// re-read the log first (stale, broken, refused by the gate, not created
// yet), or does not know the bytes of its snapshot's commit (loaded from
// a checkpoint with no commit after it): such a table is reopened from its
// log. It never blocks on a commit in progress.
func (w *Writer) State() (TableState, bool) {
	if !w.mu.TryLock() {
		return TableState{}, false
	}
	defer w.mu.Unlock()
	s := w.snap
	if w.broken != nil || w.stale || w.gateErr != nil || w.create != nil || s.version < 0 || s.headAt != s.version {
		return TableState{}, false
	}
	if !s.lean && len(s.files) > MaxStateFiles {
		return TableState{}, false
	}
	ts := TableState{
		shape: shapeOf(s), version: s.version, checkpoint: s.checkpointVersion, head: s.head,
		baseAt: -1, txns: s.txns.len(),
	}
	if ts.shape == nil {
		return TableState{}, false
	}
	if id, err := uuid.Parse(s.metadata.ID); err == nil && id.String() == s.metadata.ID {
		ts.id = id
	} else {
		text := s.metadata.ID
		ts.idText = &text
	}
	if c := s.metadata.CreatedTime; c != nil {
		ts.created, ts.hasCreated = *c, true
	}
	if d := s.metadata.Description; d != nil {
		ts.description, ts.hasDescription = *d, true
	}
	// The base the rebuilt snapshot stands on: this snapshot's base
	// checkpoint (what is in memory now was committed after it, so it is
	// in the log's commits up to version).
	if b := s.leanBase; b != nil {
		ts.baseAt = b.version
		if b.v2 || len(b.keys) != 1 || b.keys[0] != CheckpointKey(b.version) {
			ts.baseRef = b
		}
	}
	for i, e := range s.txns.list {
		t := stateTxn{appID: internAppID(e.txn.AppID), version: e.txn.Version, at: e.at}
		if e.txn.LastUpdated != nil {
			t.lastUpdated, t.hasUpdated = *e.txn.LastUpdated, true
		}
		if i == 0 {
			ts.txn = t
		} else {
			ts.more = append(ts.more, t)
		}
	}
	if !s.lean {
		ts.full = fullFilesOf(s)
	}
	return ts, true
}

// fullFilesOf takes a full snapshot's live files for a state (not its
// tombstones: TableState). The actions are shared: a snapshot never
// modifies an action it holds (apply replaces them), so the writer may
// go on committing without changing the state.
func fullFilesOf(s *Snapshot) *fullFiles {
	f := &fullFiles{keys: make([]string, 0, len(s.files)), files: make([]*Add, 0, len(s.files))}
	f.bytes = int64(unsafe.Sizeof(*f))
	for k, a := range s.files {
		f.keys, f.files = append(f.keys, k), append(f.files, a)
		f.bytes += 24 + int64(unsafe.Sizeof(*a)) + stringBytes(k, a.Path) + int64(len(a.Stats)) +
			mapBytes(a.PartitionValues) + mapBytes(a.Tags)
		if a.DeletionVector != nil {
			f.bytes += 128
		}
	}
	return f
}

// stringBytes is the bytes of a decoded path and its action's path, the
// path counted once when they are the same string.
func stringBytes(key, path string) int64 {
	if key == path {
		return int64(len(path))
	}
	return int64(len(key) + len(path))
}

// mapBytes estimates a small map of optional strings (partition values,
// tags): the header, one group of slots, and the text.
func mapBytes(m map[string]*string) int64 {
	if m == nil {
		return 0
	}
	n := int64(48)
	if len(m) > 0 {
		n += 8 + int64((len(m)+7)/8*8)*24
	}
	for k, v := range m {
		n += int64(len(k))
		if v != nil {
			n += 16 + int64(len(*v))
		}
	}
	return n
}

// Full reports whether the state is a full writer's (it holds the live
// files; ReopenWriter then wants Options.Lean unset).
func (ts *TableState) Full() bool { return ts.full != nil }

// Version is the table version the state was taken at.
func (ts *TableState) Version() int64 { return ts.version }

// ApproxBytes estimates the memory the state holds: its struct and what
// it points to that is its own (its container's slot is the caller's).
func (ts *TableState) ApproxBytes() int64 {
	n := int64(unsafe.Sizeof(*ts)) + int64(len(ts.more))*int64(unsafe.Sizeof(stateTxn{})) + int64(len(ts.description))
	if ts.idText != nil {
		n += 32 + int64(len(*ts.idText))
	}
	if ts.baseRef != nil {
		n += 64
		for _, k := range ts.baseRef.keys {
			n += 16 + int64(len(k))
		}
	}
	if ts.full != nil {
		n += ts.full.bytes
	}
	return n
}

// snapshot rebuilds the snapshot the state was taken from, as far as a
// commit needs it (TableState's comment says what it stands on).
func (ts *TableState) snapshot(table string) *Snapshot {
	s := newSnapshot(table)
	s.setLean(ts.full == nil)
	s.version, s.checkpointVersion = ts.version, ts.checkpoint
	s.protocol, s.metadata, s.schema = ts.shape.proto, ts.shape.md, ts.shape.schema
	s.metadata.ID = ts.id.String()
	if ts.idText != nil {
		s.metadata.ID = *ts.idText
	}
	if ts.hasCreated {
		c := ts.created
		s.metadata.CreatedTime = &c
	}
	if ts.hasDescription {
		d := ts.description
		s.metadata.Description = &d
	}
	s.shape = ts.shape
	switch {
	case ts.full != nil:
		ts.full.fill(s)
	case ts.baseRef != nil:
		s.leanBase = ts.baseRef
	case ts.baseAt >= 0:
		s.leanBase = &checkpointRef{version: ts.baseAt, keys: []string{CheckpointKey(ts.baseAt)}}
	}
	if ts.full == nil {
		s.leanTail = ts.version
	}
	if ts.txns > 0 {
		s.txns.list = make([]txnEntry, 0, ts.txns)
		for _, t := range append([]stateTxn{ts.txn}, ts.more...) {
			e := s.txns.put(t.appID)
			e.txn.Version, e.at = t.version, t.at
			if t.hasUpdated {
				lu := t.lastUpdated
				e.txn.LastUpdated = &lu
			}
		}
	}
	s.head, s.headAt = ts.head, ts.version
	return s
}

// fill puts the live files into a full snapshot being rebuilt; its
// tombstones are the log's (tombsPartial).
func (f *fullFiles) fill(s *Snapshot) {
	s.files = make(map[string]*Add, len(f.files))
	for i, a := range f.files {
		s.files[f.keys[i]] = a
	}
	s.tombsPartial = true
}

// ReopenWriter returns a writer on the table at st from a state one of
// its writers gave (Writer.State): after the fence (TableState's comment)
// with one read of the state's commit (and, for a full state, a stat of
// the next one), or — when the fence fails — opened from the log like
// OpenWriter (fromState false; ErrTableNotFound when the table is gone).
// opts must be the options the state's writer had: Lean set for a lean
// state, unset for a full one (Full).
func ReopenWriter(ctx context.Context, st store.Store, ts *TableState, opts Options) (w *Writer, fromState bool, err error) {
	if opts.Lean == (ts.full != nil) || ts.shape == nil {
		w, err = OpenWriter(ctx, st, opts)
		return w, false, err
	}
	b, err := st.Get(ctx, CommitKey(ts.version))
	switch {
	case errors.Is(err, store.ErrNotFound):
		w, err = OpenWriter(ctx, st, opts)
		return w, false, err
	case err != nil:
		return nil, false, fmt.Errorf("Delta table %s: reading commit %d back: %w", st, ts.version, err)
	}
	sum := sha256.Sum256(b)
	if [headLen]byte(sum[:headLen]) != ts.head {
		w, err = OpenWriter(ctx, st, opts)
		return w, false, err
	}
	if ts.full != nil {
		_, err := st.Stat(ctx, CommitKey(ts.version+1))
		switch {
		case err == nil:
			w, err = OpenWriter(ctx, st, opts) // committed since: the log has the newer file list
			return w, false, err
		case !errors.Is(err, store.ErrNotFound):
			return nil, false, fmt.Errorf("Delta table %s: looking for commit %d: %w", st, ts.version+1, err)
		}
	}
	snap := ts.snapshot(st.String())
	w = &Writer{st: st, table: st.String(), opts: opts, snap: snap}
	if w.gateErr = checkWrite(w.table, snap.protocol, &snap.metadata, snap.schema); w.gateErr != nil {
		return nil, false, w.gateErr
	}
	return w, true, nil
}

// tableShape is a table's protocol and metadata but for the metadata's
// id, creation time and description: the same for every table of a kind,
// so TableStates share one. Read-only once interned.
type tableShape struct {
	proto  Protocol
	md     Metadata // ID, CreatedTime and Description unset
	schema *StructType
}

// shapes interns tableShapes by their text (shapeKey); like the shared
// schemas, only the first maxShapes distinct ones are kept (a lake writer
// has four) and a table of any other shape has no state.
var shapes struct {
	mu sync.Mutex
	m  map[string]*tableShape
}

const maxShapes = 64

// shapeOf returns the snapshot's interned shape (nil: none to intern),
// computed once per snapshot and protocol or metadata change (apply
// clears it).
func shapeOf(s *Snapshot) *tableShape {
	if s.shape != nil {
		return s.shape
	}
	if s.schema == nil {
		return nil
	}
	key := shapeKey(&s.protocol, &s.metadata)
	shapes.mu.Lock()
	defer shapes.mu.Unlock()
	if sh, ok := shapes.m[key]; ok {
		s.shape = sh
		return sh
	}
	if len(shapes.m) >= maxShapes {
		return nil
	}
	if shapes.m == nil {
		shapes.m = map[string]*tableShape{}
	}
	sh := &tableShape{proto: s.protocol, md: s.metadata, schema: s.schema}
	sh.md.ID, sh.md.CreatedTime, sh.md.Description = "", nil, nil
	shapes.m[key] = sh
	s.shape = sh
	return sh
}

// shapeKey is the text of everything a tableShape holds: two snapshots
// share a shape only when all of it is equal.
func shapeKey(p *Protocol, md *Metadata) string {
	var b strings.Builder
	b.Grow(len(md.SchemaString) + 128)
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	list := func(ss []string) {
		b.WriteString(strconv.Itoa(len(ss)))
		b.WriteByte('[')
		for _, s := range ss {
			field(s)
		}
	}
	strMap := func(m map[string]string) {
		list(sortedKeys(m))
		for _, k := range sortedKeys(m) {
			field(m[k])
		}
	}
	opt := func(s *string) {
		if s == nil {
			b.WriteByte('-')
			return
		}
		b.WriteByte('+')
		field(*s)
	}
	field(strconv.Itoa(p.MinReaderVersion))
	field(strconv.Itoa(p.MinWriterVersion))
	list(p.ReaderFeatures)
	b.WriteByte(boolByte(p.ReaderFeatures == nil))
	list(p.WriterFeatures)
	b.WriteByte(boolByte(p.WriterFeatures == nil))
	opt(md.Name)
	field(md.Format.Provider)
	strMap(md.Format.Options)
	b.WriteByte(boolByte(md.Format.Options == nil))
	field(md.SchemaString)
	list(md.PartitionColumns)
	strMap(md.Configuration)
	return b.String()
}

func boolByte(v bool) byte {
	if v {
		return '1'
	}
	return '0'
}

// appIDs interns txn appIds (every lake-writer table has the same one).
var appIDs struct {
	mu sync.Mutex
	m  map[string]string
}

func internAppID(id string) string {
	appIDs.mu.Lock()
	defer appIDs.mu.Unlock()
	if s, ok := appIDs.m[id]; ok {
		return s
	}
	if appIDs.m == nil {
		appIDs.m = map[string]string{}
	}
	if len(appIDs.m) < maxShapes {
		appIDs.m[id] = id
	}
	return id
}
