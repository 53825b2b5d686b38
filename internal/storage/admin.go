package storage

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// TruncateTo removes every batch holding an offset >= offset (follower
// truncation). As in Kafka, a batch that straddles offset is removed whole,
// so the log end becomes the start of that batch (<= offset). Unless the
// log was handed over (its owner truncates its own and persists it), the
// epoch cache is truncated (even when no data is removed). The log's
// producer state is rebuilt from the newest snapshot at or below the new
// end. The
// result is fsynced before returning, so no truncated batch can reappear
// after a crash. An offset below the log start truncates fully (see
// TruncateFullyAndStartAt).
func (l *Log) TruncateTo(offset int64) error {
	l.checkWriter("TruncateTo")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if offset < l.logStart {
		return l.truncateFully(offset)
	}
	if offset >= l.leo {
		if l.owned() {
			return nil
		}
		l.mu.Lock()
		changed := l.epochs.TruncateFromEnd(offset)
		l.mu.Unlock()
		if changed {
			return l.persistEpochs()
		}
		return nil
	}
	l.pauseFlush()
	defer l.resumeFlush()

	i := len(l.segs) - 1
	for i > 0 && l.segs[i].base > offset {
		i--
	}
	s := l.segs[i]
	pos, newEnd, err := l.cutPoint(s, offset)
	if err != nil {
		return l.fail(err)
	}
	if err := s.log.Truncate(pos); err != nil {
		return l.fail(err)
	}
	offsets, times, maxTs, maxTsAt, err := l.trimIndexes(s, pos, newEnd)
	if err != nil {
		return l.fail(err)
	}
	removed := l.segs[i+1:]
	l.mu.Lock()
	l.segs = append([]*segment(nil), l.segs[:i+1]...)
	s.size, s.next, s.offsets, s.times, s.maxTs, s.maxTsAt = pos, newEnd, offsets, times, maxTs, maxTsAt
	s.aborted = trimAborted(s.aborted, newEnd)
	s.syncedSize, s.indexesSynced = -1, false
	l.leo = newEnd
	l.truncGen++
	l.cleanedTo = min(l.cleanedTo, newEnd)
	if l.flushed.Load() > newEnd {
		l.flushed.Store(newEnd)
	}
	if !l.owned() {
		l.epochs.TruncateFromEnd(newEnd)
	}
	startMoved := newEnd < l.logStart
	if startMoved {
		// The cut batch straddled the log start (Kafka: logStartOffset =
		// min(logStartOffset, targetOffset)).
		l.logStart = newEnd
	}
	l.mu.Unlock()
	if startMoved {
		if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartName), encodeOffsetFile(newEnd), true); err != nil {
			return l.fail(err)
		}
	}
	s.bytesSinceIndex = int(pos - int64(floorOffset(offsets, ^uint32(0)).pos))
	if pos == 0 {
		s.firstTs = -1
	}
	if err := s.writeIndexes(); err != nil {
		return l.fail(err)
	}
	if err := s.writeTxnIndex(""); err != nil {
		return l.fail(err)
	}
	l.scheduleDelete(removed)
	l.removeOldSnapshots()
	if err := l.rebuildProducers(); err != nil {
		return l.fail(err)
	}
	if !l.owned() {
		if err := l.persistEpochs(); err != nil {
			return err
		}
	}
	return l.syncAll()
}

// cutPoint finds where truncating s to offset cuts it: the position of the
// first batch that ends above offset, and the new log end. A batch that
// straddles offset goes whole (the end is its base); when offset lies in
// a gap of a compacted segment, the end is that of the last batch kept,
// so that the log never ends in a gap (a segment's batches always reach
// its end, which recovery checks).
func (l *Log) cutPoint(s *segment, offset int64) (pos, base int64, err error) {
	e := floorOffset(s.offsets, uint32(offset-s.base))
	prevEnd := s.base + int64(e.rel)
	pos, base = s.size, -1
	_, err = walk(s.log, int64(e.pos), s.size, -1, false, batch.HeaderSize, func(h *batch.Header, p int64, _ []byte) error {
		if h.NextOffset() > offset {
			pos = p
			if h.BaseOffset < offset {
				base = h.BaseOffset
			}
			return errStop
		}
		prevEnd = h.NextOffset()
		return nil
	})
	if base < 0 {
		base = prevEnd
	}
	return pos, base, err
}

