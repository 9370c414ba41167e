package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/backoff"
	"github.com/omlhq/oml/internal/buildinfo"
	"github.com/omlhq/oml/internal/lake/store"
)

// ErrConflict is wrapped by *ConflictError: another writer committed the
// version this commit tried to create.
var ErrConflict = errors.New("concurrent Delta commit")

// ErrTxnNotNewer means a commit carried a txn version that is not greater
// than the one the table already holds for that appId.
var ErrTxnNotNewer = errors.New("txn version is not newer than the table's")

// ErrWriterBroken means an earlier failure left the writer's in-memory
// snapshot unusable; open a new Writer.
var ErrWriterBroken = errors.New("Delta writer must be reopened")

// CommitSummary says what one commit did, as far as a competing writer
// needs to know.
type CommitSummary struct {
	Version         int64
	Operation       string
	CommitID        string
	Timestamp       int64
	Txns            map[string]int64 // txn versions per appId in this commit
	AddedFiles      int
	RemovedFiles    int
	DataChange      bool // some add or remove had dataChange=true
	ProtocolChanged bool
	MetadataChanged bool
}

// ConflictError is returned when a commit lost the race for its version.
// Winners are the commits that landed from that version up to the latest
// one, oldest first. The writer has already caught up with them, so a retry
// goes to the next free version.
type ConflictError struct {
	Table   string
	Version int64
	Winners []CommitSummary
}

