package storage

import (
	"errors"
	"io"
	"slices"
	"sort"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Chunk is a byte range of a segment file.
type Chunk struct {
	File vfs.File
	Pos  int64
	Len  int64
}

// Slice is the result of Read: whole batches, as byte ranges of segment
// files, to be copied or sent with sendfile. It stays valid until the
// segments are deleted and their files closed (file.delete.delay.ms later);
// a truncation may cut it short (WriteTo then fails with io.ErrUnexpectedEOF).
type Slice struct {
	Chunks []Chunk
	Size   int64
	// NextOffset is the offset after the last batch in the slice (the
	// requested offset for an empty slice).
	NextOffset int64
}

// segView is a consistent snapshot of a segment's readable state.
type segView struct {
	s       *segment
	size    int64
	next    int64
	offsets []offsetEntry
	times   []timeEntry
	maxTs   int64
}

// maxReadSegments bounds how many segments one Read or timestamp lookup
// looks at (a fetch that needs more returns what it has; the client fetches
// again from there).
const maxReadSegments = 4

// views snapshots up to maxReadSegments segments starting with segs[i]
// (mu held). Empty segments after the first (a compacted range with no
// batch left) are skipped without counting, so a read past them always
// reaches data.
func (l *Log) views(i int) []segView {
	out := make([]segView, 0, maxReadSegments)
	for k, s := range l.segs[i:] {
		if len(out) == maxReadSegments {
			break
		}
		if s.size == 0 && k > 0 && i+k < len(l.segs)-1 {
			continue
		}
		out = append(out, segView{s: s, size: s.size, next: s.next, offsets: s.offsets, times: s.times, maxTs: s.maxTs})
	}
	return out
}

// segmentFor returns the index of the segment holding offset (mu held).
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	return max(i, 0)
}

// Read returns whole batches starting with the batch that holds offset:
// only batches whose base offset is below maxOffset, at most maxBytes in
// total, except that the first batch is always returned whole (KIP-74).
// offset == LogEndOffset() or >= maxOffset gives an empty Slice; an offset
// below LogStartOffset() or above the log end gives ErrOffsetOutOfRange, and
// one in [LogStartOffset(), LocalLogStartOffset()) gives ErrOffsetTiered.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Slice, error) {
	l.mu.RLock()
	if offset < l.logStart || offset > l.leo {
		l.mu.RUnlock()
		return Slice{}, ErrOffsetOutOfRange
	}
	if offset < l.segs[0].base {
		l.mu.RUnlock()
		return Slice{}, ErrOffsetTiered
	}
	if offset == l.leo || offset >= maxOffset {
		l.mu.RUnlock()
		return Slice{NextOffset: offset}, nil
	}
	vs := l.views(l.segmentFor(offset))
	l.mu.RUnlock()

	sl := Slice{NextOffset: offset}
	remaining := int64(max(maxBytes, 0))
	for k, v := range vs {
		var start int64
		if k == 0 {
			var err error
			if start, err = findBatch(v, offset); err != nil {
				return Slice{}, err
			}
		}
		if start >= v.size {
			continue
		}
		end, next, full, err := extent(v, start, remaining, maxOffset, len(sl.Chunks) == 0)
		if err != nil {
			return Slice{}, err
		}
		if end > start {
			sl.Chunks = append(sl.Chunks, Chunk{File: v.s.log, Pos: start, Len: end - start})
			sl.Size += end - start
			sl.NextOffset = next
			remaining -= end - start
		}
		if !full {
			break
		}
	}
	return sl, nil
}

