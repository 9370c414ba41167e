package lakesummary

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/summaryfile"
)

// Key is the summary object under the lake root (beside _oml_witness/ and
// _oml_holds/; no tenant id, so no table listing ever takes it for a
// table).
const Key = "_oml_summary/tables.v1"

// header opens the object: the format and the SHA-256 of the body.
const header = "oml lake summary v1 "

// ScrubShare: every run reads in full (ignoring the summary) the
// 1/ScrubShare of the tables read in full least recently, and every table
// read in full longer ago than MaxAge, so whatever the fingerprint cannot
// see (a file rewritten in place with its size and time kept, a forged
// summary) is found within ScrubShare runs or MaxAge.
const (
	ScrubShare = 64
	MaxAge     = 24 * time.Hour
)

// Options configure Read.
type Options struct {
	// SmallFileSize: Table.SmallFiles counts the files under it. Kept
	// tables are used only when it is the size they were counted with
	// (0: SmallFiles is not needed, any will do).
	SmallFileSize int64
	// Vacuum: VacuumDueBytes is needed; a kept table whose tombstones
	// straddle the cutoff is read again.
	Vacuum bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Write stores the refreshed summary (doctor); without it the
	// summary is only read (lake status).
	Write bool
	// Off reads every table in full, neither reading nor writing the
	// summary.
	Off bool
	// NoHead: bronze's newest event is not needed (lake status); a table
	// read in full then reads no data file (and renews no entry).
	NoHead bool
	// Loaded is the summary as Load read it, when the caller read it
	// before it knew the tables (doctor: beside its database check);
	// nil: Read reads it.
	Loaded *Loaded
}

// Loaded is the summary object read and parsed, not yet checked against
// any table: Load's answer, for Options.Loaded.
type Loaded struct {
	entries map[tables.TableKey]*entry
	size    int
	err     error
}

// Load reads the summary for a later Read (Options.Loaded). It never
// fails: a summary that is missing or does not parse is Read's "absent"
// or "invalid" state, as when Read reads it itself.
func Load(ctx context.Context, lake store.Store) *Loaded {
	l := &Loaded{}
	l.entries, l.size, l.err = load(ctx, lake)
	return l
}

func (o *Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Stats say how a Read went, for the reports.
type Stats struct {
	// State of the summary found: "ok", "absent", "off", or "invalid: why"
	// (every table was then read in full).
	State string `json:"state"`
	// FromSummary tables were kept (their logs are unchanged); Read were
	// read in full: new or changed since, unreadable, or due for the
	// scrub (Scrubbed of them).
	FromSummary int `json:"from_summary"`
	Read        int `json:"read"`
	Scrubbed    int `json:"scrubbed"`
	// OldestFullRead is the oldest full read behind any table reported
	// (nil when every table was read now): the scrub's last full pass.
	OldestFullRead *time.Time `json:"oldest_full_read_at"`
	// WriteError says why the refreshed summary could not be stored.
	WriteError string `json:"write_error,omitempty"`
}

// Read returns every table of keys, in keys order: each table whose
// summary entry still proves true (the same log files, names, sizes and
// times, from its checkpoint on; for bronze the same head data files) is
// taken from the summary, every other one is read in full. With
// opts.Write the summary is then stored again. It never fails: a table
// that cannot be read is reported as such (Err, LoadErr), as a full read
// reports it.
func Read(ctx context.Context, lake store.Store, keys []tables.TableKey, opts Options) ([]Table, Stats) {
	out, st, saved := ReadDeferred(ctx, lake, keys, opts)
	st.WriteError = saved()
	return out, st
}

// ReadDeferred is Read with the refreshed summary stored in the
// background: the tables come back before the write (at 28,000 tables
// encoding and storing the 16 MB summary was the read's last step, and
// every check waited for it), and saved waits for the write and returns
// what Stats.WriteError would say ("" when it was stored or nothing was
// to store). ctx must outlive the write: cancel it only after saved
// returns. The tables returned are the caller's to read, never to change
// (the write encodes them meanwhile).
func ReadDeferred(ctx context.Context, lake store.Store, keys []tables.TableKey, opts Options) (_ []Table, _ Stats, saved func() string) {
	var st Stats
	var old map[tables.TableKey]*entry
	var oldSize int
	switch {
	case opts.Off:
		st.State = "off"
	default:
		l := opts.Loaded
		if l == nil {
			l = Load(ctx, lake)
		}
		old, oldSize = l.entries, l.size
		st.State = summaryfile.State(l.err)
	}
	now := opts.now()
	scrub := scrubbed(keys, old, now)
	out := make([]Table, len(keys))
	fresh := make([]*entry, len(keys))
	kept := make([]bool, len(keys))
	// store.Concurrency workers take the tables in turn: a goroutine per
	// table (20,000 at 5,000 tenants) grew a fresh stack for each.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(store.Concurrency(lake), len(keys)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(keys); i = int(next.Add(1) - 1) {
				k := keys[i]
				if e := old[k]; e != nil && !scrub[k] {
					if t, ok := e.verify(ctx, lake, &opts, now); ok {
						out[i], fresh[i], kept[i] = t, e, true
						continue
					}
				}
				out[i], fresh[i] = readFull(ctx, lake, k, &opts, now) // a failure is this table's, kept in out
			}
		})
	}
	wg.Wait()
	var oldest time.Time
	for i, k := range keys {
		switch {
		case kept[i]:
			st.FromSummary++
			if at := fresh[i].fullReadAt; oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		default:
			st.Read++
			if scrub[k] {
				st.Scrubbed++
			}
		}
	}
	if !oldest.IsZero() {
		st.OldestFullRead = &oldest
	}
	// A lake that holds no table yet gets no summary: doctor and status
	// are reads, and storing one would create the lake (a missing lake is
	// a finding of its own, not something a check may paper over).
	if !opts.Write || opts.Off || (st.Read == 0 && len(old) == len(keys)) || !anyTable(fresh) {
		return out, st, func() string { return "" }
	}
	done := make(chan string, 1)
	go func() {
		var why string
		if err := save(ctx, lake, fresh, oldSize); err != nil {
			why = err.Error()
		}
		done <- why
	}()
	return out, st, sync.OnceValue(func() string { return <-done })
}