func (e *ConflictError) Error() string {
	var ops []string
	for _, w := range e.Winners {
		op := w.Operation
		if op == "" {
			op = "unknown operation"
		}
		ops = append(ops, fmt.Sprintf("%d (%s)", w.Version, op))
	}
	return fmt.Sprintf("Delta table %s: another writer committed version %d first (winning commits: %s); re-check the table and retry",
		e.Table, e.Version, strings.Join(ops, ", "))
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// TxnApplied reports whether a winning commit recorded appID at version or
// later: "someone already applied my transaction".
func (e *ConflictError) TxnApplied(appID string, version int64) bool {
	for _, w := range e.Winners {
		if v, ok := w.Txns[appID]; ok && v >= version {
			return true
		}
	}
	return false
}

// ChangedFiles reports whether a winner added or removed files.
func (e *ConflictError) ChangedFiles() bool {
	for _, w := range e.Winners {
		if w.AddedFiles > 0 || w.RemovedFiles > 0 {
			return true
		}
	}
	return false
}

// AmbiguousCommitError means the store could not say whether the commit
// landed and reading it back did not settle it either. The writer must be
// reopened (the caller then checks its txn version on the table).
type AmbiguousCommitError struct {
	Table   string
	Version int64
	Err     error
}

func (e *AmbiguousCommitError) Error() string {
	return fmt.Sprintf("Delta table %s: the outcome of the commit of version %d is unknown (%v); reopen the table and check its txn version before retrying",
		e.Table, e.Version, e.Err)
}

func (e *AmbiguousCommitError) Unwrap() []error { return []error{store.ErrAmbiguous, e.Err} }

// Options configure a Writer.
type Options struct {
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// CheckpointInterval is the auto-checkpoint policy: MaybeCheckpoint
	// writes one when this many commits were made since the last
	// checkpoint. 0 means the table's delta.checkpointInterval, else 100.
	CheckpointInterval int
	// ReadBackAttempts bounds how often an ambiguous commit is read back
	// (and, if absent, re-put at the same version). 0 means 5.
	ReadBackAttempts int
	// Lean keeps the writer's snapshot without the files and tombstones of
	// its last checkpoint (see Snapshot): memory stays flat however many
	// files the table has, checkpoints stream the previous one. For
	// append-only writers (the lake writer's bronze and gold tables): a
	// lean writer refuses commits that remove files.
	Lean bool
}

// Writer commits to one table. It keeps the table's snapshot in memory and
// applies its own commits to it incrementally; it re-reads the log only
// after losing a race (or after an error that leaves the outcome open).
// A Writer is safe for concurrent use, but commits are serialized.
type Writer struct {
	st    store.Store
	table string
	opts  Options

	mu      sync.Mutex
	snap    *Snapshot
	stale   bool  // re-read the log before the next commit
	broken  error // sticky: the in-memory snapshot cannot be trusted
	gateErr error // the writer gate's verdict on the current snapshot

	// create is set on a NewTable writer until its first commit creates
	// the table (or it learns that another writer did).
	create       *pendingCreate
	createSchema *StructType // the parsed schema of the table to create
}

// EngineInfo is what oml writes as commitInfo.engineInfo.
func EngineInfo() string { return engineInfo() }

// engineInfo is read once: the build information does not change while
// the process runs, and parsing it cost about 50 µs per commit.
var engineInfo = sync.OnceValue(func() string { return "oml/" + buildinfo.String() })

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// OpenWriter loads the latest snapshot and runs the writer gate.
func OpenWriter(ctx context.Context, st store.Store, opts Options) (*Writer, error) {
	snap, err := Load(ctx, st, LoadOptions{lean: opts.Lean})
	if err != nil {
		return nil, err
	}
	w := &Writer{st: st, table: st.String(), opts: opts, snap: snap}
	w.gateErr = checkWrite(w.table, snap.protocol, &snap.metadata, snap.schema)
	if w.gateErr != nil {
		return nil, w.gateErr
	}
	return w, nil
}

// WriterOn is OpenWriter on a snapshot the caller already loaded (Load,
// LoadWithLog), so a caller that reads a table's snapshot to decide what
// to do and then commits does not load it twice. The writer takes the
// snapshot over: it updates it in place from then on, so the caller must
// not use it on its own any more. The snapshot may be behind the table by
// the time the writer commits; that is what every writer's snapshot may
// be, and the commit protocol settles it (the put-if-absent of the next
// version loses, the writer catches up and returns a *ConflictError).
// snap's leanness must match opts.Lean: a lean snapshot lacks the file
// list a writer of removes needs, and a lean writer must not hold a full
// snapshot's memory.
func WriterOn(st store.Store, snap *Snapshot, opts Options) (*Writer, error) {
	if snap == nil || snap.version < 0 {
		return nil, errors.New("delta: WriterOn needs a loaded snapshot")
	}
	if snap.lean != opts.Lean {
		return nil, fmt.Errorf("delta: table %s: the snapshot is lean=%t but the writer is asked for lean=%t", snap.table, snap.lean, opts.Lean)
	}
	if snap.table != st.String() {
		return nil, fmt.Errorf("delta: the snapshot of table %s cannot open a writer on %s", snap.table, st)
	}
	w := &Writer{st: st, table: st.String(), opts: opts, snap: snap}
	w.gateErr = checkWrite(w.table, snap.protocol, &snap.metadata, snap.schema)
	if w.gateErr != nil {
		return nil, w.gateErr
	}
	return w, nil
}

// TableSpec describes a table to create.
type TableSpec struct {
	Schema           *StructType
	PartitionColumns []string
	Configuration    map[string]string
	Name             string
	Description      string
}

// CreateTable creates a table as version 0 (commitInfo, protocol 1/2,
// metaData) and returns a writer on it. If the table already exists it
// fails with a *ConflictError (errors.Is ErrConflict).
func CreateTable(ctx context.Context, st store.Store, spec TableSpec, opts Options) (*Writer, error) {
	w, proto, md, err := newTableWriter(st, spec, opts)
	if err != nil {
		return nil, err
	}
	partBy, _ := json.Marshal(md.PartitionColumns)
	props, _ := json.Marshal(md.Configuration)
	_, err = w.commit(ctx, Commit{
		Operation:           "CREATE TABLE",
		OperationParameters: map[string]any{"partitionBy": string(partBy), "properties": string(props)},
	}, proto, md)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// NewTable returns a writer on a table that does not exist yet, without
// writing anything: its first Commit creates the table as version 0 with
// the protocol and metaData of spec in the same log entry as that commit's
// files and txn (as Spark's streaming sink creates its table), so a new
// table costs one log entry and one data file, not two log entries. Until
// then WriteFile works against spec's schema. If another writer creates the
// table first, that Commit loses the put-if-absent race: the writer catches
// up with the winner's log and returns a *ConflictError, and a retry is an
// ordinary commit on the existing table.
func NewTable(st store.Store, spec TableSpec, opts Options) (*Writer, error) {
	w, proto, md, err := newTableWriter(st, spec, opts)
	if err != nil {
		return nil, err
	}
	w.create = &pendingCreate{proto: proto, md: md}
	// WriteFile and the caller's checks read the schema and metadata from
	// the snapshot; version stays -1 until the first commit lands.
	w.snap.protocol, w.snap.metadata, w.snap.schema = *proto, *md, w.createSchema
	return w, nil
}

// pendingCreate is the protocol and metaData a NewTable writer's first
// commit carries.
type pendingCreate struct {
	proto *Protocol
	md    *Metadata
}

// newTableWriter validates spec and builds the writer, protocol and
// metaData of a table's version 0.
func newTableWriter(st store.Store, spec TableSpec, opts Options) (*Writer, *Protocol, *Metadata, error) {
	if spec.Schema == nil || len(spec.Schema.Fields) == 0 {
		return nil, nil, nil, errors.New("delta: a table needs a schema with at least one column")
	}
	schemaString, err := MarshalSchema(spec.Schema)
	if err != nil {
		return nil, nil, nil, err
	}
	// Unique names, known types; one parse per distinct schema string is
	// shared by every new table of a kind (10,000 tenants create 40,000).
	schemaString, parsed, err := parseSchemaShared(schemaString)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, pc := range spec.PartitionColumns {
		f := spec.Schema.Field(pc)
		if f == nil {
			return nil, nil, nil, fmt.Errorf("delta: partition column %q is not in the schema", pc)
		}
		switch f.Type.(type) {
		case *StructType, *ArrayType, *MapType:
			return nil, nil, nil, fmt.Errorf("delta: partition column %q has nested type %s", pc, f.Type.TypeString())
		}
	}
	now := opts.now().UnixMilli()
	md := &Metadata{
		ID:               uuid.NewString(),
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     schemaString,
		PartitionColumns: append([]string{}, spec.PartitionColumns...),
		Configuration:    map[string]string{},
		CreatedTime:      &now,
	}
	for k, v := range spec.Configuration {
		md.Configuration[k] = v
	}
	if spec.Name != "" {
		md.Name = &spec.Name
	}
	if spec.Description != "" {
		md.Description = &spec.Description
	}
	proto := &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	table := st.String()
	snap := newSnapshot(table)
	snap.setLean(opts.Lean)
	w := &Writer{st: st, table: table, opts: opts, snap: snap, createSchema: parsed}
	if w.gateErr = checkWrite(table, *proto, md, spec.Schema); w.gateErr != nil {
		return nil, nil, nil, w.gateErr
	}
	return w, proto, md, nil
}

// Snapshot returns the writer's current snapshot. It is updated in place by
// the writer's own commits and refreshes: use it between commits, do not
// keep it across one (Load gives an independent snapshot).
func (w *Writer) Snapshot() *Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap
}

// Version is the version of the writer's snapshot.
func (w *Writer) Version() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap.version
}

