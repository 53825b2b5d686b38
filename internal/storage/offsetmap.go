package storage

import (
	"crypto/md5"
	"encoding/binary"
)

// OffsetMap is the log cleaner's map from record key to the latest offset
// holding it, in a fixed memory budget (Kafka's SkimpyOffsetMap): an
// open-addressing table of 24-byte slots, each the MD5 of a key (16 bytes;
// keys themselves are never stored) and an offset. A pass over a dirty
// section that has more keys than fit stops where the map filled, and the
// next pass goes on from there. Not safe for concurrent use.
type OffsetMap struct {
	budget int    // bytes the table may use at most
	slots  []byte // capacity*slotSize
	cap    int    // slots, prime
	used   int    // occupied slots
	max    int    // occupied slots allowed (load factor)
	latest int64  // largest offset put since Reset, -1 if none
	h      [16]byte
}

const (
	slotSize = 24
	// mapLoadFactor is Kafka's log.cleaner.io.buffer.load.factor default.
	mapLoadFactor = 0.9
	minMapSlots   = 1 << 10
)

// NewOffsetMap returns a map that will use at most budget bytes
// (log.cleaner.dedupe.buffer.size divided among the cleaner threads). The
// table is allocated by Reset, sized for the pass.
func NewOffsetMap(budget int) *OffsetMap {
	return &OffsetMap{budget: max(budget, minMapSlots*slotSize), latest: -1}
}

// Reset empties the map and sizes it for about wantKeys keys, within the
// budget; the table is reused when big enough.
func (m *OffsetMap) Reset(wantKeys int) {
	want := int(float64(max(wantKeys, minMapSlots)) / mapLoadFactor)
	want = min(want, m.budget/slotSize)
	c := prevPrime(want)
	if cap(m.slots) >= c*slotSize {
		m.slots = m.slots[:c*slotSize]
		clear(m.slots)
	} else {
		m.slots = make([]byte, c*slotSize)
	}
	m.cap, m.used, m.latest = c, 0, -1
	m.max = int(float64(c) * mapLoadFactor)
}

// Bytes is the memory held by the table.
func (m *OffsetMap) Bytes() int { return cap(m.slots) }

// Capacity is how many keys fit before the map is full.
func (m *OffsetMap) Capacity() int { return m.max }

// Len is the number of distinct keys (by hash) in the map.
func (m *OffsetMap) Len() int { return m.used }

// Latest is the largest offset put since Reset, or -1.
func (m *OffsetMap) Latest() int64 { return m.latest }

// Full reports whether a new key would exceed the load factor.
func (m *OffsetMap) Full() bool { return m.used >= m.max }

// Put records that key's latest offset is off (offsets are put in
// increasing order). It returns false, changing nothing, when key is new
// and the map is full.
func (m *OffsetMap) Put(key []byte, off int64) bool {
	m.h = md5.Sum(key)
	i, found := m.find()
	if !found {
		if m.used >= m.max {
			return false
		}
		copy(m.slots[i:i+16], m.h[:])
		m.used++
	}
	// Offsets are stored +1 so that an all-zero slot is empty.
	binary.BigEndian.PutUint64(m.slots[i+16:], uint64(off+1))
	m.latest = max(m.latest, off)
	return true
}

// Get returns key's latest offset, or -1.
func (m *OffsetMap) Get(key []byte) int64 {
	if m.cap == 0 {
		return -1
	}
	m.h = md5.Sum(key)
	i, found := m.find()
	if !found {
		return -1
	}
	return int64(binary.BigEndian.Uint64(m.slots[i+16:])) - 1
}

// find returns the byte index of m.h's slot, or of the empty slot where it
// would go: double hashing over a prime-sized table.
func (m *OffsetMap) find() (int, bool) {
	h1 := binary.BigEndian.Uint64(m.h[0:8])
	h2 := binary.BigEndian.Uint64(m.h[8:16])
	c := uint64(m.cap)
	pos, step := h1%c, 1+h2%(c-1)
	for {
		i := int(pos) * slotSize
		if binary.BigEndian.Uint64(m.slots[i+16:]) == 0 {
			return i, false
		}
		if [16]byte(m.slots[i:i+16]) == m.h {
			return i, true
		}
		pos = (pos + step) % c
	}
}

// prevPrime returns the largest prime <= n (n >= 3).
func prevPrime(n int) int {
	n = max(n, 3)
	for ; ; n-- {
		prime := n%2 != 0
		for d := 3; prime && d*d <= n; d += 2 {
			prime = n%d != 0
		}
		if prime {
			return n
		}
	}
}
