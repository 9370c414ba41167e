package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/summaryfile"
)

// The verified-witness summary lets a report (oml doctor's fork check)
// verify only the witnesses that changed since it last verified them: per
// tenant, the newest witness it verified, with the listing's size and
// modification time of its object, the public key it verified under and
// the head it read. A run whose listing shows the same newest object (key,
// size, time) for a tenant, still under a key the verified provider chain
// trusts for that seq, takes the head from the summary instead of reading
// and verifying the object again; anything else — a new witness, an
// object rewritten, a key dropped or revoked, an entry due for the scrub —
// is read and verified as Newest does. Like the lake summary
// (internal/lakesummary) it is a cache of the reader's own work, never the
// truth: only reports use it (never the lake writer's fork check, never a
// publisher), a witness that does not verify is never kept (every run
// reads it again, so its finding reads as before), and a summary that is
// missing, does not hash to its header or does not parse is ignored whole.
// What a listing cannot see (an object rewritten in place with its size
// and time kept, or a summary forged by someone who can write the lake —
// who could as well delete witnesses) the scrub finds: every run also
// verifies the 1/CacheScrubShare of the tenants verified least recently,
// and every tenant verified longer than CacheMaxAge ago.

// CacheKey is the summary object under the lake root (beside the lake
// summary; outside _oml_witness/, so no listing of witnesses sees it).
const CacheKey = "_oml_summary/witnesses.v1"

const cacheHeader = "oml witness summary v1 "

// CacheScrubShare and CacheMaxAge pace the scrub (see above): every kept
// head is verified again within CacheScrubShare runs or CacheMaxAge.
const (
	CacheScrubShare = 64
	CacheMaxAge     = 24 * time.Hour
)

// cacheMax bounds the object read: far above 100,000 tenants.
const cacheMax = 256 << 20

// CacheOptions configure NewestCached.
type CacheOptions struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Write stores the refreshed summary.
	Write bool
}

// CacheStats say how a NewestCached run went, for the report.
type CacheStats struct {
	// State of the summary found: "ok", "absent", or "invalid: why".
	State string `json:"state"`
	// FromCache tenants were taken from the summary; Verified were read
	// and verified (new or changed since, not kept, or scrubbed:
	// Scrubbed of them).
	FromCache int `json:"from_cache"`
	Verified  int `json:"verified"`
	Scrubbed  int `json:"scrubbed"`
	// OldestVerifiedAt is the oldest verification behind a head taken from
	// the summary (nil when every head was verified now).
	OldestVerifiedAt *time.Time `json:"oldest_verified_at"`
	// WriteError says why the refreshed summary could not be stored.
	WriteError string `json:"write_error,omitempty"`
}

// cacheEntry is one tenant's newest verified witness.
type cacheEntry struct {
	tenant     uuid.UUID
	info       store.ObjectInfo // key, size and time as listed
	verifiedAt time.Time
	pub        ed25519.PublicKey
	head       *Head
}

// NewestCached is Newest over every tenant, with the summary (see above)
// serving the tenants whose newest witness is unchanged since it was
// verified. Its result is Newest's for every tenant it verifies; a kept
// tenant's head is the one verified then from the same object.
func NewestCached(ctx context.Context, st store.Store, trusted KeyLookup, opts CacheOptions) (map[uuid.UUID]*Head, []error, CacheStats, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	var stats CacheStats
	old, err := loadCache(ctx, st)
	stats.State = summaryfile.State(err)
	at := now()
	c := &cacheRun{old: old, scrub: cacheScrub(old, at), now: at, fresh: map[uuid.UUID]*cacheEntry{}}
	out, bad, err := newest(ctx, st, nil, trusted, c, nil)
	if err != nil {
		return nil, nil, stats, err
	}
	var oldest time.Time
	for id := range out {
		e := c.fresh[id]
		switch {
		case e == nil:
		case c.kept[id]:
			stats.FromCache++
			if oldest.IsZero() || e.verifiedAt.Before(oldest) {
				oldest = e.verifiedAt
			}
		default:
			stats.Verified++
			if c.scrub[id] {
				stats.Scrubbed++
			}
		}
	}
	if !oldest.IsZero() {
		stats.OldestVerifiedAt = &oldest
	}
	if opts.Write && len(c.fresh) > 0 && (stats.Verified > 0 || len(old) != len(c.fresh)) {
		if err := saveCache(ctx, st, c.fresh); err != nil {
			stats.WriteError = err.Error()
		}
	}
	return out, bad, stats, nil
}

