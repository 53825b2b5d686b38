package storage

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"sync"
	"sync/atomic"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/vfs"
)

// segment is one .log file with its two indexes. Fields marked (mu) are
// read under Log.mu (read lock) and written under Log.mu with Log.appendMu
// held; fields marked (append) belong to the appender (Log.appendMu).
//
// The index files are opened (or created) on first write, not with the
// segment: a new partition creates one file, and a sealed segment whose
// indexes were read at recovery holds no index descriptors.
type segment struct {
	base int64
	dir  string
	fs   vfs.FS
	log  vfs.File

	idxMu sync.Mutex
	idx   vfs.File // (idxMu) .index, nil until opened
	tidx  vfs.File // (idxMu) .timeindex, nil until opened

	size    int64         // (mu) bytes of whole batches readers may see
	next    int64         // (mu) offset after the last batch
	offsets []offsetEntry // (mu) copy-on-truncate: never rewritten in place
	times   []timeEntry   // (mu) same
	maxTs   int64         // (mu) newest batch max timestamp, -1 if none
	maxTsAt int64         // (mu) base offset of the first batch with maxTs
	aborted []AbortedTxn  // (mu) aborted transactions whose marker is here, in offset order; copy-on-truncate

	firstTs         int64 // (append) first batch's max timestamp, -1 if none
	createdMs       int64 // (append) creation/load time, for segment.ms and retention without timestamps
	bytesSinceIndex int   // (append)

	syncedSize    int64 // (mu) bytes known durable
	indexesSynced bool  // (mu) sealed and its index files synced

	deleted atomic.Bool
}

func (s *segment) logName() string { return fileName(s.dir, s.base, logSuffix) }