// trimIndexes returns s's index entries below newEnd (as new slices, since
// readers may hold the old ones) and the max timestamp of what remains.
func (l *Log) trimIndexes(s *segment, pos, newEnd int64) ([]offsetEntry, []timeEntry, int64, int64, error) {
	rel := newEnd - s.base
	var offsets []offsetEntry
	for _, e := range s.offsets {
		if int64(e.rel) < rel && int64(e.pos) < pos {
			offsets = append(offsets, e)
		}
	}
	var times []timeEntry
	for _, e := range s.times {
		if int64(e.rel) < rel {
			times = append(times, e)
		}
	}
	maxTs, maxTsAt := int64(-1), int64(-1)
	var from int64
	if k := len(times); k > 0 {
		maxTs, maxTsAt = times[k-1].ts, s.base+int64(times[k-1].rel)
		from = int64(floorOffset(offsets, times[k-1].rel).pos)
	}
	_, err := walk(s.log, from, pos, -1, false, batch.HeaderSize, func(h *batch.Header, _ int64, _ []byte) error {
		if h.MaxTimestamp > maxTs {
			maxTs, maxTsAt = h.MaxTimestamp, h.BaseOffset
		}
		return nil
	})
	return offsets, times, maxTs, maxTsAt, err
}

// rebuildProducers recomputes the log's own producer state for the current
// log end from the newest usable snapshot (appendMu held).
func (l *Log) rebuildProducers() error {
	snaps := l.snapshotOffsets()
	return l.loadProducers(snaps, false, len(l.segs))
}

func (l *Log) snapshotOffsets() []int64 {
	names, _ := l.fs.List(l.dir)
	var out []int64
	for _, n := range names {
		if off, ok := parseFileName(n, snapshotSuffix); ok {
			out = append(out, off)
		}
	}
	return out
}

// TruncateFullyAndStartAt deletes the whole log and restarts it, empty, at
// offset (a follower far behind a leader whose log start passed it). The
// log start, log end and flushed offset all become offset; the epoch cache
// and producer state are cleared.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.checkWriter("TruncateFullyAndStartAt")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.truncateFully(offset)
}

func (l *Log) truncateFully(offset int64) error {
	if offset < 0 {
		return ErrOffsetOutOfRange
	}
	l.pauseFlush()
	defer l.resumeFlush()
	// Log start first: if we crash midway, recovery drops whatever lies
	// below it.
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartName), encodeOffsetFile(offset), true); err != nil {
		return l.fail(err)
	}
	old := l.segs
	l.scheduleDelete(old)
	for _, off := range l.snapshotOffsets() {
		l.fs.Remove(fileName(l.dir, off, snapshotSuffix))
	}
	s, err := openSegmentFiles(l.fs, l.dir, offset, true)
	if err != nil {
		return l.fail(err)
	}
	s.createdMs = l.lastNowMs
	l.mu.Lock()
	l.segs = []*segment{s}
	l.leo, l.logStart = offset, offset
	l.cleanedTo, l.tombstoneHorizon, l.tombstoneBlocked = 0, 0, -1
	l.truncGen++
	l.flushed.Store(offset)
	owned := l.owned()
	if !owned {
		l.epochs = &epoch.Cache{}
	}
	l.mu.Unlock()
	l.producers = producer.NewState()
	if !owned {
		if err := l.persistEpochs(); err != nil {
			return err
		}
	}
	return l.syncAll()
}

// AdvanceLogStart raises the log start to offset (DeleteRecords), which must
// not exceed the log end, deleting the segments wholly below it. The new log
// start is persisted durably before returning.
func (l *Log) AdvanceLogStart(offset int64) error {
	l.checkWriter("AdvanceLogStart")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if offset > l.leo {
		return ErrOffsetOutOfRange
	}
	if offset <= l.logStart {
		return nil
	}
	l.mu.Lock()
	l.logStart = offset
	epochChanged := !l.owned() && l.epochs.TruncateFromStart(offset)
	l.mu.Unlock()
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartName), encodeOffsetFile(offset), true); err != nil {
		return l.fail(err)
	}
	if epochChanged {
		if err := l.persistEpochs(); err != nil {
			return err
		}
	}
	n := 0
	for i, s := range l.segs {
		below := s.next <= offset && s.size > 0
		if i+1 < len(l.segs) {
			below = l.segs[i+1].base <= offset
		}
		if !below {
			break
		}
		n++
	}
	return l.deleteOldest(n, true)
}

