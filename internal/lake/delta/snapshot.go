package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/omlhq/oml/internal/lake/store"
)

// ErrTableNotFound means there is no Delta log at the location.
var ErrTableNotFound = errors.New("no Delta table")

// ErrVersionNotFound means the requested version is not in the log.
var ErrVersionNotFound = errors.New("Delta table version not found")

// Snapshot is the reconciled state of a table at one version: the latest
// protocol and metadata, the live files keyed by decoded path, the
// tombstones, and the latest txn per appId.
//
// A Snapshot returned by Load is the caller's. The snapshot held inside a
// Writer is updated in place by that writer's own commits; Writer.Snapshot
// documents how to use it.
type Snapshot struct {
	table   string
	version int64

	protocol Protocol
	metadata Metadata
	schema   *StructType

	files      map[string]*Add    // by decoded path
	tombstones map[string]*Remove // by decoded path
	// tombsPartial: tombstones holds only the removes of the commits made
	// or read since the snapshot was rebuilt from a TableState, which
	// keeps none (compact.go); the log holds the rest. A checkpoint reads
	// them first (Writer.Checkpoint).
	tombsPartial bool
	// txns holds, per appId, the latest txn, the version that set it, and
	// the commitInfo of the commit that set it when that commit was
	// replayed or made here (not when the txn came from a checkpoint,
	// which keeps no commitInfo): a writer that records its progress in
	// commitInfo (the lake writer's batch bounds) reads it from the
	// snapshot instead of reading the log again. lastInfo is the newest
	// commitInfo seen (an engine may write commitInfo after the txn).
	txns       txnState
	lastInfo   json.RawMessage
	lastInfoAt int64

	checkpointVersion int64 // -1: replayed from version 0
	sawDeletionVector bool

	// Lean snapshots (Options.Lean, for an append-only writer) do not hold
	// the live files and tombstones of the checkpoint they stand on
	// (leanBase): files and tombstones then hold only what changed since,
	// leanRemoved the paths removed since (which may be base files), and a
	// checkpoint streams the base checkpoint's rows through those changes.
	// Memory then grows with the commits since the last checkpoint, not
	// with the table's file count.
	lean          bool
	inBase        bool // reading leanBase's actions (Load)
	leanBase      *checkpointRef
	leanBaseFiles int64
	leanRemoved   map[string]bool
	// leanTail is the last version the lean base covers (-1: none). It
	// is leanBase's version after a load or a checkpoint; a snapshot
	// rebuilt from a TableState (compact.go) stands on the whole table at
	// the state's version instead, so its base is leanBase (nil: none)
	// and the JSON commits after it up to leanTail, streamed from the
	// store like the checkpoint (eachBaseAction).
	leanTail int64

	// head fingerprints the bytes of the commit at headAt (-1: unknown):
	// a TableState records it, and a writer rebuilt from that state
	// reads that commit back first (ReopenWriter's fence) — the table
	// was deleted, rebuilt or its log cleaned past it when it differs.
	head   [headLen]byte
	headAt int64
	// shape is the interned protocol and metadata (compact.go), once a
	// TableState asked for it; a protocol or metadata action clears it.
	shape *tableShape
}

func newSnapshot(table string) *Snapshot {
	return &Snapshot{
		table: table, version: -1, checkpointVersion: -1,
		files: map[string]*Add{}, tombstones: map[string]*Remove{}, lastInfoAt: -1,
		leanTail: -1, headAt: -1,
	}
}

func (s *Snapshot) setLean(lean bool) {
	s.lean = lean
	if lean {
		s.leanRemoved = map[string]bool{}
	}
}

// Lean reports whether the snapshot is lean: Files, File and NumFiles then
// cover only the files added since its base checkpoint.
func (s *Snapshot) Lean() bool { return s.lean }

// rebaseLean makes the checkpoint just written at the snapshot's version
// the lean base and forgets what it now holds.
func (s *Snapshot) rebaseLean(addFiles int64) {
	s.leanBase = &checkpointRef{version: s.version, keys: []string{CheckpointKey(s.version)}}
	s.leanTail = s.version
	s.leanBaseFiles = addFiles
	s.files = map[string]*Add{}
	s.tombstones = map[string]*Remove{}
	s.leanRemoved = map[string]bool{}
}