// openSegmentFiles opens (creating if missing) the log file of a segment.
// With truncate set the segment is new: its log is created empty and any
// index files left under its name are removed, so that a later recovery
// never reads another segment's entries as this one's.
func openSegmentFiles(fsys vfs.FS, dir string, base int64, truncate bool) (*segment, error) {
	open := fsys.OpenReadWrite
	if truncate {
		open = fsys.Create
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if err := fsys.Remove(fileName(dir, base, suf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	s := &segment{base: base, dir: dir, fs: fsys, next: base, maxTs: -1, maxTsAt: -1, firstTs: -1}
	var err error
	if s.log, err = open(fileName(dir, base, logSuffix)); err != nil {
		return nil, err
	}
	return s, nil
}

// indexFiles returns the segment's index files, opening them (creating
// them empty if missing) on first use.
func (s *segment) indexFiles() (idx, tidx vfs.File, err error) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.idx == nil {
		if s.idx, err = s.fs.OpenReadWrite(fileName(s.dir, s.base, indexSuffix)); err != nil {
			return nil, nil, err
		}
	}
	if s.tidx == nil {
		if s.tidx, err = s.fs.OpenReadWrite(fileName(s.dir, s.base, timeIndexSuffix)); err != nil {
			return nil, nil, err
		}
	}
	return s.idx, s.tidx, nil
}

// openIndexFiles returns the index files opened so far (those written in
// this process, which may need an fsync).
func (s *segment) openIndexFiles() []vfs.File {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	var out []vfs.File
	for _, f := range []vfs.File{s.idx, s.tidx} {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
}

func (s *segment) close() error {
	var first error
	for _, f := range append(s.openIndexFiles(), s.log) {
		if f != nil {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// removeFiles removes the segment's names (its open files stay usable).
// Index files never written do not exist.
func (s *segment) removeFiles(fsys vfs.FS) error {
	var first error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		err := fsys.Remove(fileName(s.dir, s.base, suf))
		if suf != logSuffix && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// largestTimestamp is what time-based retention compares: the newest batch
// timestamp, or the load time for segments without timestamps.
func (s *segment) largestTimestamp() int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	return s.createdMs
}

// track updates the in-memory indexes for a batch at pos, as Kafka's
// LogSegment.append does: an offset entry once more than IndexIntervalBytes
// were appended since the last one, and a time entry alongside it when the
// max timestamp grew. It reports whether entries were added.
func (s *segment) track(h *batch.Header, pos int64, interval int) (addOff, addTime bool) {
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsAt = h.MaxTimestamp, h.BaseOffset
	}
	if s.firstTs < 0 && pos == 0 {
		s.firstTs = h.MaxTimestamp
	}
	if s.bytesSinceIndex > interval && pos > 0 {
		rel := uint32(h.BaseOffset - s.base)
		if k := len(s.offsets); k == 0 || s.offsets[k-1].rel < rel {
			s.offsets = append(s.offsets, offsetEntry{rel: rel, pos: uint32(pos)})
			addOff = true
		}
		addTime = s.maybeTimeEntry()
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.Size()
	return addOff, addTime
}

// maybeTimeEntry appends (maxTs, maxTsAt) to the time index if it is newer
// than the last entry.
func (s *segment) maybeTimeEntry() bool {
	if s.maxTs < 0 {
		return false
	}
	if k := len(s.times); k > 0 && s.times[k-1].ts >= s.maxTs {
		return false
	}
	s.times = append(s.times, timeEntry{ts: s.maxTs, rel: uint32(s.maxTsAt - s.base)})
	return true
}

// indexFull reports whether another entry might not fit the index budget.
func (s *segment) indexFull(cfg *Config) bool {
	return len(s.offsets) >= cfg.maxIndexEntries() || len(s.times) >= cfg.maxTimeEntries()
}

// writeIndexes rewrites both index files from the in-memory entries. With
// no entries and no index file open, the files are removed instead of
// created empty (a missing index reads as empty).
func (s *segment) writeIndexes() error {
	if len(s.offsets) == 0 && len(s.times) == 0 && len(s.openIndexFiles()) == 0 {
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			if err := s.fs.Remove(fileName(s.dir, s.base, suf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	idx, tidx, err := s.indexFiles()
	if err != nil {
		return err
	}
	b := make([]byte, 0, len(s.offsets)*offsetEntrySize)
	for _, e := range s.offsets {
		b = appendOffsetEntry(b, e)
	}
	if err := rewrite(idx, b); err != nil {
		return err
	}
	b = make([]byte, 0, len(s.times)*timeEntrySize)
	for _, e := range s.times {
		b = appendTimeEntry(b, e)
	}
	return rewrite(tidx, b)
}

func rewrite(f vfs.File, b []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Write(b)
	return err
}

// reader reads a segment's log sequentially with read-ahead, bounding every
// allocation by the bytes really present in the file.
type reader struct {
	f      vfs.File
	end    int64 // readable limit
	buf    []byte
	bufPos int64 // file position of buf[0]
	chunk  int
}

func newReader(f vfs.File, end int64, chunk int) *reader {
	return &reader{f: f, end: end, chunk: chunk}
}

// at returns the n bytes at pos (n <= end-pos is the caller's check).
func (r *reader) at(pos int64, n int) ([]byte, error) {
	if pos >= r.bufPos && pos+int64(n) <= r.bufPos+int64(len(r.buf)) {
		o := pos - r.bufPos
		return r.buf[o : o+int64(n)], nil
	}
	want := max(n, r.chunk)
	if rem := r.end - pos; int64(want) > rem {
		want = int(rem)
	}
	if want < n {
		return nil, io.ErrUnexpectedEOF
	}
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	m, err := r.f.ReadAt(r.buf, pos)
	if m < want {
		r.buf = r.buf[:m]
		if m < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	r.bufPos = pos
	return r.buf[:n], nil
}

// errStop ends a walk early without error.
var errStop = errors.New("stop")

// walk visits the batches of s's log from pos to end, reading headers only
// (or whole batches with a CRC check if full). It stops, returning the
// position reached, at the first batch that is short, does not parse, fails
// its CRC, or (when expect >= 0) starts below offset expect, which then
// advances batch by batch to the offset after the previous batch. Offsets
// may jump forward: a compacted segment has gaps where the cleaner removed
// whole batches. fn may return errStop. I/O errors other than
// end-of-file are returned.
// chunk is the read-ahead size.
func walk(f vfs.File, pos, end, expect int64, full bool, chunk int, fn func(h *batch.Header, pos int64, b []byte) error) (int64, error) {
	r := newReader(f, end, chunk)
	for end-pos >= minBatchSize {
		hb, err := r.at(pos, batch.HeaderSize)
		if err != nil {
			return pos, ioErr(err)
		}
		h, err := batch.ParseHeader(hb)
		if err != nil || int64(h.Size()) > end-pos {
			return pos, nil
		}
		if expect >= 0 && h.BaseOffset < expect {
			return pos, nil
		}
		if h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
			return pos, nil
		}
		var b []byte
		if full {
			if b, err = r.at(pos, h.Size()); err != nil {
				return pos, ioErr(err)
			}
			if batch.CheckCRC(b) != nil {
				return pos, nil
			}
		}
		if fn != nil {
			if err := fn(&h, pos, b); err != nil {
				if err == errStop {
					return pos, nil
				}
				return pos, err
			}
		}
		pos += int64(h.Size())
		if expect >= 0 {
			expect = h.NextOffset()
		}
	}
	return pos, nil
}

// ioErr hides end-of-file (a torn tail is not an I/O error).
func ioErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}