// Table describes the table's location.
func (w *Writer) Table() string { return w.table }

// Store is the table's store.
func (w *Writer) Store() store.Store { return w.st }

// Commit is one atomic change to the table.
type Commit struct {
	// Operation is commitInfo.operation ("WRITE", "MERGE", "OPTIMIZE", ...).
	Operation string
	// OperationParameters and OperationMetrics go to commitInfo verbatim
	// (Spark writes string values; other engines read them as opaque).
	OperationParameters map[string]any
	OperationMetrics    map[string]any
	// Extra are additional commitInfo fields (e.g. the lake writer's batch
	// bounds). They may not replace a field oml sets.
	Extra map[string]any
	// Adds are new files, already written whole to the store.
	Adds []*Add
	// Removes are live files this commit removes (see Writer.Remove).
	Removes []*Remove
	// Txn, when set, records (AppID, Version); LastUpdated defaults to now.
	Txn *Txn
	// RewindTxn allows Txn to carry a version at or below the table's: a
	// restore-style commit (`oml lake repair` rewinding a table to the
	// last seq it shares with a database that lost its tail) sets the txn
	// version back with the files. Every other commit must move it
	// forward (ErrTxnNotNewer), which is what makes a replay harmless.
	RewindTxn bool
}

// Remove builds the remove action for a live file (by decoded path), with
// its partition values and size (extendedFileMetadata) so other engines can
// use it: a change of the table's data (dataChange true).
func (w *Writer) Remove(decodedPath string) (*Remove, error) {
	return w.remove(decodedPath, true)
}

