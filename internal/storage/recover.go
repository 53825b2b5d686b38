package storage

import (
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Open opens the partition log in dir, creating it if missing and
// recovering it if it was not closed cleanly (see docs/storage.md,
// "Recovery"). Corrupt or torn data is truncated, never a panic. now is the
// current time, used for segment.ms and producer expiry.
func Open(fsys vfs.FS, dir string, cfg Config, now time.Time) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, err
	}
	l := &Log{fs: fsys, dir: dir, cfg: cfg, lastNowMs: now.UnixMilli(), inflightTarget: -1, tombstoneBlocked: -1}
	l.tombstoneBound.Store(math.MaxInt64)
	l.flushCond = sync.NewCond(&l.flushMu)
	if err := l.recover(); err != nil {
		for _, s := range l.segs {
			s.close()
		}
		return nil, err
	}
	return l, nil
}

// dirState is what recover learns from listing the directory.
type dirState struct {
	bases     []int64 // .log files, sorted
	snapshots []int64 // .snapshot files, sorted
}

func (l *Log) listDir() (dirState, error) {
	var st dirState
	names, err := l.fs.List(l.dir)
	if err != nil {
		return st, err
	}
	logs := map[int64]bool{}
	for _, n := range names {
		if off, ok := parseFileName(n, logSuffix); ok {
			st.bases = append(st.bases, off)
			logs[off] = true
		} else if off, ok := parseFileName(n, snapshotSuffix); ok {
			st.snapshots = append(st.snapshots, off)
		}
	}
	for _, n := range names {
		full := filepath.Join(l.dir, n)
		switch {
		case strings.HasSuffix(n, tmpSuffix):
			l.fs.Remove(full) // an interrupted atomic write
		case strings.HasSuffix(n, indexSuffix) || strings.HasSuffix(n, timeIndexSuffix):
			off, ok1 := parseFileName(n, indexSuffix)
			if !ok1 {
				off, ok1 = parseFileName(n, timeIndexSuffix)
			}
			if ok1 && !logs[off] {
				l.fs.Remove(full) // orphaned index
			}
		}
	}
	sort.Slice(st.bases, func(i, j int) bool { return st.bases[i] < st.bases[j] })
	sort.Slice(st.snapshots, func(i, j int) bool { return st.snapshots[i] < st.snapshots[j] })
	return st, nil
}