// anyTable: some entry is of a table the lake holds.
func anyTable(entries []*entry) bool {
	for _, e := range entries {
		if e != nil && e.t.Exists {
			return true
		}
	}
	return false
}

// scrubbed picks the kept tables to read in full anyway: every one read
// in full longer than MaxAge ago, and at least the 1/ScrubShare read in
// full least recently.
func scrubbed(keys []tables.TableKey, old map[tables.TableKey]*entry, now time.Time) map[tables.TableKey]bool {
	var have []*entry
	for _, k := range keys {
		if e := old[k]; e != nil {
			have = append(have, e)
		}
	}
	// Stable: a run's entries share its time, so within one the scrub
	// goes on in keys order, and which tables it reads is deterministic.
	out := map[tables.TableKey]bool{}
	for _, e := range summaryfile.Due(have, func(e *entry) time.Time { return e.fullReadAt }, ScrubShare, MaxAge, now) {
		out[e.key] = true
	}
	return out
}

// entry is one table in the summary: what a full read found, when, and
// the fingerprint of what it read.
type entry struct {
	key        tables.TableKey
	fullReadAt time.Time
	start      int64             // the fingerprint covers the log from this version on
	files      []string          // bronze: the head's data files, relative to the table
	fp         [sha256.Size]byte // fingerprint(log from start, files' stats)
	t          Table             // the read's results (Key, Exists, ... Bronze)
}

// verify re-lists the entry's log (and stats the bronze head's files): an
// unchanged fingerprint means the log a reader would replay is the one the
// full read replayed, so its results still hold.
func (e *entry) verify(ctx context.Context, lake store.Store, opts *Options, now time.Time) (Table, bool) {
	t := e.t
	if opts.SmallFileSize != 0 && t.smallSize != opts.SmallFileSize {
		return Table{}, false
	}
	if t.Exists {
		cutoff := now.Add(-t.Retention).UnixMilli()
		switch {
		case t.datedBytes == 0 || cutoff <= t.datedMin:
			t.VacuumDueBytes = 0
		case cutoff > t.datedMax:
			t.VacuumDueBytes = t.datedBytes
		case opts.Vacuum:
			return Table{}, false // some tombstones are due, some not: count them
		}
	}
	st, err := e.key.Store(lake)
	if err != nil {
		return Table{}, false
	}
	log, err := st.List(ctx, delta.LogDir, startAfter(e.start))
	if err != nil {
		return Table{}, false
	}
	var files []store.ObjectInfo
	for _, k := range e.files {
		info, err := st.Stat(ctx, k)
		if err != nil {
			return Table{}, false
		}
		files = append(files, info)
	}
	if fingerprint(log, files) != e.fp {
		return Table{}, false
	}
	t.FromSummary = true
	return t, true
}

// startAfter is List's startAfter for the log from version v on: every
// file of version v sorts after "%020d" of v-1 followed by '/' (a '.'
// sorts before it), and the _last_checkpoint hint after every version.
func startAfter(v int64) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%s%020d/", delta.LogDir, v-1)
}