// RemoveCompacted is Remove for a file whose rows a compaction rewrote into
// another (dataChange false: readers of the change feed skip it).
func (w *Writer) RemoveCompacted(decodedPath string) (*Remove, error) {
	return w.remove(decodedPath, false)
}

func (w *Writer) remove(decodedPath string, dataChange bool) (*Remove, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.snap.files[decodedPath]
	if !ok {
		return nil, fmt.Errorf("delta: table %s has no live file %q at version %d", w.table, decodedPath, w.snap.version)
	}
	ts := w.opts.now().UnixMilli()
	ext := true
	size := a.Size
	return &Remove{
		Path: a.Path, DeletionTimestamp: &ts, DataChange: dataChange, ExtendedFileMetadata: &ext,
		PartitionValues: a.PartitionValues, Size: &size, Stats: a.Stats, Tags: a.Tags,
	}, nil
}

// Commit writes c as the next version. It returns the new version, or a
// *ConflictError if another writer took that version (the writer has then
// caught up and a retry goes to the next one), or an error from the gate.
func (w *Writer) Commit(ctx context.Context, c Commit) (int64, error) {
	return w.commit(ctx, c, nil, nil)
}

var reservedCommitInfo = map[string]bool{
	"timestamp": true, "operation": true, "operationParameters": true, "operationMetrics": true,
	"engineInfo": true, "txnId": true, "readVersion": true, "isolationLevel": true, "isBlindAppend": true,
	"inCommitTimestamp": true,
}

// commit is Commit, and the first commit of a table (proto and md set, by
// CreateTable). One step each: check the commit against the snapshot, build
// its actions, put the log entry (put says what a lost or ambiguous put
// means), and apply the landed actions to the snapshot.
func (w *Writer) commit(ctx context.Context, c Commit, proto *Protocol, md *Metadata) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return -1, w.broken
	}
	if w.stale {
		if _, err := w.catchUp(ctx); err != nil {
			return -1, err
		}
	}
	if w.gateErr != nil {
		return -1, w.gateErr
	}
	if md == nil && w.create != nil {
		proto, md = w.create.proto, w.create.md
	}
	if err := w.checkCommit(c, md); err != nil {
		return -1, err
	}
	now := w.opts.now().UnixMilli()
	txn, err := w.txnFor(c, now)
	if err != nil {
		return -1, err
	}
	ciRaw, err := w.commitInfo(c, md, now)
	if err != nil {
		return -1, err
	}
	actions := commitActions(ciRaw, proto, md, c, txn)
	body, err := EncodeCommit(actions)
	if err != nil {
		return -1, err
	}
	v := w.snap.version + 1
	if err := w.put(ctx, v, body); err != nil {
		return -1, err
	}
	if err := w.landed(actions, v, proto, md); err != nil {
		return -1, err
	}
	w.snap.setHead(v, body)
	w.create = nil
	return v, nil
}

