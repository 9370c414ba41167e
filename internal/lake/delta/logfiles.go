package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/lake/store"
)

// LogDir is the log directory under a table root.
const LogDir = "_delta_log/"

// LastCheckpointKey is the _last_checkpoint hint.
const LastCheckpointKey = LogDir + "_last_checkpoint"

// CommitKey is the key of the commit file for version v.
func CommitKey(v int64) string { return fmt.Sprintf("%s%020d.json", LogDir, v) }

// CheckpointKey is the key of the classic single-file checkpoint for v.
func CheckpointKey(v int64) string { return fmt.Sprintf("%s%020d.checkpoint.parquet", LogDir, v) }

type logFileKind int

const (
	kindOther logFileKind = iota
	kindCommit
	kindClassicCheckpoint
	kindMultipartCheckpoint
	kindV2Checkpoint
)

type logFile struct {
	key     string
	version int64
	kind    logFileKind
	part    int // multi-part: this part (1-based)
	parts   int // multi-part: number of parts
	size    int64
	modTime time.Time
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseLogFile classifies one key under _delta_log/. Anything it does not
// recognize (Hadoop .crc side files, NNN.crc checksums, _sidecars/,
// _autostats/, log compaction files, temp files) is kindOther and ignored.
func parseLogFile(key string, size int64) logFile {
	lf := logFile{key: key, size: size}
	name, ok := strings.CutPrefix(key, LogDir)
	if !ok || strings.Contains(name, "/") || len(name) < 21 || name[20] != '.' || !isDigits(name[:20]) {
		return lf
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return lf
	}
	lf.version = v
	rest := name[21:]
	switch {
	case rest == "json":
		lf.kind = kindCommit
	case rest == "checkpoint.parquet":
		lf.kind = kindClassicCheckpoint
	case strings.HasPrefix(rest, "checkpoint."):
		mid := strings.TrimPrefix(rest, "checkpoint.")
		ps := strings.Split(mid, ".")
		switch {
		case len(ps) == 3 && ps[2] == "parquet" && len(ps[0]) == 10 && len(ps[1]) == 10 && isDigits(ps[0]) && isDigits(ps[1]):
			part, _ := strconv.Atoi(ps[0])
			parts, _ := strconv.Atoi(ps[1])
			if part >= 1 && parts >= 1 && part <= parts {
				lf.kind, lf.part, lf.parts = kindMultipartCheckpoint, part, parts
			}
		case len(ps) == 2 && (ps[1] == "json" || ps[1] == "parquet") && len(ps[0]) == 36:
			lf.kind = kindV2Checkpoint
		}
	}
	return lf
}

// checkpointRef is one complete checkpoint found by listing.
type checkpointRef struct {
	version int64
	v2      bool     // a UUID-named (v2) checkpoint: oml refuses those
	keys    []string // classic: one key; multi-part: every part in order
	size    int64    // total bytes
}

// logListing is the parsed content of _delta_log/ from some point on.
type logListing struct {
	commits     map[int64]logFile
	checkpoints map[int64]*checkpointRef
	maxCommit   int64 // -1 if none
}

// lastCheckpointHint is the parsed _last_checkpoint (lenient: delta-rs
// spells sizeInBytes as size_in_bytes; unknown keys are ignored).
type lastCheckpointHint struct {
	Version       int64 `json:"version"`
	Size          int64 `json:"size"`
	Parts         *int  `json:"parts,omitempty"`
	SizeInBytes   int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64 `json:"numOfAddFiles,omitempty"`
}

// readLastCheckpoint returns the hint, or ok=false when it is missing,
// empty or unreadable: it is only a hint, and a listing confirms it.
func readLastCheckpoint(ctx context.Context, st store.Store) (lastCheckpointHint, bool, error) {
	var h lastCheckpointHint
	b, err := st.Get(ctx, LastCheckpointKey)
	if errors.Is(err, store.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("reading %s: %w", LastCheckpointKey, err)
	}
	var raw struct {
		Version       *int64 `json:"version"`
		Size          int64  `json:"size"`
		Parts         *int   `json:"parts"`
		SizeInBytes   int64  `json:"sizeInBytes"`
		SizeInBytes2  int64  `json:"size_in_bytes"`
		NumOfAddFiles int64  `json:"numOfAddFiles"`
	}
	if json.Unmarshal(b, &raw) != nil || raw.Version == nil || *raw.Version < 0 {
		return h, false, nil
	}
	h = lastCheckpointHint{Version: *raw.Version, Size: raw.Size, Parts: raw.Parts, SizeInBytes: raw.SizeInBytes, NumOfAddFiles: raw.NumOfAddFiles}
	if h.SizeInBytes == 0 {
		h.SizeInBytes = raw.SizeInBytes2
	}
	return h, true, nil
}

// listLog lists _delta_log/ from startVersion on (0: everything).
func listLog(ctx context.Context, st store.Store, startVersion int64) (*logListing, error) {
	objs, err := listLogObjects(ctx, st, startVersion)
	if err != nil {
		return nil, err
	}
	return parseListing(objs, startVersion), nil
}

// listLogObjects is the store listing of _delta_log/ from startVersion on
// (0: everything), in key order.
func listLogObjects(ctx context.Context, st store.Store, startVersion int64) ([]store.ObjectInfo, error) {
	startAfter := ""
	if startVersion > 0 {
		// Every file of version v sorts after "%020d" (v-1 with a '.'
		// suffix sorts before it), so start right after the bare prefix.
		startAfter = fmt.Sprintf("%s%020d", LogDir, startVersion-1) + "/"
	}
	objs, err := st.List(ctx, LogDir, startAfter)
	if err != nil {
		return nil, fmt.Errorf("listing %s%s: %w", st, "/"+LogDir, err)
	}
	return objs, nil
}

// parseListing classifies the listed objects of _delta_log/ from
// startVersion on.
func parseListing(objs []store.ObjectInfo, startVersion int64) *logListing {
	l := &logListing{commits: map[int64]logFile{}, checkpoints: map[int64]*checkpointRef{}, maxCommit: -1}
	multi := map[int64]map[int][]logFile{} // version -> parts count -> parts
	for _, o := range objs {
		lf := parseLogFile(o.Key, o.Size)
		lf.modTime = o.ModTime
		if lf.version < startVersion {
			continue
		}
		switch lf.kind {
		case kindCommit:
			l.commits[lf.version] = lf
			if lf.version > l.maxCommit {
				l.maxCommit = lf.version
			}
		case kindClassicCheckpoint:
			l.checkpoints[lf.version] = &checkpointRef{version: lf.version, keys: []string{lf.key}, size: lf.size}
		case kindV2Checkpoint:
			if _, ok := l.checkpoints[lf.version]; !ok {
				l.checkpoints[lf.version] = &checkpointRef{version: lf.version, v2: true, keys: []string{lf.key}, size: lf.size}
			}
		case kindMultipartCheckpoint:
			if multi[lf.version] == nil {
				multi[lf.version] = map[int][]logFile{}
			}
			multi[lf.version][lf.parts] = append(multi[lf.version][lf.parts], lf)
		}
	}
	// A multi-part checkpoint counts only when every part is present; a
	// classic checkpoint of the same version is preferred.
	for v, byCount := range multi {
		if c, ok := l.checkpoints[v]; ok && !c.v2 {
			continue
		}
		for n, parts := range byCount {
			seen := map[int]logFile{}
			for _, p := range parts {
				seen[p.part] = p
			}
			if len(seen) != n {
				continue
			}
			ref := &checkpointRef{version: v}
			for i := 1; i <= n; i++ {
				ref.keys = append(ref.keys, seen[i].key)
				ref.size += seen[i].size
			}
			l.checkpoints[v] = ref
			break
		}
	}
	return l
}

// newestCheckpoint returns the newest checkpoint at or before target (any
// version if target < 0), or nil.
func (l *logListing) newestCheckpoint(target int64) *checkpointRef {
	var best *checkpointRef
	for v, c := range l.checkpoints {
		if target >= 0 && v > target {
			continue
		}
		if best == nil || v > best.version || (v == best.version && best.v2 && !c.v2) {
			best = c
		}
	}
	return best
}

func (l *logListing) commitVersions() []int64 {
	vs := make([]int64, 0, len(l.commits))
	for v := range l.commits {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs
}