// findBatch returns the position of the batch holding offset in v.
func findBatch(v segView, offset int64) (int64, error) {
	if offset <= v.s.base {
		return 0, nil
	}
	e := floorOffset(v.offsets, uint32(offset-v.s.base))
	pos := int64(-1)
	_, err := walk(v.s.log, int64(e.pos), v.size, -1, false, batch.HeaderSize, func(h *batch.Header, p int64, _ []byte) error {
		if h.NextOffset() > offset {
			pos = p
			return errStop
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if pos < 0 {
		return v.size, nil // offset is past this segment's visible batches
	}
	return pos, nil
}

// extent returns how far from start batches may be taken in v: end position,
// the offset after the last batch taken, and whether the whole rest of the
// segment was taken (so the read may continue in the next segment). first
// means no batch has been taken yet, so one is taken regardless of size.
func extent(v segView, start, remaining, maxOffset int64, first bool) (end, next int64, full bool, err error) {
	if v.next <= maxOffset && v.size-start <= remaining {
		return v.size, v.next, true, nil
	}
	// Skip ahead with the index: every batch before entry e fits and is
	// below maxOffset if e's batch starts within the budget and below
	// maxOffset.
	pos := start
	if e := floorPos(v.offsets, uint32(min(start+remaining, v.size))); int64(e.pos) > start &&
		v.s.base+int64(e.rel) < maxOffset && int64(e.pos)-start <= remaining {
		pos = int64(e.pos)
		next = v.s.base + int64(e.rel)
	}
	end = pos
	_, err = walk(v.s.log, pos, v.size, -1, false, batch.HeaderSize, func(h *batch.Header, p int64, _ []byte) error {
		if h.BaseOffset >= maxOffset {
			return errStop
		}
		if p+int64(h.Size())-start > remaining && !(first && p == start) {
			return errStop
		}
		end, next = p+int64(h.Size()), h.NextOffset()
		return nil
	})
	return end, next, false, err
}

// AppendTo appends the slice's bytes to dst.
func (s Slice) AppendTo(dst []byte) ([]byte, error) {
	n := len(dst)
	dst = slices.Grow(dst, int(s.Size))[:n+int(s.Size)]
	p := dst[n:]
	for _, c := range s.Chunks {
		m, err := c.File.ReadAt(p[:c.Len], c.Pos)
		if int64(m) < c.Len {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return dst[:n], err
		}
		p = p[c.Len:]
	}
	return dst, nil
}

// copyChunk writes c to w through a buffer.
func copyChunk(w io.Writer, c Chunk, buf []byte) (int64, error) {
	r := io.NewSectionReader(c.File, c.Pos, c.Len)
	n, err := io.CopyBuffer(w, r, buf)
	if err == nil && n < c.Len {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// OffsetForTimestamp finds the first record whose timestamp is >= ts
// (ListOffsets by time): the time index narrows the search to a batch, whose
// records are then scanned. ok is false if no record qualifies.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	logStart := l.logStart
	i := l.segmentFor(logStart)
	for i < len(l.segs)-1 && l.segs[i].maxTs < ts {
		i++
	}
	vs := l.views(i)
	l.mu.RUnlock()
	for _, v := range vs {
		if v.maxTs < ts || v.size == 0 {
			continue
		}
		rel := lowerTime(v.times, ts)
		start := int64(floorOffset(v.offsets, rel).pos)
		_, err = walk(v.s.log, start, v.size, -1, true, 64<<10, func(h *batch.Header, _ int64, b []byte) error {
			if h.MaxTimestamp < ts || h.NextOffset() <= logStart {
				return nil
			}
			if h.LogAppendTime() {
				offset, timestamp, ok = max(h.BaseOffset, logStart), h.MaxTimestamp, true
				return errStop
			}
			rerr := batch.Records(b, func(r batch.Record) bool {
				o, t := h.BaseOffset+int64(r.OffsetDelta), h.BaseTimestamp+r.TimestampDelta
				if t >= ts && o >= logStart {
					offset, timestamp, ok = o, t, true
					return false
				}
				return true
			})
			if ok || rerr != nil {
				return errStop
			}
			return nil
		})
		if err != nil || ok {
			return offset, timestamp, ok, err
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp finds the record with the largest timestamp in the log
// (ListOffsets with timestamp -3, KIP-734): the first record carrying it.
// ok is false for a log without timestamps.
func (l *Log) MaxTimestamp() (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	maxTs := int64(-1)
	for _, s := range l.segs {
		maxTs = max(maxTs, s.maxTs)
	}
	l.mu.RUnlock()
	if maxTs < 0 {
		return 0, 0, false, nil
	}
	return l.OffsetForTimestamp(maxTs)
}