// DeleteLocalBelow deletes the local segments wholly below offset, never
// the active one, and leaves the log start where it is: with tiered storage
// (Config.RemoteStorage) the range stays readable from the remote log, and
// Read answers ErrOffsetTiered for it. The caller deletes only segments
// whose copy to the remote log is finished (Kafka's local retention,
// local.retention.ms / local.retention.bytes). It returns how many
// segments went.
func (l *Log) DeleteLocalBelow(offset int64) (int, error) {
	l.checkWriter("DeleteLocalBelow")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if !l.cfg.RemoteStorage {
		return 0, errors.New("storage: DeleteLocalBelow without remote storage")
	}
	n := 0
	for i := 0; i+1 < len(l.segs) && l.segs[i+1].base <= offset; i++ {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.deleteLocal(n); err != nil {
		return 0, err
	}
	return n, nil
}

// ApplyRetention deletes the oldest segments that retention.ms or
// retention.bytes (or the log start) no longer require, considering only
// segments wholly below hw. Time and size apply only when the cleanup
// policy contains delete (Config.Delete); the log start always does. If every segment goes, a new empty active
// segment is rolled first. It also expires idle producer ids and closes
// files of segments deleted more than file.delete.delay.ms ago.
func (l *Log) ApplyRetention(now time.Time, hw int64) (deletedSegments int, err error) {
	l.checkWriter("ApplyRetention")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	l.observe(now)
	nowMs := now.UnixMilli()
	cfg := l.cfg
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for i, s := range l.segs {
		if s.size == 0 || s.next > hw {
			break
		}
		del := i+1 < len(l.segs) && l.segs[i+1].base <= l.logStart
		del = del || (cfg.Delete && cfg.RetentionMs >= 0 && nowMs-s.largestTimestamp() > cfg.RetentionMs)
		del = del || (cfg.Delete && cfg.RetentionBytes >= 0 && total-s.size >= cfg.RetentionBytes)
		if !del {
			break
		}
		total -= s.size
		n++
	}
	if err := l.deleteOldest(n, false); err != nil {
		return 0, err
	}
	// An owner expires its own as well (replica.Config.ProducerIDExpirationMs).
	l.producers.ExpireBefore(nowMs - cfg.ProducerIDExpirationMs)
	l.processDeletes(nowMs)
	return n, nil
}

// deleteOldest deletes the first n segments, rolling first if that is all
// of them, and raises the log start to the new first segment (appendMu
// held). syncStart makes the log start durable (DeleteRecords); retention
// does not need it, since a resurrected segment only delays deletion.
func (l *Log) deleteOldest(n int, syncStart bool) error {
	if n == 0 {
		return nil
	}
	if n == len(l.segs) {
		if _, err := l.roll(); err != nil {
			return err
		}
	}
	dead := l.segs[:n]
	l.mu.Lock()
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.logStart = max(l.logStart, l.segs[0].base)
	epochChanged := !l.owned() && l.epochs.TruncateFromStart(l.logStart)
	start := l.logStart
	l.mu.Unlock()
	l.scheduleDelete(dead)
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartName), encodeOffsetFile(start), syncStart); err != nil {
		return l.fail(err)
	}
	for _, off := range l.snapshotOffsets() {
		if off < l.segs[0].base {
			l.fs.Remove(fileName(l.dir, off, snapshotSuffix))
		}
	}
	if epochChanged {
		return l.persistEpochs()
	}
	return nil
}

// scheduleDelete removes the segments' names now and closes their files
// file.delete.delay.ms later (appendMu held).
func (l *Log) scheduleDelete(segs []*segment) {
	for _, s := range segs {
		s.removeFiles(l.fs)
		l.closeLater(s)
	}
	l.mu.Lock()
	l.dirDirty = true
	l.mu.Unlock()
	l.processDeletes(l.lastNowMs)
}