// checkCommit refuses a commit the snapshot cannot take: no operation, a
// remove on a lean or append-only table, a path added or removed twice, an
// add without its partition values, a remove of a file that is not live.
func (w *Writer) checkCommit(c Commit, md *Metadata) error {
	if c.Operation == "" {
		return errors.New("delta: a commit needs an operation name")
	}
	s := w.snap
	if s.lean && len(c.Removes) > 0 {
		return fmt.Errorf("delta: the writer of table %s is lean (append-only) and cannot commit removes; open it without Options.Lean", w.table)
	}
	if md == nil && appendOnly(&s.metadata) {
		for _, r := range c.Removes {
			if r.DataChange {
				return &UnsupportedError{Table: w.table, Op: "write to", Feature: "appendOnly",
					Detail: "delta.appendOnly is true and this commit removes data"}
			}
		}
	}
	partCols := s.metadata.PartitionColumns
	if md != nil {
		partCols = md.PartitionColumns
	}
	seen := map[string]bool{}
	for _, a := range c.Adds {
		key, err := DecodePath(a.Path)
		if err != nil {
			return err
		}
		if seen[key] {
			return fmt.Errorf("delta: commit adds or removes %q twice", key)
		}
		seen[key] = true
		if len(a.PartitionValues) != len(partCols) {
			return fmt.Errorf("delta: add %q has partition values for %d columns, the table has %d partition columns", a.Path, len(a.PartitionValues), len(partCols))
		}
		for _, pc := range partCols {
			if _, ok := a.PartitionValues[pc]; !ok {
				return fmt.Errorf("delta: add %q has no value for partition column %q", a.Path, pc)
			}
		}
	}
	for _, r := range c.Removes {
		key, err := DecodePath(r.Path)
		if err != nil {
			return err
		}
		if seen[key] {
			return fmt.Errorf("delta: commit adds or removes %q twice", key)
		}
		seen[key] = true
		if _, ok := s.files[key]; !ok {
			return fmt.Errorf("delta: commit removes %q, which is not a live file of table %s at version %d", key, w.table, s.version)
		}
	}
	return nil
}

// txnFor is the commit's txn action (nil without one): its version must be
// newer than the table's for the app id, unless the commit rewinds it.
func (w *Writer) txnFor(c Commit, now int64) (*Txn, error) {
	if c.Txn == nil {
		return nil, nil
	}
	s := w.snap
	t := *c.Txn
	if t.AppID == "" {
		return nil, errors.New("delta: a txn needs an appId")
	}
	if cur := s.txns.find(t.AppID); cur != nil && cur.txn.Version >= t.Version && !c.RewindTxn {
		return nil, fmt.Errorf("%w: table %s already holds txn %q version %d, this commit carries %d", ErrTxnNotNewer, w.table, t.AppID, cur.txn.Version, t.Version)
	}
	if t.LastUpdated == nil {
		t.LastUpdated = &now
	}
	return &t, nil
}

// commitInfo encodes the commit's commitInfo action: the caller's extra
// fields, then the ones oml sets (which the caller may not give).
func (w *Writer) commitInfo(c Commit, md *Metadata, now int64) (json.RawMessage, error) {
	commitID := uuid.NewString()
	ci := map[string]any{}
	for k, v := range c.Extra {
		if reservedCommitInfo[k] {
			return nil, fmt.Errorf("delta: commitInfo field %q is set by oml and cannot be given as an extra field", k)
		}
		ci[k] = v
	}
	ci["timestamp"] = now
	ci["operation"] = c.Operation
	params, err := stringValues(c.OperationParameters)
	if err != nil {
		return nil, fmt.Errorf("delta: operationParameters: %w", err)
	}
	ci["operationParameters"] = params
	if len(c.OperationMetrics) > 0 {
		metrics, err := stringValues(c.OperationMetrics)
		if err != nil {
			return nil, fmt.Errorf("delta: operationMetrics: %w", err)
		}
		ci["operationMetrics"] = metrics
	}
	ci["engineInfo"] = EngineInfo()
	ci["txnId"] = commitID
	ci["isolationLevel"] = "Serializable"
	ci["isBlindAppend"] = len(c.Removes) == 0 && md == nil
	if md == nil {
		ci["readVersion"] = w.snap.version
	}
	ciRaw, err := appendJSON(make([]byte, 0, 512), ci)
	if err != nil {
		return nil, fmt.Errorf("delta: encoding commitInfo: %w", err)
	}
	// The snapshot keeps it (the txn's commitInfo) while the writer stays
	// open: an exact copy, not the 512-byte (or grown) buffer it was
	// appended to.
	return bytes.Clone(ciRaw), nil
}

// commitActions orders a commit's actions: commitInfo first, then
// protocol and metadata (a table's first commit), removes, adds, and the
// txn last.
func commitActions(ciRaw json.RawMessage, proto *Protocol, md *Metadata, c Commit, txn *Txn) []Action {
	actions := make([]Action, 0, 4+len(c.Adds)+len(c.Removes))
	actions = append(actions, Action{CommitInfo: ciRaw})
	if proto != nil {
		actions = append(actions, Action{Protocol: proto})
	}
	if md != nil {
		actions = append(actions, Action{MetaData: md})
	}
	for _, r := range c.Removes {
		actions = append(actions, Action{Remove: r})
	}
	for _, a := range c.Adds {
		actions = append(actions, Action{Add: a})
	}
	if txn != nil {
		actions = append(actions, Action{Txn: txn})
	}
	return actions
}