// cacheRun is one NewestCached run's use of the summary; Newest's
// per-tenant goroutines consult it under Newest's lock.
type cacheRun struct {
	old   map[uuid.UUID]*cacheEntry
	scrub map[uuid.UUID]bool
	now   time.Time
	fresh map[uuid.UUID]*cacheEntry
	kept  map[uuid.UUID]bool
}

// keep returns the summary's head of tenant id when its newest listed
// witness is the object it verified, unchanged, under a key still trusted
// for it, and the tenant is not due for the scrub.
func (c *cacheRun) keep(id uuid.UUID, newest store.ObjectInfo, trusted KeyLookup) (*Head, bool) {
	e := c.old[id]
	if e == nil || c.scrub[id] || e.info.Key != newest.Key || e.info.Size != newest.Size || !e.info.ModTime.Equal(newest.ModTime) {
		return nil, false
	}
	pub, ok := trusted(e.head.KeyID, e.head.Tenant, e.head.Seq)
	if !ok || !bytes.Equal(pub, e.pub) {
		return nil, false
	}
	return e.head, true
}

// cacheScrub picks the tenants to verify anyway: every one verified longer
// than CacheMaxAge ago, and at least the 1/CacheScrubShare verified least
// recently (then by tenant id, so which ones is deterministic).
func cacheScrub(old map[uuid.UUID]*cacheEntry, now time.Time) map[uuid.UUID]bool {
	have := make([]*cacheEntry, 0, len(old))
	for _, e := range old {
		have = append(have, e)
	}
	// By tenant id first, so which ones a run picks is deterministic.
	slices.SortFunc(have, func(a, b *cacheEntry) int { return bytes.Compare(a.tenant[:], b.tenant[:]) })
	out := map[uuid.UUID]bool{}
	for _, e := range summaryfile.Due(have, func(e *cacheEntry) time.Time { return e.verifiedAt }, CacheScrubShare, CacheMaxAge, now) {
		out[e.tenant] = true
	}
	return out
}

// The summary is text: a header line with the body's SHA-256, then one
// line per tenant of tab-separated fields: tenant, object key, size,
// modification time (ns), verified at (ms), public key (hex), the head as
// stored (JSON, which escapes every tab and newline).
const cacheFields = 7

func saveCache(ctx context.Context, st store.Store, entries map[uuid.UUID]*cacheEntry) error {
	ids := make([]uuid.UUID, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	w := summaryfile.NewWriter(cacheHeader, 640*len(ids)) // about 610 bytes a line
	for _, id := range ids {
		e := entries[id]
		j, err := json.Marshal(e.head)
		if err != nil {
			return err
		}
		fmt.Fprintf(&w.Body, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", e.tenant, e.info.Key, e.info.Size, e.info.ModTime.UnixNano(),
			e.verifiedAt.UnixMilli(), hex.EncodeToString(e.pub), j)
	}
	obj := w.Seal()
	if err := st.Put(ctx, CacheKey, bytes.NewReader(obj), int64(len(obj))); err != nil {
		return fmt.Errorf("cannot store the witness summary %s: %w", CacheKey, err)
	}
	return nil
}

func loadCache(ctx context.Context, st store.Store) (map[uuid.UUID]*cacheEntry, error) {
	out := map[uuid.UUID]*cacheEntry{}
	_, err := summaryfile.Load(ctx, st, CacheKey, cacheHeader, cacheMax, func(_ int, line string) error {
		e, err := decodeCacheEntry(line)
		if err == nil {
			out[e.tenant] = e
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeCacheEntry(line string) (*cacheEntry, error) {
	c := strings.SplitN(line, "\t", cacheFields)
	if len(c) != cacheFields {
		return nil, fmt.Errorf("%d fields, want %d", len(c), cacheFields)
	}
	id, err := uuid.Parse(c[0])
	if err != nil {
		return nil, err
	}
	size, err1 := strconv.ParseInt(c[2], 10, 64)
	mod, err2 := strconv.ParseInt(c[3], 10, 64)
	at, err3 := strconv.ParseInt(c[4], 10, 64)
	pub, err4 := hex.DecodeString(c[5])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("not a public key")
	}
	var h Head
	if err := json.Unmarshal([]byte(c[6]), &h); err != nil {
		return nil, err
	}
	// An entry is only ever of the tenant's own witness, under its own key.
	if h.Tenant != id || Key(h.Tenant, h.Seq) != c[1] {
		return nil, errors.New("the head is not the witness its key names")
	}
	return &cacheEntry{tenant: id, info: store.ObjectInfo{Key: c[1], Size: size, ModTime: time.Unix(0, mod)},
		verifiedAt: time.UnixMilli(at), pub: pub, head: &h}, nil
}
