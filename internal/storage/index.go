package storage

import (
	"encoding/binary"
	"errors"
	"sort"
)

// Index entry sizes on disk.
const (
	offsetEntrySize = 8  // u32 relative offset, u32 position
	timeEntrySize   = 12 // i64 timestamp, u32 relative offset
)

// offsetEntry says the batch whose base offset is segment base + rel starts
// at byte pos of the segment's .log file.
type offsetEntry struct {
	rel uint32
	pos uint32
}

// timeEntry says that every batch before the one with base offset
// segment base + rel has a max timestamp < ts, and that batch's is ts.
type timeEntry struct {
	ts  int64
	rel uint32
}

// errBadIndex reports an index file that must be rebuilt.
var errBadIndex = errors.New("storage: invalid index")

func appendOffsetEntry(b []byte, e offsetEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, e.rel)
	return binary.BigEndian.AppendUint32(b, e.pos)
}

func appendTimeEntry(b []byte, e timeEntry) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
	return binary.BigEndian.AppendUint32(b, e.rel)
}

// decodeOffsetIndex parses an .index file of a segment whose .log holds
// logSize bytes. Entries must be strictly increasing in both columns and
// point inside the log; anything else is errBadIndex (the caller rebuilds).
// The result holds at most len(data)/8 entries, and at most one per
// possible batch start, so it is bounded by the log size too.
func decodeOffsetIndex(data []byte, logSize int64) ([]offsetEntry, error) {
	if len(data)%offsetEntrySize != 0 {
		return nil, errBadIndex
	}
	n := len(data) / offsetEntrySize
	if int64(n) > logSize/minBatchSize+1 {
		return nil, errBadIndex
	}
	out := make([]offsetEntry, 0, n)
	for i := 0; i < n; i++ {
		e := offsetEntry{
			rel: binary.BigEndian.Uint32(data[i*offsetEntrySize:]),
			pos: binary.BigEndian.Uint32(data[i*offsetEntrySize+4:]),
		}
		if int64(e.pos) >= logSize {
			return nil, errBadIndex
		}
		if k := len(out); k > 0 && (out[k-1].rel >= e.rel || out[k-1].pos >= e.pos) {
			return nil, errBadIndex
		}
		out = append(out, e)
	}
	return out, nil
}

// decodeTimeIndex parses a .timeindex file. Timestamps must be strictly
// increasing, relative offsets non-decreasing and below maxRel (the segment's
// next offset minus its base).
func decodeTimeIndex(data []byte, maxRel int64) ([]timeEntry, error) {
	if len(data)%timeEntrySize != 0 {
		return nil, errBadIndex
	}
	n := len(data) / timeEntrySize
	out := make([]timeEntry, 0, n)
	for i := 0; i < n; i++ {
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(data[i*timeEntrySize:])),
			rel: binary.BigEndian.Uint32(data[i*timeEntrySize+8:]),
		}
		if int64(e.rel) >= maxRel || e.ts < 0 {
			return nil, errBadIndex
		}
		if k := len(out); k > 0 && (out[k-1].ts >= e.ts || out[k-1].rel > e.rel) {
			return nil, errBadIndex
		}
		out = append(out, e)
	}
	return out, nil
}

// floorOffset returns the position of the last entry with rel <= target, or
// (0, 0) if there is none: scanning batches from there finds target.
func floorOffset(ix []offsetEntry, rel uint32) offsetEntry {
	i := sort.Search(len(ix), func(i int) bool { return ix[i].rel > rel })
	if i == 0 {
		return offsetEntry{}
	}
	return ix[i-1]
}

// floorPos returns the last entry with pos <= pos, or (0, 0).
func floorPos(ix []offsetEntry, pos uint32) offsetEntry {
	i := sort.Search(len(ix), func(i int) bool { return ix[i].pos > pos })
	if i == 0 {
		return offsetEntry{}
	}
	return ix[i-1]
}

// lowerTime returns the relative offset to scan from when looking for the
// first batch with max timestamp >= ts: that of the last entry with a
// timestamp < ts (every batch before it has a smaller max), else 0.
func lowerTime(ix []timeEntry, ts int64) uint32 {
	i := sort.Search(len(ix), func(i int) bool { return ix[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return ix[i-1].rel
}
