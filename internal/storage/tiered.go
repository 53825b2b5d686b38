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

	"github.com/sluice-io/sluice/internal/epoch"
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
	// ProducerSnapshot is the producer-state snapshot file at the
	// smallest offset at or after Next the log still holds (snapshots are
	// taken right after a roll, a few batches into the next segment), at
	// SnapshotOffset; empty, with SnapshotOffset -1, if there is none.
	ProducerSnapshot []byte
	SnapshotOffset   int64
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
	c := &SegmentCopy{SegmentInfo: SegmentInfo{Base: s.base, Next: s.next, Size: s.size, MaxTimestamp: s.maxTs}, Log: s.log, LogSize: s.size, SnapshotOffset: -1}
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
	l.mu.RUnlock()
	for _, e := range all {
		if e.StartOffset < c.Next {
			c.LeaderEpochs = append(c.LeaderEpochs, e)
		}
	}
	c.SegmentEpochs = segmentEpochs(c.LeaderEpochs, c.Base)
	snaps := l.snapshotOffsets()
	slices.Sort(snaps)
	for _, off := range snaps {
		if off >= c.Next {
			b, err := vfs.ReadFile(l.fs, fileName(l.dir, off, snapshotSuffix), 1<<30)
			if err == nil {
				c.ProducerSnapshot, c.SnapshotOffset = b, off
			}
			break
		}
	}
	return c, nil
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
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for i, s := range l.segs[:len(l.segs)-1] {
		del := l.segs[i+1].base <= l.logStart
		if !del && s.next-1 <= copiedEnd {
			del = cfg.LocalRetentionMs >= 0 && nowMs-s.largestTimestamp() > cfg.LocalRetentionMs
			del = del || (cfg.LocalRetentionBytes >= 0 && total-s.size >= cfg.LocalRetentionBytes)
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
