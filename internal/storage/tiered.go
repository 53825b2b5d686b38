package storage

// Tiered storage's side of the log (KIP-405): what the remote log manager
// reads of the local segments to copy them (SegmentCopy), and local
// retention, which deletes local segments only once they are copied
// (ApplyLocalRetention; Kafka's UnifiedLog.deleteOldSegments with remote
// storage on, which deletes local segments up to the highest offset
// copied to remote storage and past local.retention.*).

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// SegmentInfo describes one local segment.
type SegmentInfo struct {
	// Base is its first offset, Next the offset after its last batch.
	Base, Next int64
	// Size is its log file's size in bytes.
	Size int64
	// MaxTimestamp is its newest batch max timestamp (-1 without
	// timestamps).
	MaxTimestamp int64
	// Active is set for the last segment, the one appended to.
	Active bool
}

// LocalSegments returns the local segments, oldest first.
func (l *Log) LocalSegments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.base, Next: s.next, Size: s.size, MaxTimestamp: s.maxTs, Active: i == len(l.segs)-1}
	}
	return out
}

// SegmentCopy is what the remote log manager uploads of one rolled
// segment (remote.FileKind): the segment's log file, read in place, and
// the other files' contents as of the segment's end.
type SegmentCopy struct {
	SegmentInfo
	// Log reads the segment's log file, LogSize bytes. The file stays
	// readable while the copy runs even if the segment is deleted
	// meanwhile, for file.delete.delay.ms (its descriptor is closed only
	// then).
	Log     io.ReaderAt
	LogSize int64
	// Index and TimeIndex are the segment's .index and .timeindex bytes
	// (the local formats, storage.md); TxnIndex its .txnindex, empty when
	// the segment has no aborted transaction.
	Index, TimeIndex, TxnIndex []byte
	// ProducerSnapshot is the producer state as of Next, in the local
	// snapshot format (producer.State.Encode): the newest local snapshot
	// at or below Next with the batches from there to Next applied. When
	// the log holds no snapshot at or below Next, the replay starts from
	// an empty state at the first local segment, and SnapshotExact says
	// whether that is the log start (so the state is exact).
	ProducerSnapshot []byte
	SnapshotExact    bool
	// LeaderEpochs is the leader-epoch checkpoint as of the segment's end
	// (entries starting below Next), SegmentEpochs the entries that cover
	// the segment, the first moved up to Base (Kafka's
	// RemoteLogSegmentMetadata.segmentLeaderEpochs).
	LeaderEpochs, SegmentEpochs []epoch.Entry
}

// ErrNoSuchSegment is returned by SegmentCopy for a base offset that is
// not a rolled local segment.
var ErrNoSuchSegment = errors.New("storage: no such rolled segment")

// SegmentCopy returns the files of the rolled segment starting at base,
// for a copy to the remote log. The caller reads Log after this returns;
// nothing of the log is changed.
func (l *Log) SegmentCopy(base int64) (*SegmentCopy, error) {
	l.mu.RLock()
	var s *segment
	for i, seg := range l.segs[:len(l.segs)-1] {
		if seg.base == base {
			s = l.segs[i]
			break
		}
	}
	if s == nil || s.deleted.Load() {
		l.mu.RUnlock()
		return nil, ErrNoSuchSegment
	}
	c := &SegmentCopy{SegmentInfo: SegmentInfo{Base: s.base, Next: s.next, Size: s.size, MaxTimestamp: s.maxTs}, Log: s.log, LogSize: s.size}
	for _, e := range s.offsets {
		c.Index = appendOffsetEntry(c.Index, e)
	}
	for _, e := range s.times {
		c.TimeIndex = appendTimeEntry(c.TimeIndex, e)
	}
	if len(s.aborted) > 0 {
		c.TxnIndex = encodeTxnIndex(s.aborted)
	}
	all := l.epochs.Entries()
	views := make([]segView, 0, len(l.segs))
	for _, seg := range l.segs {
		if seg.base >= c.Next {
			break
		}
		views = append(views, segView{s: seg, size: seg.size, next: seg.next, offsets: seg.offsets})
	}
	logStart := l.logStart
	l.mu.RUnlock()
	for _, e := range all {
		if e.StartOffset < c.Next {
			c.LeaderEpochs = append(c.LeaderEpochs, e)
		}
	}
	c.SegmentEpochs = segmentEpochs(c.LeaderEpochs, c.Base)
	ps, exact, err := l.producerStateAt(views, logStart, c.Next)
	if err != nil {
		return nil, err
	}
	c.ProducerSnapshot, c.SnapshotExact = ps.Encode(), exact
	return c, nil
}

// errReplayed ends producerStateAt's walk at the offset asked.
var errReplayed = errors.New("replayed")