// landed applies our own landed commit v to the snapshot: no listing on
// the happy path. A failure here leaves the snapshot unknown, so the
// writer is broken from then on.
func (w *Writer) landed(actions []Action, v int64, proto *Protocol, md *Metadata) error {
	s := w.snap
	for i := range actions {
		if err := s.apply(&actions[i], v); err != nil {
			w.broken = fmt.Errorf("%w: applying our own commit %d failed: %v", ErrWriterBroken, v, err)
			return w.broken
		}
	}
	s.version = v
	if md != nil || proto != nil {
		if err := w.refinish(); err != nil {
			return err
		}
	}
	return nil
}

// stringValues renders operationParameters/operationMetrics the way Spark
// reads them (a map of strings): strings and nulls stay, any other value
// becomes its JSON text ("3", "true", "[\"day\"]").
func stringValues(m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch v.(type) {
		case nil, string:
			out[k] = v
		default:
			b, err := appendJSON(nil, v)
			if err != nil {
				return nil, fmt.Errorf("value of %q: %w", k, err)
			}
			out[k] = string(b)
		}
	}
	return out, nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// put creates commit v with PutIfAbsent and settles every outcome: it
// returns nil only if exactly body is stored at v.
func (w *Writer) put(ctx context.Context, v int64, body []byte) error {
	key := CommitKey(v)
	attempts := w.opts.ReadBackAttempts
	if attempts <= 0 {
		attempts = 5
	}
	var lastAmbiguity error
	for attempt := 0; attempt < attempts; attempt++ {
		err := w.st.PutIfAbsent(ctx, key, body)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, store.ErrExists):
			// Someone holds v. It may be us: a backend retry after a
			// request that landed, or an earlier ambiguous attempt.
			got, rerr := w.st.Get(ctx, key)
			if rerr != nil {
				lastAmbiguity = rerr
				w.stale = true
				if readBack.Wait(ctx, attempt) != nil {
					return w.ambiguous(v, ctx.Err())
				}
				continue
			}
			if bytes.Equal(got, body) {
				return nil
			}
			return w.lost(ctx, v)
		case errors.Is(err, store.ErrAmbiguous):
			lastAmbiguity = err
			w.stale = true
			got, rerr := w.st.Get(ctx, key)
			switch {
			case rerr == nil && bytes.Equal(got, body):
				w.stale = false
				return nil
			case rerr == nil:
				return w.lost(ctx, v)
			case errors.Is(rerr, store.ErrNotFound):
				// Not there (yet): put the same bytes at the same version
				// again. If the first request lands later, this one gets
				// ErrExists and the read-back above recognizes our bytes.
			default:
				lastAmbiguity = rerr
			}
			if readBack.Wait(ctx, attempt) != nil {
				return w.ambiguous(v, ctx.Err())
			}
		default:
			// A terminal store error. Usually nothing was written (the store
			// reports possible writes as ErrAmbiguous), but the file store
			// also fails a put whose flush after publishing failed: the
			// commit may then be visible without being known durable. It is
			// not taken as ours either way (a read-back would acknowledge
			// it); the next commit re-reads the log first and finds it, and
			// the lake writer's txn versions keep its rows from being
			// applied twice.
			w.stale = true
			return fmt.Errorf("Delta table %s: writing commit %d: %w", w.table, v, err)
		}
	}
	return w.ambiguous(v, lastAmbiguity)
}

func (w *Writer) ambiguous(v int64, err error) error {
	w.broken = &AmbiguousCommitError{Table: w.table, Version: v, Err: err}
	return w.broken
}

// readBack is the wait between read-backs of an ambiguous or contested
// commit: 50ms doubling to 2s, no jitter (one writer retries its own put).
var readBack = backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}

