package lakewriter

import (
	"math"
	"math/bits"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/tables"
)

// Records the drainer keeps of every table for the whole run (the
// registry's absent set, the tables known complete) are kept per tenant,
// a bit or a slot per kind: a map entry per table cost about 100 bytes
// (a 16-byte tenant, a string header and the value, plus the map's own
// overhead, for each of the four tables of a tenant), and at 10,000
// tenants those entries were a steady part of a live heap that grew with
// the tenant count (docs/lake-writer.md, memory). A key whose kind is not
// one of tables.Kinds (none today; the provider's bronze is a tenant like
// any other) goes to a small map beside, so neither type ever loses a
// key.

// kindBits holds one bit per kind: tables.NumKinds must fit.
type kindBits uint8

var _ [8 - tables.NumKinds]struct{} // compile-time: NumKinds ≤ 8 bits of kindBits

// tableSet is a set of tables.
type tableSet struct {
	bits  map[uuid.UUID]kindBits
	other map[tables.TableKey]bool
}

func (s *tableSet) add(key tables.TableKey) {
	i, ok := key.Kind.Index()
	if !ok {
		if s.other == nil {
			s.other = map[tables.TableKey]bool{}
		}
		s.other[key] = true
		return
	}
	if s.bits == nil {
		s.bits = map[uuid.UUID]kindBits{}
	}
	s.bits[key.Tenant] |= 1 << i
}

func (s *tableSet) has(key tables.TableKey) bool {
	i, ok := key.Kind.Index()
	if !ok {
		return s.other[key]
	}
	return s.bits[key.Tenant]&(1<<i) != 0
}

// remove deletes key; a tenant with no table left has no entry.
func (s *tableSet) remove(key tables.TableKey) {
	i, ok := key.Kind.Index()
	if !ok {
		delete(s.other, key)
		return
	}
	if b, ok := s.bits[key.Tenant]; ok {
		putTenant(s.bits, key.Tenant, b&^(1<<i), 0)
	}
}

// putTenant stores v as tenant t's entry, or deletes the entry when v is
// empty (nothing left of the tenant).
func putTenant[V comparable](m map[uuid.UUID]V, t uuid.UUID, v, empty V) {
	if v == empty {
		delete(m, t)
		return
	}
	m[t] = v
}

// len counts the tables in the set.
func (s *tableSet) len() int {
	n := len(s.other)
	for _, b := range s.bits {
		n += bits.OnesCount8(uint8(b))
	}
	return n
}

// unknownVersion marks a kind's slot of tableVersions as holding nothing:
// no Delta txn version is negative beyond -1.
const unknownVersion = math.MinInt64

// kindSlots holds a value per kind (unknownVersion: none).
type kindSlots [tables.NumKinds]int64

// noSlots is a tenant's kindSlots before any is set.
var noSlots = func() (s kindSlots) {
	for i := range s {
		s[i] = unknownVersion
	}
	return s
}()

// tableVersions maps tables to an int64 (a txn version). Slots are map
// values, not pointers: no allocation per tenant, nothing for the GC to
// follow.
type tableVersions struct {
	slots map[uuid.UUID]kindSlots
	// other holds keys of other kinds, and a value of unknownVersion
	// (which a slot cannot hold), so the map is exact for every key.
	other map[tables.TableKey]int64
}

func (m *tableVersions) get(key tables.TableKey) (int64, bool) {
	if v, ok := m.other[key]; ok {
		return v, true
	}
	i, ok := key.Kind.Index()
	if !ok {
		return 0, false
	}
	s, ok := m.slots[key.Tenant]
	if !ok || s[i] == unknownVersion {
		return 0, false
	}
	return s[i], true
}

func (m *tableVersions) set(key tables.TableKey, v int64) {
	i, ok := key.Kind.Index()
	if !ok || v == unknownVersion {
		m.remove(key)
		if m.other == nil {
			m.other = map[tables.TableKey]int64{}
		}
		m.other[key] = v
		return
	}
	delete(m.other, key)
	if m.slots == nil {
		m.slots = map[uuid.UUID]kindSlots{}
	}
	s, ok := m.slots[key.Tenant]
	if !ok {
		s = noSlots
	}
	s[i] = v
	m.slots[key.Tenant] = s
}

// remove deletes key; a tenant with no table left has no entry.
func (m *tableVersions) remove(key tables.TableKey) {
	delete(m.other, key)
	i, ok := key.Kind.Index()
	if !ok {
		return
	}
	if s, ok := m.slots[key.Tenant]; ok {
		s[i] = unknownVersion
		putTenant(m.slots, key.Tenant, s, noSlots)
	}
}

// len counts the tables with a value.
func (m *tableVersions) len() int {
	n := len(m.other)
	for _, s := range m.slots {
		for _, v := range s {
			if v != unknownVersion {
				n++
			}
		}
	}
	return n
}