// recover loads the directory into l (see docs/storage.md).
func (l *Log) recover() error {
	if err := l.finishSwap(); err != nil {
		return err
	}
	l.readCleanerCheckpoint()
	st, err := l.listDir()
	if err != nil {
		return err
	}
	cleanName := filepath.Join(l.dir, cleanShutdownName)
	clean, err := vfs.Exists(l.fs, cleanName)
	if err != nil {
		return err
	}
	logStart, lsOK := readOffsetFile(l.fs, filepath.Join(l.dir, logStartName))
	rp, _ := readOffsetFile(l.fs, filepath.Join(l.dir, recoveryPointName))
	// A new partition: nothing to recover, and its empty files need no
	// fsync of their own (the directory sync below makes them exist).
	fresh := len(st.bases) == 0 && len(st.snapshots) == 0 && !lsOK

	// Segments wholly below the log start (resurrected by a crash after
	// their removal) are deleted.
	bases := st.bases
	for lsOK && len(bases) > 1 && bases[1] <= logStart {
		l.removeSegmentNames(bases[0])
		bases = bases[1:]
	}
	for _, b := range bases {
		s, err := openSegmentFiles(l.fs, l.dir, b, false)
		if err != nil {
			return err
		}
		s.createdMs = l.lastNowMs
		size, err := s.log.Size()
		if err != nil {
			s.close()
			return err
		}
		s.size = min(size, math.MaxInt32)
		l.segs = append(l.segs, s)
		if err := s.loadTxnIndex(); err != nil {
			s.close()
			return err
		}
	}

	// scanFrom: first segment whose batches are checked one by one.
	scanFrom := len(l.segs)
	if !clean {
		scanFrom = 0
		for i, s := range l.segs {
			if s.base <= rp {
				scanFrom = i
			}
		}
		scanFrom = min(scanFrom, max(len(l.segs)-1, 0))
	}

	// Leader-epoch cache: the checkpoint, or rebuilt from the batches.
	epochs, epochErr := l.readEpochs()
	rebuildEpochs := epochErr != nil
	if rebuildEpochs {
		epochs = &epoch.Cache{}
	}
	l.epochs = epochs

	for i := 0; i < scanFrom; i++ {
		ok, err := l.loadTrusted(i, clean && i == len(l.segs)-1, rebuildEpochs)
		if err != nil {
			return err
		}
		if !ok { // the clean last segment failed its check: scan it
			scanFrom = i
		}
	}
	// The scan adds the epochs of batches newer than the checkpoint's
	// latest (assignRecovered) and keeps its entries: an entry whose
	// batches compaction removed is not re-derivable, yet a follower's
	// divergence check needs it. Entries past what the crash left are cut
	// at the recovered log end below. The checkpoint never names data
	// that a truncation replaced: a truncation persists the cut cache, and
	// an epoch's start is persisted before its batches are appended, as in
	// Kafka's LogSegment.recover and LeaderEpochFileCache.
	if lsOK {
		l.logStart = logStart // for assignRecovered; settled below
	}
	if err := l.scanSegments(scanFrom); err != nil {
		return err
	}

	if len(l.segs) == 0 {
		start := int64(0)
		if lsOK {
			start = logStart
		}
		if err := l.resetTo(start); err != nil {
			return err
		}
	}
	l.leo = l.active().next
	if !lsOK || (logStart < l.segs[0].base && !l.cfg.RemoteStorage) {
		logStart = l.segs[0].base
	}
	if logStart > l.leo {
		// Everything below the log start is gone: start afresh there.
		if err := l.resetTo(logStart); err != nil {
			return err
		}
		l.leo = logStart
	}
	l.logStart = logStart

	changed := l.epochs.TruncateFromEnd(l.leo)
	changed = l.epochs.TruncateFromStart(l.logStart) || changed
	if changed || (rebuildEpochs && !(fresh && l.epochs.Len() == 0)) {
		if err := l.persistEpochs(); err != nil {
			return err
		}
	}

	if err := l.loadProducers(st.snapshots, clean, scanFrom); err != nil {
		return err
	}
	l.removeOldSnapshots()

	// Everything now in the files is made durable (a process crash leaves
	// unsynced data readable in the page cache), then the clean marker is
	// removed so that a crash from here on is detected.
	for _, s := range l.segs {
		for _, f := range append(s.openIndexFiles(), s.log) {
			if !clean && !fresh {
				if err := f.Sync(); err != nil {
					return err
				}
			}
		}
		s.syncedSize = s.size
		s.indexesSynced = s != l.active()
	}
	switch {
	case clean:
		if err := l.fs.Remove(cleanName); err != nil {
			return err
		}
		l.markerPending = true
	case fresh:
		// The new names are synced by the first fsync round (dirDirty),
		// before anything written to them is acknowledged.
		l.dirDirty = true
	default:
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	l.flushed.Store(l.leo)
	l.rpBase = l.active().base
	if rp == l.rpBase {
		// Unchanged; a missing or unreadable recovery point reads as 0,
		// which is what a log that never rolled has.
		return nil
	}
	return vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, recoveryPointName), encodeOffsetFile(l.rpBase), false)
}

// assignRecovered adds a recovered batch's epoch to the cache, as Kafka's
// segment recovery does: only an epoch newer than the latest starts an
// entry (an older one would truncate the cache).
func (l *Log) assignRecovered(h *batch.Header) {
	if h.NextOffset() <= l.logStart {
		return // below the log start: not the log's any more
	}
	if h.LeaderEpoch >= 0 && h.LeaderEpoch > l.epochs.LatestEpoch() {
		l.epochs.Assign(h.LeaderEpoch, h.BaseOffset)
	}
}

// readEpochs reads the leader-epoch checkpoint.
func (l *Log) readEpochs() (*epoch.Cache, error) {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, epochCheckpointName), maxCheckpointFileBytes)
	if err != nil {
		return nil, err
	}
	return epoch.Decode(b)
}