// fingerprint hashes the names, sizes and modification times of the log
// files and of the data files.
func fingerprint(log, files []store.ObjectInfo) [sha256.Size]byte {
	h := sha256.New()
	var b []byte
	for i, group := range [][]store.ObjectInfo{log, files} {
		for _, o := range group {
			b = append(b[:0], "LD"[i], 0)
			b = append(b, o.Key...)
			b = append(b, 0)
			b = strconv.AppendInt(b, o.Size, 10)
			b = append(b, 0)
			b = strconv.AppendInt(b, o.ModTime.UnixNano(), 10)
			b = append(b, '\n')
			h.Write(b)
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// ---- the object ----

// The summary is text: a header line with the body's SHA-256, then one
// line per table of tab-separated fields (fields below). A body that does
// not hash to its header, or any line that does not parse, voids the
// whole summary: every table is then read in full.
var fields = []string{
	"tenant", "kind", "full_read_at_ms", "start", "fingerprint", "exists", "version", "checkpoint_version",
	"files", "small_file_size", "small_files", "tombstoned_bytes", "dated_bytes", "dated_min", "dated_max",
	"retention_ns", "txn_version", "record_known", "record_found", "record", "head_ok", "head_seq",
	"head_hash", "head_others", "head_version", "head_files",
}

// summaryMax bounds the object read: far above 100,000 tables.
const summaryMax = 256 << 20

var summaryMu sync.Mutex // one store at a time from this process

func save(ctx context.Context, lake store.Store, entries []*entry, sizeHint int) error {
	// Sized for the summary read (plus a little), so the buffer is not
	// grown and copied on the way: at 28,000 tables the object is 16 MB,
	// and the doublings were the largest allocations of a doctor run.
	w := summaryfile.NewWriter(header, max(600*len(entries), sizeHint+sizeHint/8))
	for _, e := range entries {
		if e != nil {
			e.encode(&w.Body)
		}
	}
	obj := w.Seal()
	summaryMu.Lock()
	defer summaryMu.Unlock()
	if err := lake.Put(ctx, Key, bytes.NewReader(obj), int64(len(obj))); err != nil {
		return fmt.Errorf("cannot store the lake summary %s: %w", Key, err)
	}
	return nil
}

// load reads the summary; size is the object's (for save's buffer).
func load(ctx context.Context, lake store.Store) (_ map[tables.TableKey]*entry, size int, err error) {
	out := map[tables.TableKey]*entry{}
	recs := map[string]tables.BatchBounds{}
	size, err = summaryfile.Load(ctx, lake, Key, header, summaryMax, func(_ int, line string) error {
		e, err := decode(line, recs)
		if err == nil {
			out[e.key] = e
		}
		return err
	})
	if err != nil {
		return nil, size, err
	}
	return out, size, nil
}

func (e *entry) encode(w io.Writer) {
	t := &e.t
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	rec, found, known := t.Position.Record()
	recJSON := "-"
	if known {
		j, _ := json.Marshal(rec)
		recJSON = string(j)
	}
	headOK, seq, hash, others, hv, hfiles := "-", "-", "-", "-", "-", "-"
	if h := t.Bronze; h != nil {
		headOK, seq, hash, hv = b(h.OK), i(h.Head.Seq), hex.EncodeToString(h.Head.Hash), i(h.Head.Version)
		var hexes []string
		for _, o := range h.Head.Others {
			hexes = append(hexes, hex.EncodeToString(o))
		}
		others = strings.Join(hexes, ",")
		j, _ := json.Marshal(e.files)
		hfiles = string(j)
	}
	cols := [...]string{
		e.key.Tenant.String(), string(e.key.Kind), i(e.fullReadAt.UnixMilli()), i(e.start), hex.EncodeToString(e.fp[:]), b(t.Exists), i(t.Version), i(t.CheckpointVersion),
		i(int64(t.Files)), i(t.smallSize), i(int64(t.SmallFiles)), i(t.TombstonedBytes), i(t.datedBytes), i(t.datedMin), i(t.datedMax),
		i(int64(t.Retention)), i(t.Position.TxnVersion), b(known), b(found), recJSON, headOK, seq,
		hash, others, hv, hfiles,
	}
	// Column by column into the object's buffer: joining them first made
	// every line twice more (a third of a doctor run's garbage at 28,000
	// tables).
	for n, c := range cols {
		if n > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, c)
	}
	io.WriteString(w, "\n")
}

// kindOf is tables.ParseTarget returning the constant (not a substring
// of the line, which would keep the whole line alive).
func kindOf(s string) (tables.Kind, error) {
	k, err := tables.ParseTarget(s)
	for _, c := range tables.Kinds {
		if c == k {
			return c, nil
		}
	}
	return k, err
}

// batchRecord decodes a table's batch record, once per distinct text
// (recs, one load's): every table a batch committed to has the same
// record (5 distinct among 28,001 tables after a drain), and decoding
// each was most of the load's JSON. Each table gets a copy of its own.
func batchRecord(text string, recs map[string]tables.BatchBounds) (tables.BatchBounds, error) {
	rec, ok := recs[text]
	if !ok {
		if err := json.Unmarshal([]byte(text), &rec); err != nil {
			return tables.BatchBounds{}, err
		}
		recs[text] = rec
	}
	if rec.Rows != nil {
		rows := *rec.Rows
		rec.Rows = &rows
	}
	if rec.Anchor != nil {
		a := *rec.Anchor
		rec.Anchor = &a
	}
	return rec, nil
}

func decode(line string, recs map[string]tables.BatchBounds) (*entry, error) {
	c := strings.Split(line, "\t")
	if len(c) != len(fields) {
		return nil, fmt.Errorf("%d fields, want %d", len(c), len(fields))
	}
	var err error
	num := func(s string) int64 {
		v, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("not a number: %q", s)
		}
		return v
	}
	flag := func(s string) bool {
		if s != "0" && s != "1" && err == nil {
			err = fmt.Errorf("not 0 or 1: %q", s)
		}
		return s == "1"
	}
	id, perr := uuid.Parse(c[0])
	if perr != nil {
		return nil, perr
	}
	kind, perr := kindOf(c[1])
	if perr != nil {
		return nil, perr
	}
	e := &entry{key: tables.TableKey{Tenant: id, Kind: kind}, fullReadAt: time.UnixMilli(num(c[2])), start: num(c[3])}
	if len(c[4]) != 2*sha256.Size {
		return nil, fmt.Errorf("not a fingerprint: %q", c[4])
	}
	if _, herr := hex.Decode(e.fp[:], []byte(c[4])); herr != nil {
		return nil, fmt.Errorf("not a fingerprint: %q", c[4])
	}
	t := Table{Key: e.key, Exists: flag(c[5]), Version: num(c[6]), CheckpointVersion: num(c[7]),
		Files: int(num(c[8])), smallSize: num(c[9]), SmallFiles: int(num(c[10])), TombstonedBytes: num(c[11]),
		datedBytes: num(c[12]), datedMin: num(c[13]), datedMax: num(c[14]), Retention: time.Duration(num(c[15]))}
	txn, known, found := num(c[16]), flag(c[17]), flag(c[18])
	var rec tables.BatchBounds
	if known {
		if rec, perr = batchRecord(c[19], recs); perr != nil {
			return nil, perr
		}
	}
	if t.Exists {
		t.Position = lakewriter.KnownPosition(e.key, txn, rec, found, known)
	} else {
		t.Position = lakewriter.TablePosition{Key: e.key}
	}
	if kind == tables.Bronze {
		if c[20] == "-" {
			return nil, errors.New("a bronze table without its head")
		}
		h := &Head{OK: flag(c[20])}
		h.Head = bronze.Head{Seq: num(c[21]), Version: num(c[24])}
		if h.Head.Hash, perr = hex.DecodeString(c[22]); perr != nil {
			return nil, perr
		}
		if !h.OK {
			h.Head = bronze.Head{}
		}
		if c[23] != "" {
			for _, o := range strings.Split(c[23], ",") {
				b, derr := hex.DecodeString(o)
				if derr != nil {
					return nil, derr
				}
				h.Head.Others = append(h.Head.Others, b)
			}
		}
		if jerr := json.Unmarshal([]byte(c[25]), &e.files); jerr != nil {
			return nil, jerr
		}
		h.files = e.files
		t.Bronze = h
	}
	if err != nil {
		return nil, err
	}
	e.t = t
	return e, nil
}

// StatusReader reads the tables for lake status (lakewriter's
// StatusOptions.ReadTables) through the summary doctor stores: it never
// stores one itself, and needs neither small files, tombstones nor heads.
func StatusReader(lake store.Store) lakewriter.TablesReader {
	return func(ctx context.Context, keys []tables.TableKey) []lakewriter.TableFacts {
		read, _ := Read(ctx, lake, keys, Options{NoHead: true})
		out := make([]lakewriter.TableFacts, len(read))
		for i, t := range read {
			f := lakewriter.TableFacts{Err: t.Err}
			if t.Err == nil && t.Exists {
				f.Exists, f.Version, f.Files, f.SinceCheckpoint, f.Position = true, t.Version, t.Files, t.CommitsSinceCheckpoint(), t.Position
			}
			out[i] = f
		}
		return out
	}
}