// Table describes the table's location (for messages).
func (s *Snapshot) Table() string { return s.table }

// Version is the snapshot's table version.
func (s *Snapshot) Version() int64 { return s.version }

// Protocol is the latest protocol action.
func (s *Snapshot) Protocol() Protocol { return s.protocol }

// Metadata is the latest metaData action.
func (s *Snapshot) Metadata() Metadata { return s.metadata }

// Schema is the parsed table schema.
func (s *Snapshot) Schema() *StructType { return s.schema }

// PartitionColumns are the table's partition columns, in order.
func (s *Snapshot) PartitionColumns() []string { return s.metadata.PartitionColumns }

// CheckpointVersion is the version of the checkpoint the snapshot was
// built from, or -1 if it was replayed from version 0.
func (s *Snapshot) CheckpointVersion() int64 { return s.checkpointVersion }

// NumFiles is the number of live files.
func (s *Snapshot) NumFiles() int { return len(s.files) }

// File returns the live add action for a decoded path.
func (s *Snapshot) File(decodedPath string) (*Add, bool) {
	a, ok := s.files[decodedPath]
	return a, ok
}

// Files returns the live add actions sorted by path. The actions are
// shared with the snapshot: do not modify them.
func (s *Snapshot) Files() []*Add {
	out := make([]*Add, 0, len(s.files))
	for _, a := range s.files {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// TotalBytes is the sum of the live files' sizes.
func (s *Snapshot) TotalBytes() int64 {
	var n int64
	for _, a := range s.files {
		n += a.Size
	}
	return n
}

// Tombstones returns the remove actions still remembered, sorted by path.
func (s *Snapshot) Tombstones() []*Remove {
	out := make([]*Remove, 0, len(s.tombstones))
	for _, r := range s.tombstones {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// TombstonesComplete reports whether Tombstones is every remove still
// within the retention: false for a full writer's snapshot rebuilt from a
// TableState, which holds only the removes since (a load holds them all).
func (s *Snapshot) TombstonesComplete() bool { return !s.tombsPartial }

// NumTombstones is the number of remembered remove actions.
func (s *Snapshot) NumTombstones() int { return len(s.tombstones) }

// Txns returns the latest txn per appId (a copy).
func (s *Snapshot) Txns() map[string]Txn {
	out := make(map[string]Txn, s.txns.len())
	for _, e := range s.txns.list {
		out[e.txn.AppID] = e.txn
	}
	return out
}

// TxnVersion returns the latest committed txn version of appID.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	e := s.txns.find(appID)
	if e == nil {
		return 0, false
	}
	return e.txn.Version, true
}

// TxnCommitInfo returns the commitInfo of the commit that set appID's
// latest txn, when the snapshot read or made that commit (ok=false when
// the txn came from a checkpoint or the commit had no commitInfo: read the
// log, History, for it). Do not modify it.
func (s *Snapshot) TxnCommitInfo(appID string) (json.RawMessage, bool) {
	e := s.txns.find(appID)
	if e == nil {
		return nil, false
	}
	return e.info, len(e.info) > 0
}

// DecodePath decodes an add/remove path (a relative URI) into the object
// key relative to the table root. It decodes exactly once: the log path
// "x=A%252FA/f" names the directory "x=A%2FA".
func DecodePath(p string) (string, error) {
	if hasScheme(p) || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: file path %q is absolute; oml reads tables whose files live under the table root", ErrUnsupported, p)
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("%w: file path %q is not a valid URI path: %v", ErrCorruptLog, p, err)
	}
	if dec == "" {
		return "", fmt.Errorf("%w: empty file path", ErrCorruptLog)
	}
	return dec, nil
}

// hasScheme reports whether p starts with a URI scheme ("s3:", "file:").
func hasScheme(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == ':':
			return i > 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return false
}

// EncodePath is the inverse of DecodePath for the keys oml writes: each
// path segment is escaped so that DecodePath(EncodePath(k)) == k.
func EncodePath(key string) string {
	return (&url.URL{Path: key}).EscapedPath()
}

// apply reconciles one action of commit version v into the snapshot.
func (s *Snapshot) apply(a *Action, v int64) error {
	switch {
	case a.Protocol != nil:
		s.protocol = *a.Protocol
		s.shape = nil
	case a.MetaData != nil:
		md := *a.MetaData
		if md.Configuration == nil {
			md.Configuration = map[string]string{}
		}
		if md.PartitionColumns == nil {
			md.PartitionColumns = []string{}
		}
		s.metadata = md
		s.schema = nil // parsed once at the end of the replay
		s.shape = nil
	case a.Add != nil:
		key, err := DecodePath(a.Add.Path)
		if err != nil {
			return err
		}
		if a.Add.DeletionVector != nil {
			s.sawDeletionVector = true
		}
		if s.inBase {
			s.leanBaseFiles++
			return nil
		}
		s.files[key] = a.Add
		delete(s.tombstones, key)
	case a.Remove != nil:
		key, err := DecodePath(a.Remove.Path)
		if err != nil {
			return err
		}
		if s.inBase {
			return nil
		}
		delete(s.files, key)
		s.tombstones[key] = a.Remove
		if s.lean {
			s.leanRemoved[key] = true
		}
	case a.Txn != nil:
		e := s.txns.put(a.Txn.AppID)
		e.txn, e.at, e.info = *a.Txn, v, nil
		if s.lastInfoAt == v && !s.inBase {
			e.info = s.lastInfo
		}
	case isSet(a.CommitInfo):
		// Kept only for the txn set by the same commit (see txnInfo).
		s.lastInfo, s.lastInfoAt = a.CommitInfo, v // decoded lines are copies
		for i := range s.txns.list {
			if e := &s.txns.list[i]; e.at == v {
				e.info = s.lastInfo
			}
		}
	case isSet(a.Sidecar), isSet(a.CheckpointMetadata):
		return &UnsupportedError{Table: s.table, Op: "read", Feature: "v2Checkpoint",
			Detail: fmt.Sprintf("version %d holds a %s action", v, a.Kind())}
	}
	// commitInfo, cdc and domainMetadata: nothing for a reader to do (domainMetadata
	// can only appear behind a writer feature the writer gate refuses).
	return nil
}

// finish validates the replayed state and runs the reader gate.
func (s *Snapshot) finish() error {
	if s.protocol.MinReaderVersion == 0 {
		return fmt.Errorf("%w: table %s has no protocol action up to version %d", ErrCorruptLog, s.table, s.version)
	}
	// The protocol gate runs before anything else so that a refusal names
	// the feature even when the metadata is something oml cannot parse.
	if err := checkRead(s.table, s.protocol, nil, nil); err != nil {
		return err
	}
	if s.metadata.ID == "" {
		return fmt.Errorf("%w: table %s has no metaData action up to version %d", ErrCorruptLog, s.table, s.version)
	}
	shared, schema, err := parseSchemaShared(s.metadata.SchemaString)
	if err != nil {
		return fmt.Errorf("table %s: %w", s.table, err)
	}
	s.metadata.SchemaString = shared // the same bytes: one copy for every table of a kind
	s.schema = schema
	if err := checkRead(s.table, s.protocol, &s.metadata, s.schema); err != nil {
		return err
	}
	if s.sawDeletionVector {
		return &UnsupportedError{Table: s.table, Op: "read", Feature: "deletionVectors", Detail: "a live file carries a deletion vector"}
	}
	for _, pc := range s.metadata.PartitionColumns {
		if s.schema.Field(pc) == nil {
			return fmt.Errorf("%w: table %s: partition column %q is not in the schema", ErrCorruptLog, s.table, pc)
		}
	}
	return nil
}

// LoadOptions selects what Load reads.
type LoadOptions struct {
	// Version to load; nil means the latest.
	Version *int64
	// ignoreCheckpoints replays JSON commits only (tests compare the two).
	ignoreCheckpoints bool
	// lean loads a lean snapshot (see Snapshot; Options.Lean).
	lean bool
}

// AtVersion is a LoadOptions for time travel.
func AtVersion(v int64) LoadOptions { return LoadOptions{Version: &v} }

// Load reads a table's snapshot: the newest complete checkpoint at or
// before the wanted version (found by listing, with _last_checkpoint only
// as a hint), then every later commit, which must be contiguous. It never
// returns a partial snapshot: any gap, corrupt entry or unsupported feature
// is an error.
func Load(ctx context.Context, st store.Store, opts ...LoadOptions) (*Snapshot, error) {
	target := int64(-1)
	ignoreCheckpoints, lean := false, false
	for _, o := range opts {
		ignoreCheckpoints = ignoreCheckpoints || o.ignoreCheckpoints
		lean = lean || o.lean
		if o.Version != nil {
			if *o.Version < 0 {
				return nil, fmt.Errorf("%w: version %d is negative", ErrVersionNotFound, *o.Version)
			}
			target = *o.Version
		}
	}
	var listing *logListing
	var err error
	if ignoreCheckpoints {
		listing, err = listLog(ctx, st, 0)
	} else {
		listing, err = discover(ctx, st, target)
	}
	if err != nil {
		return nil, err
	}
	return loadListed(ctx, st, listing, target, ignoreCheckpoints, lean)
}

// LoadWithLog is Load of the latest version for a caller that needs the
// whole log's listing anyway (maintenance measures what log cleanup could
// delete from every entry's age): it lists _delta_log/ once, from the
// start, builds the snapshot from that listing instead of reading the
// _last_checkpoint hint and listing again, and returns the listing too (in
// key order; do not modify it). The snapshot is the caller's and full
// (never lean).
func LoadWithLog(ctx context.Context, st store.Store) (*Snapshot, []store.ObjectInfo, error) {
	objs, err := listLogObjects(ctx, st, 0)
	if err != nil {
		return nil, nil, err
	}
	snap, err := loadListed(ctx, st, parseListing(objs, 0), -1, false, false)
	if err != nil {
		return nil, nil, err
	}
	return snap, objs, nil
}

// loadListed is Load once the log is listed: the newest checkpoint at or
// before target (-1: the latest version) and the commits after it.
func loadListed(ctx context.Context, st store.Store, listing *logListing, target int64, ignoreCheckpoints, lean bool) (*Snapshot, error) {
	table := st.String()
	if len(listing.commits) == 0 && len(listing.checkpoints) == 0 {
		return nil, fmt.Errorf("%w at %s: %s is missing or empty", ErrTableNotFound, table, LogDir)
	}
	latest := listing.maxCommit
	if target >= 0 {
		if target > latest {
			return nil, fmt.Errorf("%w: table %s has no version %d (the latest is %d)", ErrVersionNotFound, table, target, latest)
		}
		latest = target
	}
	cp := listing.newestCheckpoint(latest)
	if ignoreCheckpoints {
		cp = nil
	}
	if _, ok := listing.commits[0]; cp == nil && !ok && !ignoreCheckpoints {
		if oldest := listing.newestCheckpoint(-1); oldest != nil {
			for _, c := range listing.checkpoints {
				if !c.v2 && c.version < oldest.version {
					oldest = c
				}
			}
			return nil, fmt.Errorf("%w: table %s: version %d was removed by log cleanup; the oldest readable version is %d",
				ErrVersionNotFound, table, latest, oldest.version)
		}
	}
	if cp != nil && cp.v2 {
		return nil, &UnsupportedError{Table: table, Op: "read", Feature: "v2Checkpoint",
			Detail: fmt.Sprintf("the newest checkpoint (version %d) is a UUID-named v2 checkpoint", cp.version)}
	}
	snap, err := buildSnapshot(ctx, st, listing, cp, latest, lean)
	var cpErr *checkpointError
	if errors.As(err, &cpErr) {
		// A checkpoint that cannot be decoded (e.g. left torn by an engine
		// whose store is not atomic): like Spark, fall back to an older
		// complete checkpoint, or to version 0, and replay from there. The
		// result is the same snapshot, never a partial one.
		snap, err = loadFallback(ctx, st, cp.version, latest, cpErr, lean)
	}
	if err != nil {
		return nil, err
	}
	if err := snap.finish(); err != nil {
		return nil, err
	}
	return snap, nil
}

// checkpointError marks a checkpoint that could not be decoded.
type checkpointError struct {
	version int64
	err     error
}

func (e *checkpointError) Error() string {
	return fmt.Sprintf("reading the checkpoint at version %d: %v", e.version, e.err)
}

func (e *checkpointError) Unwrap() error { return e.err }

// buildSnapshot reads checkpoint cp (nil: none) and replays the commits
// after it up to latest.
func buildSnapshot(ctx context.Context, st store.Store, listing *logListing, cp *checkpointRef, latest int64, lean bool) (*Snapshot, error) {
	table := st.String()
	snap := newSnapshot(table)
	snap.setLean(lean)
	start := int64(0)
	if cp != nil {
		snap.inBase = lean
		err := readCheckpoint(ctx, st, cp, func(a *Action) error { return snap.apply(a, cp.version) })
		snap.inBase = false
		if lean {
			snap.leanBase, snap.leanTail = cp, cp.version
		}
		if err != nil {
			if errors.Is(err, ErrCorruptLog) {
				return nil, fmt.Errorf("table %s: %w", table, &checkpointError{version: cp.version, err: err})
			}
			return nil, fmt.Errorf("table %s: reading the checkpoint at version %d: %w", table, cp.version, err)
		}
		snap.checkpointVersion = cp.version
		snap.version = cp.version
		start = cp.version + 1
	}
	if err := replayCommits(ctx, st, listing, snap, start, latest); err != nil {
		return nil, err
	}
	if snap.version < 0 {
		return nil, fmt.Errorf("%w at %s: the log has no commit 0 and no checkpoint", ErrCorruptLog, table)
	}
	return snap, nil
}

// loadFallback retries with every older classic checkpoint, newest first,
// then with a replay from version 0; if none gives a snapshot it returns
// the error of the checkpoint that failed first (the root cause).
func loadFallback(ctx context.Context, st store.Store, failed, latest int64, first error, lean bool) (*Snapshot, error) {
	full, err := listLog(ctx, st, 0)
	if err != nil {
		return nil, err
	}
	var older []*checkpointRef
	for v, c := range full.checkpoints {
		if v < failed && !c.v2 {
			older = append(older, c)
		}
	}
	sort.Slice(older, func(i, j int) bool { return older[i].version > older[j].version })
	for _, c := range older {
		if snap, err := buildSnapshot(ctx, st, full, c, latest, lean); err == nil {
			return snap, nil
		}
	}
	if _, ok := full.commits[0]; ok {
		if snap, err := buildSnapshot(ctx, st, full, nil, latest, lean); err == nil {
			return snap, nil
		}
	}
	return nil, first
}

// discover lists the log, starting at the _last_checkpoint hint when it can
// be trusted for the wanted version and confirming it by listing.
func discover(ctx context.Context, st store.Store, target int64) (*logListing, error) {
	hint, ok, err := readLastCheckpoint(ctx, st)
	if err != nil {
		return nil, err
	}
	if ok && hint.Version > 0 && (target < 0 || hint.Version <= target) {
		l, err := listLog(ctx, st, hint.Version)
		if err != nil {
			return nil, err
		}
		// Trust the shortcut only if the hinted checkpoint really exists
		// and is complete; otherwise list everything.
		if c := l.newestCheckpoint(target); c != nil && c.version >= hint.Version {
			return l, nil
		}
	}
	return listLog(ctx, st, 0)
}

// replayCommits applies commits from..to (inclusive) in order, reading a
// bounded window ahead so that latency-bound stores stay busy while memory
// holds at most the window's commits.
func replayCommits(ctx context.Context, st store.Store, l *logListing, snap *Snapshot, from, to int64) error {
	for v := from; v <= to; v++ {
		if _, ok := l.commits[v]; !ok {
			return fmt.Errorf("%w: table %s: versions are not contiguous: commit %d is missing (have %s)",
				ErrCorruptLog, snap.table, v, versionSummary(l))
		}
	}
	return fetchOrdered(ctx, from, to, func(ctx context.Context, v int64) ([]byte, error) {
		b, err := st.Get(ctx, CommitKey(v))
		if err != nil {
			return nil, fmt.Errorf("table %s: reading commit %d: %w", snap.table, v, err)
		}
		return b, nil
	}, func(v int64, b []byte) error {
		acts, err := DecodeCommitBytes(b)
		if err != nil {
			return fmt.Errorf("table %s: commit %d: %w", snap.table, v, err)
		}
		for i := range acts {
			if err := snap.apply(&acts[i], v); err != nil {
				return err
			}
		}
		snap.version = v
		if v == to {
			snap.setHead(v, b)
		}
		return nil
	})
}

func versionSummary(l *logListing) string {
	vs := l.commitVersions()
	if len(vs) <= 8 {
		return fmt.Sprint(vs)
	}
	return fmt.Sprintf("%d commits from %d to %d", len(vs), vs[0], vs[len(vs)-1])
}

// readAhead is how many commit files are fetched concurrently during replay.
const readAhead = 16

// fetchOrdered fetches versions from..to with up to readAhead requests in
// flight and hands them to apply strictly in order.
func fetchOrdered(ctx context.Context, from, to int64, fetch func(context.Context, int64) ([]byte, error), apply func(int64, []byte) error) error {
	if from > to {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		b   []byte
		err error
	}
	window := make(chan chan result, readAhead)
	go func() {
		defer close(window)
		for v := from; v <= to; v++ {
			ch := make(chan result, 1)
			select {
			case window <- ch:
			case <-ctx.Done():
				return
			}
			go func(v int64) {
				b, err := fetch(ctx, v)
				ch <- result{b, err}
			}(v)
		}
	}()
	v := from
	for ch := range window {
		r := <-ch
		if r.err != nil {
			return r.err
		}
		if err := apply(v, r.b); err != nil {
			return err
		}
		v++
	}
	if v <= to {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("delta: replay stopped at version %d of %d", v, to)
	}
	return nil
}

// EachFile calls fn for every live file, in no particular order. A lean
// snapshot streams the files of its base checkpoint from the store (one
// read of the checkpoint, nothing kept), then the files added since; a
// full snapshot's come from memory. Do not modify the actions.
func (s *Snapshot) EachFile(ctx context.Context, st store.Store, fn func(*Add) error) error {
	if s.hasLeanBase() {
		err := s.eachBaseAction(ctx, st, func(a *Action) error {
			if a.Add == nil {
				return nil
			}
			key, err := DecodePath(a.Add.Path)
			if err != nil {
				return err
			}
			if _, again := s.files[key]; again || s.leanRemoved[key] {
				return nil // removed since, or re-added (the newer add is in files)
			}
			return fn(a.Add)
		})
		if err != nil {
			return fmt.Errorf("table %s: streaming the base of version %d: %w", s.table, s.leanTail, err)
		}
	}
	for _, a := range s.files {
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// ApproxBytes estimates the memory the snapshot holds: its live files and
// tombstones (paths, stats, partition values), txn records and metadata.
// It is an estimate for memory budgets (the lake writer's open tables),
// not an exact count: Go's map and string headers are counted with a
// fixed overhead per entry.
func (s *Snapshot) ApproxBytes() int64 {
	const perEntry = 200                              // map slot, struct, headers
	n := int64(1024 + 4*len(s.metadata.SchemaString)) // the parsed schema is several times its JSON
	for k, a := range s.files {
		n += perEntry + int64(len(k)+len(a.Path)+len(a.Stats))
		for pk, pv := range a.PartitionValues {
			n += int64(len(pk)) + 16
			if pv != nil {
				n += int64(len(*pv))
			}
		}
	}
	for k, r := range s.tombstones {
		n += perEntry + int64(len(k)+len(r.Path)+len(r.Stats))
	}
	for k := range s.leanRemoved {
		n += 48 + int64(len(k))
	}
	for _, e := range s.txns.list {
		n += perEntry + int64(len(e.txn.AppID)+len(e.info))
	}
	return n + int64(len(s.lastInfo))
}