// lost handles a lost race for version v: catch up with the winners and
// report them.
func (w *Writer) lost(ctx context.Context, v int64) error {
	winners, err := w.catchUp(ctx)
	if err != nil {
		return err
	}
	if w.gateErr != nil {
		return w.gateErr
	}
	return &ConflictError{Table: w.table, Version: v, Winners: winners}
}

// catchUp applies every commit after the writer's snapshot version, then
// re-runs the writer gate (fail closed if someone upgraded the table).
func (w *Writer) catchUp(ctx context.Context) ([]CommitSummary, error) {
	s := w.snap
	from := s.version + 1
	l, err := listLog(ctx, w.st, from)
	if err != nil {
		return nil, err
	}
	if l.maxCommit < from {
		w.stale = false
		return nil, nil
	}
	if w.create != nil {
		// Another writer created the table: build on its version 0, not
		// on the metadata this writer meant to create it with.
		w.create = nil
		s = newSnapshot(w.table)
		s.setLean(w.opts.Lean)
		w.snap = s
	}
	var winners []CommitSummary
	changedMeta := false
	err = func() error {
		for v := from; v <= l.maxCommit; v++ {
			if _, ok := l.commits[v]; !ok {
				return fmt.Errorf("%w: table %s: versions are not contiguous: commit %d is missing", ErrCorruptLog, w.table, v)
			}
		}
		return fetchOrdered(ctx, from, l.maxCommit, func(ctx context.Context, v int64) ([]byte, error) {
			return w.st.Get(ctx, CommitKey(v))
		}, func(v int64, b []byte) error {
			acts, err := DecodeCommitBytes(b)
			if err != nil {
				return fmt.Errorf("table %s: commit %d: %w", w.table, v, err)
			}
			sum := summarize(v, acts)
			changedMeta = changedMeta || sum.ProtocolChanged || sum.MetadataChanged
			for i := range acts {
				if err := s.apply(&acts[i], v); err != nil {
					return err
				}
			}
			s.version = v
			if v == l.maxCommit {
				s.setHead(v, b)
			}
			winners = append(winners, sum)
			return nil
		})
	}()
	if err != nil {
		// Part of the new commits may already be applied: the snapshot
		// can no longer be trusted.
		w.broken = fmt.Errorf("%w: catching up with table %s failed: %v", ErrWriterBroken, w.table, err)
		return nil, w.broken
	}
	w.stale = false
	if changedMeta {
		if err := w.refinish(); err != nil {
			return nil, err
		}
	}
	return winners, nil
}

// refinish re-parses the schema and re-runs both gates after protocol or
// metadata changed.
func (w *Writer) refinish() error {
	if err := w.snap.finish(); err != nil {
		w.gateErr = err
		return err
	}
	w.gateErr = checkWrite(w.table, w.snap.protocol, &w.snap.metadata, w.snap.schema)
	return w.gateErr
}

func summarize(v int64, acts []Action) CommitSummary {
	sum := CommitSummary{Version: v, Txns: map[string]int64{}}
	for i := range acts {
		a := &acts[i]
		switch {
		case isSet(a.CommitInfo):
			ci := ParseCommitInfo(a.CommitInfo)
			sum.Operation, sum.CommitID, sum.Timestamp = ci.Operation, ci.CommitID, ci.Timestamp
		case a.Add != nil:
			sum.AddedFiles++
			sum.DataChange = sum.DataChange || a.Add.DataChange
		case a.Remove != nil:
			sum.RemovedFiles++
			sum.DataChange = sum.DataChange || a.Remove.DataChange
		case a.Txn != nil:
			sum.Txns[a.Txn.AppID] = a.Txn.Version
		case a.Protocol != nil:
			sum.ProtocolChanged = true
		case a.MetaData != nil:
			sum.MetadataChanged = true
		}
	}
	return sum
}

// Refresh catches up with commits made by others (normally only needed by
// long-lived writers that want to see them before the next commit).
func (w *Writer) Refresh(ctx context.Context) ([]CommitSummary, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return nil, w.broken
	}
	sums, err := w.catchUp(ctx)
	if err != nil {
		return nil, err
	}
	return sums, w.gateErr
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ApproxBytes estimates the memory of the writer's snapshot
// (Snapshot.ApproxBytes).
func (w *Writer) ApproxBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap.ApproxBytes()
}