// loadTrusted loads segment i, which lies below the recovery point (so its
// data was fsynced), from its index files, rebuilding them if they are
// missing or invalid. For the last segment after a clean shutdown the end is
// found by walking headers from the last index entry; ok is false if that
// walk does not end exactly at the end of the file.
func (l *Log) loadTrusted(i int, last, rebuildEpochs bool) (ok bool, err error) {
	s := l.segs[i]
	next := int64(-1)
	if i+1 < len(l.segs) {
		next = l.segs[i+1].base
	}
	if err := l.loadIndexes(s, next); err != nil {
		if err := l.rebuildIndexes(s); err != nil {
			return false, err
		}
	} else if last || next < 0 {
		e := floorOffset(s.offsets, math.MaxUint32)
		end, err := walk(s.log, int64(e.pos), s.size, s.base+int64(e.rel), false, batch.HeaderSize, func(h *batch.Header, pos int64, _ []byte) error {
			s.next = h.NextOffset()
			s.bytesSinceIndex += h.Size()
			return nil
		})
		if err != nil {
			return false, err
		}
		if end != s.size {
			return false, nil
		}
		if s.next == s.base && len(s.offsets) > 0 {
			return false, nil
		}
	} else {
		s.next = next
	}
	if last || next < 0 || l.cfg.Compact {
		if err := l.readFirstTs(s); err != nil {
			return false, err
		}
	}
	if rebuildEpochs {
		_, err := walk(s.log, 0, s.size, -1, false, 64<<10, func(h *batch.Header, _ int64, _ []byte) error {
			l.assignRecovered(h)
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// loadIndexes decodes s's index files and spot-checks the last offset entry
// against the log. next is the following segment's base, or -1.
func (l *Log) loadIndexes(s *segment, next int64) error {
	data, err := readIndexFile(s, indexSuffix)
	if err != nil {
		return err
	}
	if s.offsets, err = decodeOffsetIndex(data, s.size); err != nil {
		return err
	}
	if k := len(s.offsets); k > 0 {
		e := s.offsets[k-1]
		hb := make([]byte, batch.HeaderSize)
		if _, err := s.log.ReadAt(hb, int64(e.pos)); err != nil {
			return errBadIndex
		}
		h, err := batch.ParseHeader(hb)
		if err != nil || h.BaseOffset != s.base+int64(e.rel) {
			return errBadIndex
		}
		if next >= 0 && h.NextOffset() > next {
			return errBadIndex
		}
	}
	maxRel := int64(math.MaxUint32) + 1
	if next >= 0 {
		maxRel = next - s.base
	}
	if data, err = readIndexFile(s, timeIndexSuffix); err != nil {
		return err
	}
	if s.times, err = decodeTimeIndex(data, maxRel); err != nil {
		return err
	}
	if k := len(s.times); k > 0 {
		s.maxTs, s.maxTsAt = s.times[k-1].ts, s.base+int64(s.times[k-1].rel)
	}
	return nil
}

// rebuildIndexes recreates s's indexes by walking its batch headers (a
// trusted segment whose index files are missing or corrupt).
func (l *Log) rebuildIndexes(s *segment) error {
	s.resetIndexes()
	end, err := walk(s.log, 0, s.size, s.base, false, 64<<10, func(h *batch.Header, pos int64, _ []byte) error {
		s.track(h, pos, l.cfg.IndexIntervalBytes)
		s.next = h.NextOffset()
		return nil
	})
	if err != nil {
		return err
	}
	s.size = end
	s.maybeTimeEntry()
	return s.writeIndexes()
}

func (s *segment) resetIndexes() {
	s.offsets, s.times = nil, nil
	s.maxTs, s.maxTsAt, s.firstTs = -1, -1, -1
	s.bytesSinceIndex = 0
	s.next = s.base
}

func (l *Log) readFirstTs(s *segment) error {
	if s.size < batch.HeaderSize {
		return nil
	}
	hb := make([]byte, batch.HeaderSize)
	if _, err := s.log.ReadAt(hb, 0); err != nil {
		return ioErr(err)
	}
	if h, err := batch.ParseHeader(hb); err == nil {
		s.firstTs = h.MaxTimestamp
	}
	return nil
}

// scanSegments checks every batch of segments from..end (CRC, framing,
// increasing offsets: a compacted segment has gaps inside, never at its
// end), truncating at the first bad one and dropping every segment after
// it, and rebuilds their indexes. A segment must start where the one
// before it ended: a crash that lost the tail of one segment but kept a
// later one leaves a hole, which is cut off there.
func (l *Log) scanSegments(from int) error {
	for i := from; i < len(l.segs); i++ {
		s := l.segs[i]
		if i > 0 && s.base != l.segs[i-1].next {
			return l.dropSegmentsFrom(i)
		}
		s.resetIndexes()
		end, err := walk(s.log, 0, s.size, s.base, true, 1<<20, func(h *batch.Header, pos int64, _ []byte) error {
			if h.LastOffset()-s.base > math.MaxUint32 {
				return errStop
			}
			s.track(h, pos, l.cfg.IndexIntervalBytes)
			s.next = h.NextOffset()
			l.assignRecovered(h)
			return nil
		})
		if err != nil {
			return err
		}
		fileSize, err := s.log.Size()
		if err != nil {
			return err
		}
		if end != fileSize {
			if err := s.log.Truncate(end); err != nil {
				return err
			}
		}
		s.size = end
		if i < len(l.segs)-1 {
			s.maybeTimeEntry() // sealed: final time entry, as at roll
		}
		if err := s.writeIndexes(); err != nil {
			return err
		}
		if end != fileSize {
			return l.dropSegmentsFrom(i + 1)
		}
	}
	return nil
}

// dropSegmentsFrom closes and removes segments i.. (recovery only).
func (l *Log) dropSegmentsFrom(i int) error {
	for _, s := range l.segs[i:] {
		s.close()
		if err := s.removeFiles(l.fs); err != nil {
			return err
		}
	}
	l.segs = l.segs[:i]
	return nil
}

func (l *Log) removeSegmentNames(base int64) {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		l.fs.Remove(fileName(l.dir, base, suf))
	}
}

// resetTo replaces all segments by one empty segment at off (recovery).
func (l *Log) resetTo(off int64) error {
	if err := l.dropSegmentsFrom(0); err != nil {
		return err
	}
	s, err := openSegmentFiles(l.fs, l.dir, off, true)
	if err != nil {
		return err
	}
	s.createdMs = l.lastNowMs
	l.segs = []*segment{s}
	return nil
}

// loadProducers restores the log's own producer state: the snapshot at
// the log end after a clean shutdown, else the newest valid snapshot at or
// below the first scanned segment, then replays the batches after it.
func (l *Log) loadProducers(snaps []int64, clean bool, scanFrom int) error {
	ps, err := l.readProducers(snaps, clean, scanFrom, true)
	if err != nil {
		return err
	}
	l.producers = ps
	return nil
}

// readProducers computes the producer state at the log end from the newest
// valid snapshot usable (see loadProducers) and a replay of the batches
// after it. With index set, the replay also rebuilds the aborted-transaction
// index entries of the segments it goes through, as recovery does;
// without, it only reads.
func (l *Log) readProducers(snaps []int64, clean bool, scanFrom int, index bool) (*producer.State, error) {
	limit := l.leo
	if !clean && scanFrom < len(l.segs) {
		limit = l.segs[scanFrom].base
	}
	ps, from := l.snapshotAtOrBelow(snaps, limit)
	if from == l.segs[0].base && len(l.segs) > 1 && limit < l.segs[1].base {
		// No snapshot from the first segment's base to limit: rather than
		// an empty state at that base (which forgets the transactions open
		// there, so their ABORT markers later would get no aborted-index
		// entry), take a snapshot inside the first segment: a log written
		// before rolls snapshotted at the new base holds one a few batches
		// after it. That segment is sealed: its aborted-index entries
		// below the snapshot are in its index file.
		if ps1, from1 := l.snapshotAtOrBelow(snaps, l.segs[1].base); from1 > from {
			ps, from = ps1, from1
		}
	}
	if err := l.replayProducers(ps, from, index, nil); err != nil {
		return nil, err
	}
	ps.ExpireBefore(l.lastNowMs - l.cfg.ProducerIDExpirationMs)
	return ps, nil
}

// snapshotAtOrBelow returns the newest valid snapshot among snaps at or
// below limit and its offset, or an empty state at the first segment's
// base if there is none.
func (l *Log) snapshotAtOrBelow(snaps []int64, limit int64) (*producer.State, int64) {
	for i := len(snaps) - 1; i >= 0; i-- {
		off := snaps[i]
		if off > limit || off < l.segs[0].base {
			continue
		}
		b, err := vfs.ReadFile(l.fs, fileName(l.dir, off, snapshotSuffix), maxSnapshotFileBytes)
		if err != nil {
			continue
		}
		snap, err := producer.Decode(b)
		if err != nil {
			continue
		}
		return snap, off
	}
	return producer.NewState(), l.segs[0].base
}

// replayProducers applies the batches at offsets >= from to ps; with index
// set it also rebuilds the aborted-transaction index entries of the
// markers there, writing the index files of the sealed segments it went
// through. ended, if not nil, is called with every transaction a marker
// there ends, in log order.
func (l *Log) replayProducers(ps *producer.State, from int64, index bool, ended func(producer.Completed)) error {
	for i, s := range l.segs {
		if s.next <= from || (i+1 < len(l.segs) && l.segs[i+1].base <= from) {
			// Not replayed; but an entry past the segment's data (its
			// index file outlived the batches in a crash) goes, as
			// Kafka's LogSegment.recover rebuilds the index of what is
			// left.
			if t := trimAborted(s.aborted, s.next); index && len(t) != len(s.aborted) {
				if err := l.setAborted(i, t); err != nil {
					return err
				}
			}
			continue
		}
		var start int64
		if from > s.base {
			start = int64(floorOffset(s.offsets, uint32(from-s.base)).pos)
		}
		aborted := trimAborted(s.aborted, from)
		var ctl []byte
		_, err := walk(s.log, start, s.size, -1, false, 64<<10, func(h *batch.Header, pos int64, _ []byte) error {
			if h.BaseOffset < from {
				return nil
			}
			var b []byte
			if h.IsControl() && h.ProducerID >= 0 {
				// A marker: its type is in its record.
				if cap(ctl) < h.Size() {
					ctl = make([]byte, h.Size())
				}
				b = ctl[:h.Size()]
				if _, err := s.log.ReadAt(b, pos); err != nil {
					return ioErr(err)
				}
			}
			c, ok := applyBatch(ps, h, b)
			if !ok {
				return nil
			}
			if ended != nil {
				ended(c)
			}
			if c.Aborted && index {
				aborted = append(aborted, AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStable: ps.StableAfter(c)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if index {
			if err := l.setAborted(i, aborted); err != nil {
				return err
			}
		}
	}
	return nil
}

// setAborted replaces segment i's aborted-transaction entries, rewriting
// its index file if it is sealed (the active one's is written at roll and
// close).
func (l *Log) setAborted(i int, aborted []AbortedTxn) error {
	s := l.segs[i]
	l.mu.Lock()
	s.aborted = aborted
	l.mu.Unlock()
	if i < len(l.segs)-1 {
		return s.writeTxnIndex("")
	}
	return nil
}

// removeOldSnapshots removes the producer snapshots outside the log's
// segments: those above the log end and those below the first segment's
// base. Every segment keeps the snapshot taken when it was rolled in, as
// Kafka keeps one per segment and deletes it with its segment
// (UnifiedLog.deleteSegmentFiles), so recovery from any segment and
// retention never leave the log without its first segment's snapshot
// (appendMu held or during recovery).
func (l *Log) removeOldSnapshots() {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return
	}
	first := l.leo
	if len(l.segs) > 0 {
		first = l.segs[0].base
	}
	for _, n := range names {
		off, ok := parseFileName(n, snapshotSuffix)
		if ok && (off > l.leo || off < first) {
			l.fs.Remove(filepath.Join(l.dir, n))
		}
	}
}

// readIndexFile reads one of s's index files without keeping it open; a
// missing file reads as empty (a segment whose indexes were never written).
func readIndexFile(s *segment, suffix string) ([]byte, error) {
	b, err := vfs.ReadFile(s.fs, fileName(s.dir, s.base, suffix), maxIndexFileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, vfs.ErrTooLarge):
		return nil, errBadIndex
	}
	return b, err
}