// producerStateAt computes the producer state as of offset next from the
// newest snapshot at or below it and the batches of segs (the local
// segments below next, captured under mu) from there to next. Without
// such a snapshot it starts from an empty state at the first segment;
// exact reports whether that start is the log start (or a snapshot).
func (l *Log) producerStateAt(segs []segView, logStart, next int64) (ps *producer.State, exact bool, err error) {
	if len(segs) == 0 {
		return producer.NewState(), false, nil
	}
	snaps := l.snapshotOffsets()
	slices.Sort(snaps)
	from := segs[0].s.base
	ps, exact = producer.NewState(), from <= logStart
	for i := len(snaps) - 1; i >= 0; i-- {
		if snaps[i] > next || snaps[i] < segs[0].s.base {
			continue
		}
		b, err := vfs.ReadFile(l.fs, fileName(l.dir, snaps[i], snapshotSuffix), maxSnapshotFileBytes)
		if err != nil {
			continue
		}
		if snap, err := producer.Decode(b); err == nil {
			ps, from, exact = snap, snaps[i], true
			break
		}
	}
	var ctl []byte
	for _, v := range segs {
		if v.next <= from {
			continue
		}
		var start int64
		if from > v.s.base {
			start = int64(floorOffset(v.offsets, uint32(from-v.s.base)).pos)
		}
		_, err := walk(v.s.log, start, v.size, -1, false, 64<<10, func(h *batch.Header, pos int64, _ []byte) error {
			if h.BaseOffset >= next {
				return errReplayed
			}
			if h.BaseOffset < from {
				return nil
			}
			var b []byte
			if h.IsControl() && h.ProducerID >= 0 {
				if cap(ctl) < h.Size() {
					ctl = make([]byte, h.Size())
				}
				b = ctl[:h.Size()]
				if _, err := v.s.log.ReadAt(b, pos); err != nil {
					return ioErr(err)
				}
			}
			applyBatch(ps, h, b)
			return nil
		})
		if errors.Is(err, errReplayed) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	return ps, exact, nil
}

// segmentEpochs returns the entries of es that cover offsets from base on:
// the one in force at base, with its start moved to base, and those after.
func segmentEpochs(es []epoch.Entry, base int64) []epoch.Entry {
	var out []epoch.Entry
	for i, e := range es {
		if i+1 < len(es) && es[i+1].StartOffset <= base {
			continue
		}
		if e.StartOffset < base {
			e.StartOffset = base
		}
		out = append(out, e)
	}
	return out
}

// ApplyLocalRetention is retention for a log with remote storage
// (Config.RemoteStorage): it deletes the oldest local segments that are
// wholly below the log start, or wholly at or below copiedEnd (the
// highest offset copied to the remote log; -1 for none) and no longer
// required by local.retention.ms or local.retention.bytes. It never
// deletes a segment that is not copied, whatever its age and size, and
// leaves the log start where it is (remote retention moves it). It
// returns how many segments went; like ApplyRetention it also closes the
// files of segments deleted more than file.delete.delay.ms ago.
//
// With Config.RemoteCopyDisable (KIP-950), nothing more is copied: the
// segments go by retention.ms and retention.bytes instead, copied or not,
// and copiedEnd is then the highest offset that may go (the caller passes
// the high watermark minus one), as Kafka's UnifiedLog.deleteOldSegments
// does when remoteLogEnabledAndRemoteCopyEnabled() is false
// (localRetentionMs / localRetentionSize fall back to retention.*, and
// isSegmentEligibleForDeletion no longer asks for a copy). The log start
// still stays (Kafka raises only the local log start).
func (l *Log) ApplyLocalRetention(now time.Time, copiedEnd int64) (int, error) {
	l.checkWriter("ApplyLocalRetention")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if !l.cfg.RemoteStorage {
		return 0, errors.New("storage: ApplyLocalRetention without remote storage")
	}
	l.observe(now)
	nowMs := now.UnixMilli()
	cfg := l.cfg
	retMs, retBytes := cfg.LocalRetentionMs, cfg.LocalRetentionBytes
	if cfg.RemoteCopyDisable {
		retMs, retBytes = cfg.RetentionMs, cfg.RetentionBytes
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for i, s := range l.segs[:len(l.segs)-1] {
		del := l.segs[i+1].base <= l.logStart
		// The newest sealed segment stays, with its aborted index on disk
		// (logs written before rolls snapshotted at the new base hold
		// their usable producer snapshot inside it: readProducers).
		if !del && s.next-1 <= copiedEnd && i+1 < len(l.segs)-1 {
			del = retMs >= 0 && nowMs-s.largestTimestamp() > retMs
			del = del || (retBytes >= 0 && total-s.size >= retBytes)
		}
		if !del {
			break
		}
		total -= s.size
		n++
	}
	if n > 0 {
		if err := l.deleteLocal(n); err != nil {
			return 0, err
		}
	}
	l.processDeletes(nowMs)
	return n, nil
}

// deleteLocal deletes the first n segments (never the active one) and
// keeps the log start (appendMu held).
func (l *Log) deleteLocal(n int) error {
	if n >= len(l.segs) {
		return fmt.Errorf("storage: deleting %d local segments of %d", n, len(l.segs))
	}
	// The log start file is written first, so a reopen that finds the
	// first local segment above it keeps it (recovery).
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartName), encodeOffsetFile(l.logStart), true); err != nil {
		return l.fail(err)
	}
	dead := l.segs[:n]
	l.mu.Lock()
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.mu.Unlock()
	l.scheduleDelete(dead)
	for _, off := range l.snapshotOffsets() {
		if off < l.segs[0].base {
			l.fs.Remove(fileName(l.dir, off, snapshotSuffix))
		}
	}
	return nil
}