// closeLater marks s deleted and closes its files file.delete.delay.ms
// from now, so reads in flight finish (appendMu held).
func (l *Log) closeLater(s *segment) {
	s.deleted.Store(true)
	l.deletes = append(l.deletes, pendingDelete{seg: s, deadlineMs: l.lastNowMs + l.cfg.FileDeleteDelayMs})
}

// processDeletes closes the files of deleted segments whose delay has passed.
func (l *Log) processDeletes(nowMs int64) {
	keep := l.deletes[:0]
	for _, d := range l.deletes {
		if d.deadlineMs <= nowMs {
			d.seg.close()
		} else {
			keep = append(keep, d)
		}
	}
	clear(l.deletes[len(keep):])
	l.deletes = keep
}

// syncAll fsyncs every dirty file and the directory, then marks everything
// durable (appendMu held, flush rounds paused).
func (l *Log) syncAll() error {
	l.mu.Lock()
	segs, snaps, leo := l.segs, l.unsyncedSnaps, l.leo
	l.unsyncedSnaps, l.dirDirty = nil, false
	var items []syncItem
	for _, s := range segs {
		if s.syncedSize < s.size || !s.indexesSynced {
			items = append(items, syncItem{seg: s, size: s.size, indexes: true})
		}
	}
	l.mu.Unlock()
	if err := l.syncFiles(true, items, snaps); err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	for _, it := range items {
		it.seg.syncedSize = it.size
		it.seg.indexesSynced = it.seg != segs[len(segs)-1]
	}
	l.flushed.Store(leo)
	active := l.active().base
	l.mu.Unlock()
	if active == l.rpBase {
		return nil
	}
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, recoveryPointName), encodeOffsetFile(active), false); err != nil {
		return l.fail(err)
	}
	l.rpBase = active
	return nil
}

// Close flushes the log, writes a producer snapshot at the log end and the
// clean-shutdown marker, and closes its files. A failed log is closed
// without the marker, so the next Open recovers it.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed, failed := l.closed, l.failed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	var err error
	if failed == nil {
		err = l.closeClean()
	}
	l.pauseFlush()
	l.mu.Lock()
	l.closed = true
	l.stopClean.Store(true)
	segs := l.segs
	l.mu.Unlock()
	l.resumeFlush()
	for _, s := range segs {
		s.close()
	}
	for _, d := range l.deletes {
		d.seg.close()
	}
	l.deletes = nil
	return err
}

func (l *Log) closeClean() error {
	l.pauseFlush()
	defer l.resumeFlush()
	s := l.active()
	l.mu.Lock()
	s.maybeTimeEntry()
	l.mu.Unlock()
	if err := s.writeIndexes(); err != nil {
		return l.fail(err)
	}
	if err := s.writeTxnIndex(""); err != nil {
		return l.fail(err)
	}
	if err := l.syncAll(); err != nil {
		return err
	}
	// A snapshot at the log end already on disk is current: producer
	// state changes only with appends (expiry only drops entries, which
	// loading drops again).
	// It is not fsynced either: a snapshot torn by a crash fails its CRC,
	// and recovery replays from an older one. An owner writes its own
	// first (WriteProducerSnapshot, before Close).
	snap := fileName(l.dir, l.leo, snapshotSuffix)
	if ok, err := vfs.Exists(l.fs, snap); err != nil || !ok {
		if err := vfs.WriteFileAtomic(l.fs, snap, l.producers.Encode(), false); err != nil {
			return l.fail(err)
		}
		l.removeOldSnapshots()
	}
	// Everything the marker vouches for is durable by now, so the marker
	// itself needs no fsync: lost in a crash, it only costs a recovery.
	f, err := l.fs.Create(filepath.Join(l.dir, cleanShutdownName))
	if err != nil {
		return err
	}
	return f.Close()
}

// Delete closes the log and removes its whole directory.
func (l *Log) Delete() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.pauseFlush()
	l.mu.Lock()
	l.closed = true
	l.stopClean.Store(true)
	segs := l.segs
	l.mu.Unlock()
	l.resumeFlush()
	for _, s := range segs {
		s.close()
	}
	for _, d := range l.deletes {
		d.seg.close()
	}
	l.deletes = nil
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return err
	}
	return l.fs.SyncDir(filepath.Dir(l.dir))
}
