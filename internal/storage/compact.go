package storage

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
)

// Log compaction (cleanup.policy=compact), as Kafka's LogCleaner does it;
// docs/compaction.md describes the rules, the on-disk states of a swap and
// what readers see.
//
// A pass builds an OffsetMap of the dirty section [firstDirty, end) (key →
// latest offset), then rewrites every segment from the log start up to the
// end of what the map covers, in groups of consecutive segments that fit
// one segment.bytes, keeping a record unless a later record has its key, it
// has no key, or it is a tombstone whose delete horizon has passed. Offsets
// never change. Each group's output is written to new files and swapped in
// (swapIn), so a crash at any point leaves either the old segments or the
// new one.

// CleanStats describes one cleaning pass.
type CleanStats struct {
	// FirstDirty and End bound the dirty section the map covered; the
	// cleaner checkpoint is now End.
	FirstDirty, End int64
	// Segments is the number of segments rewritten, Groups the number of
	// segments they became.
	Segments, Groups int
	// BytesRead and BytesWritten count segment bytes, both passes.
	BytesRead, BytesWritten int64
	// RecordsRead and RecordsRemoved count records of the rewritten
	// segments.
	RecordsRead, RecordsRemoved int64
	// MapKeys is the number of keys the offset map held.
	MapKeys int
}

// CleanableInfo describes a compacted log's sections (Kafka's LogToClean).
type CleanableInfo struct {
	// FirstDirty is the cleaner checkpoint: everything below it has been
	// cleaned at least once. End is the first uncleanable offset: the
	// active segment's base, or the base of the segment holding the high
	// watermark or a record newer than min.compaction.lag.ms.
	FirstDirty, End int64
	// CleanBytes and DirtyBytes are the sizes of the segments below and
	// from FirstDirty's segment up to End.
	CleanBytes, DirtyBytes int64
	// DirtyRatio is DirtyBytes / (CleanBytes + DirtyBytes).
	DirtyRatio float64
	// Due says the log should be cleaned now: its dirty ratio reached
	// min.cleanable.dirty.ratio, its oldest dirty record passed
	// max.compaction.lag.ms (KIP-354), or a kept tombstone's delete
	// horizon passed.
	Due bool
	// Urgent is true when Due because of max.compaction.lag.ms or a
	// tombstone horizon (the cleaner picks these before others).
	Urgent bool
}

// ErrCleanAborted reports a pass given up because the log changed under
// it (truncation, retention, close); nothing was lost and a later pass
// starts again.
var ErrCleanAborted = errors.New("storage: cleaning aborted by a concurrent change")

// StopCleaning makes a running cleaning pass, and every later one, give up
// with ErrCleanAborted at its next batch, as Close does: the broker calls
// it when it starts closing, so that it need not wait for a whole pass.
func (l *Log) StopCleaning() { l.stopClean.Store(true) }

// SetTombstoneBound sets the offset below which the cleaner may remove a
// tombstone whose delete horizon passed; tombstones at or above it are kept
// until the bound moves past them. A replicated partition sets it to the
// offset every one of its replicas has copied (docs/compaction.md,
// "Tombstones and lagging replicas"): a replica that still holds an older
// value of the key then always receives the tombstone that deletes it. A
// log opens with no bound (math.MaxInt64).
func (l *Log) SetTombstoneBound(offset int64) { l.tombstoneBound.Store(offset) }

// Cleanable computes the log's dirty section. hw bounds it: nothing at or
// above the high watermark is cleaned (Kafka cleans below the last stable
// offset, which is at most the high watermark).
func (l *Log) Cleanable(now time.Time, hw int64) CleanableInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cleanableLocked(now.UnixMilli(), hw)
}

func (l *Log) cleanableLocked(nowMs, hw int64) CleanableInfo {
	var ci CleanableInfo
	cfg := l.cfg
	if !cfg.Compact || l.closed || l.failed != nil {
		return ci
	}
	// end: a segment base, at most the active segment's and the one
	// holding the HW.
	endIdx := len(l.segs) - 1
	// Only what is flushed is cleaned: a crash never loses a cleaned
	// segment's neighbours' data from under it.
	hw = min(hw, l.flushed.Load())
	if hw < l.active().base {
		endIdx = l.segmentFor(hw)
	}
	first := min(max(l.cleanedTo, l.logStart), l.segs[endIdx].base)
	firstIdx := l.segmentFor(first)
	if cfg.MinCompactionLagMs > 0 {
		for i := firstIdx; i < endIdx; i++ {
			if s := l.segs[i]; s.size > 0 && s.largestTimestamp() > nowMs-cfg.MinCompactionLagMs {
				endIdx = i
				break
			}
		}
	}
	ci.End = l.segs[endIdx].base
	ci.FirstDirty = min(first, ci.End)
	for i, s := range l.segs[:endIdx] {
		if i < firstIdx {
			ci.CleanBytes += s.size
		} else {
			ci.DirtyBytes += s.size
		}
	}
	if total := ci.CleanBytes + ci.DirtyBytes; total > 0 {
		ci.DirtyRatio = float64(ci.DirtyBytes) / float64(total)
	}
	if ci.DirtyBytes > 0 && ci.DirtyRatio >= cfg.MinCleanableDirtyRatio {
		ci.Due = true
	}
	if ci.DirtyBytes > 0 && cfg.MaxCompactionLagMs < math.MaxInt64 && firstIdx < endIdx {
		// The first dirty segment's oldest batch is at least as old as its
		// first batch's max timestamp (Kafka uses the first batch's
		// timestamp, LogCleanerManager.maxCompactionDelay).
		if ts := l.segs[firstIdx].firstTs; ts >= 0 && nowMs-ts > cfg.MaxCompactionLagMs {
			ci.Due, ci.Urgent = true, true
		}
	}
	// A kept tombstone's horizon passed, or the tombstone bound moved past
	// one that was kept for want of it.
	if ci.End > l.logStart && (l.tombstoneHorizon > 0 && nowMs >= l.tombstoneHorizon ||
		l.tombstoneBlocked >= 0 && l.tombstoneBound.Load() > l.tombstoneBlocked) {
		ci.Due, ci.Urgent = true, true
	}
	return ci
}

// Clean runs one cleaning pass (see the comment at the top of this file)
// with m as its offset map. hw bounds the cleanable section (Cleanable);
// throttle, if not nil, is called with each chunk of bytes read or written
// and may sleep (log.cleaner.io.max.bytes.per.second). A pass over a log
// without the compact policy, or with nothing cleanable, does nothing.
// ErrCleanAborted means the log changed meanwhile; an I/O error on the new
// files takes the log offline like any write error.
func (l *Log) Clean(now time.Time, hw int64, m *OffsetMap, throttle func(n int64)) (CleanStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	var st CleanStats
	nowMs := now.UnixMilli()
	l.mu.RLock()
	ci := l.cleanableLocked(nowMs, hw)
	cfg, gen := l.cfg, l.truncGen
	bound := l.tombstoneBound.Load()
	segs := sealedViews(l.segs)
	epochStarts := map[int64]bool{}
	for _, e := range l.epochs.Entries() {
		epochStarts[e.StartOffset] = true
	}
	l.mu.RUnlock()
	if !cfg.Compact || ci.End <= 0 {
		return st, nil
	}
	if err := l.usable(); err != nil {
		return st, err
	}
	if throttle == nil {
		throttle = func(int64) {}
	}
	st.FirstDirty = ci.FirstDirty

	// Records of aborted transactions are never read by read_committed
	// consumers: they neither enter the offset map (a later aborted
	// record must not shadow a committed one) nor survive the pass
	// (Kafka's Cleaner with CleanedTransactionMetadata). Everything below
	// the cleanable end, which the last stable offset bounds, is decided.
	aborted := newAbortedSet(l.AbortedTxns(l.LogStartOffset(), ci.End))

	// 1. The offset map of the dirty section, up to where it fills.
	m.Reset(int(ci.DirtyBytes / 32))
	mapEnd := ci.End
	full := false
	for _, s := range segs {
		if s.base >= ci.End {
			break
		}
		if s.end <= ci.FirstDirty {
			continue
		}
		err := l.readSegment(s, throttle, &st.BytesRead, func(h *batch.Header, b []byte) error {
			if h.IsControl() || h.NextOffset() <= ci.FirstDirty || aborted.has(h) {
				return nil
			}
			err := batch.Records(b, func(r batch.Record) bool {
				off := h.BaseOffset + int64(r.OffsetDelta)
				if off < ci.FirstDirty || r.Key == nil {
					return true
				}
				if !m.Put(r.Key, off) {
					full = true
					mapEnd = off // the pass covers the dirty keys below off
					return false
				}
				return true
			})
			if err == nil && full {
				return errStop
			}
			return err
		})
		if err != nil {
			return st, l.cleanFailed(err)
		}
		if full {
			break
		}
	}
	if full && mapEnd <= ci.FirstDirty {
		return st, fmt.Errorf("storage: cleaner offset map of %d keys cannot hold one record of %s", m.Capacity(), l.dir)
	}
	st.End, st.MapKeys = mapEnd, m.Len()

	// 2. Rewrite the segments overlapping [log start, mapEnd), group by
	// group, each swapped in as soon as it is written.
	lastOffsets := l.cleanerProducers().LastOffsetsBelow(mapEnd)
	todo := segs
	for k, s := range segs {
		if s.base >= mapEnd {
			todo = segs[:k]
			break
		}
	}
	horizon, blocked := int64(0), int64(-1)
	txnKept := map[int64]bool{}
	for len(todo) > 0 {
		n := groupSize(todo, &cfg)
		group := todo[:n]
		todo = todo[n:]
		out, h, err := l.cleanGroup(group, cleanRules{nowMs: nowMs, mapEnd: mapEnd, m: m, lastOffsets: lastOffsets, epochStarts: epochStarts,
			deleteHorizon: nowMs + cfg.DeleteRetentionMs, tombstoneBound: bound, blocked: &blocked, aborted: aborted, txnKept: txnKept}, throttle, &st)
		if err != nil {
			return st, err
		}
		if h > 0 && (horizon == 0 || h < horizon) {
			horizon = h
		}
		// The swap is the log writer's: it checks that the group is
		// still there, unchanged, and puts out in its place.
		l.asWriter(func() { err = l.swapIn(group, out, gen) })
		if err != nil {
			out.close()
			l.removeCleaned(out.base)
			return st, err
		}
		st.Segments += len(group)
		st.Groups++
	}

	// 3. The checkpoint: everything below mapEnd is now clean.
	var err error
	l.asWriter(func() { err = l.setCleaned(mapEnd, horizon, blocked, gen) })
	return st, err
}

// setCleaned records a pass's checkpoint as the log's writer: offsets
// below firstDirty are clean, with the tombstone horizon and blocked
// tombstone it found. A truncation since the pass began (gen) voids it:
// the log below firstDirty is no longer what the pass cleaned.
func (l *Log) setCleaned(firstDirty, horizon, blocked int64, gen uint64) error {
	l.checkWriter("setCleaned")
	l.mu.Lock()
	if l.truncGen != gen || l.closed {
		l.mu.Unlock()
		return ErrCleanAborted
	}
	l.cleanedTo = firstDirty
	l.tombstoneHorizon = horizon
	l.tombstoneBlocked = blocked
	l.mu.Unlock()
	l.writeCleanerCheckpoint(firstDirty, horizon, blocked)
	return nil
}

// sealedSeg is what a pass knows of a sealed segment, read under Log.mu
// when the pass begins (a truncation may change the segment later; the
// swap then gives up, see swapIn).
type sealedSeg struct {
	*segment
	size, end  int64 // bytes; the offset after its range (the next segment's base)
	nOff, nTim int   // index entries
}

// sealedViews snapshots every segment but the active one (mu held).
func sealedViews(segs []*segment) []sealedSeg {
	out := make([]sealedSeg, 0, len(segs)-1)
	for i, s := range segs[:len(segs)-1] {
		out = append(out, sealedSeg{segment: s, size: s.size, end: segs[i+1].base, nOff: len(s.offsets), nTim: len(s.times)})
	}
	return out
}

// groupSize returns how many of todo's leading segments are rewritten into
// one: as many consecutive segments as fit one segment.bytes and one
// index, with every offset within 2^32 of the first (Kafka's
// Cleaner.groupSegmentsBySize).
func groupSize(todo []sealedSeg, cfg *Config) int {
	size, idx, tidx := todo[0].size, todo[0].nOff, todo[0].nTim
	n := 1
	for ; n < len(todo); n++ {
		s := todo[n]
		if size+s.size > cfg.SegmentBytes || idx+s.nOff >= cfg.maxIndexEntries() ||
			tidx+s.nTim >= cfg.maxTimeEntries() || s.end-todo[0].base > math.MaxUint32 {
			break
		}
		size += s.size
		idx += s.nOff
		tidx += s.nTim
	}
	return n
}

// cleanRules decide which records a pass keeps.
type cleanRules struct {
	nowMs       int64
	mapEnd      int64 // records at or above it are kept: the map does not cover them
	m           *OffsetMap
	lastOffsets map[int64]int64 // producer id → last offset of its newest batch
	// epochStarts holds the start offset of every leader epoch in the
	// log's cache: the batch there stays, emptied if need be, so that a
	// replica copying the log (or recovering it without a checkpoint)
	// learns every epoch, which its divergence check needs.
	epochStarts   map[int64]bool
	deleteHorizon int64 // the horizon a first-cleaned tombstone gets
	// tombstoneBound: a tombstone past its horizon is removed only below
	// it (SetTombstoneBound); blocked records the lowest one kept for
	// want of it (-1 if none).
	tombstoneBound int64
	blocked        *int64
	// aborted holds the aborted transactions below the cleanable end:
	// their records are removed.
	aborted abortedSet
	// txnKept holds the producers whose transaction being read had a batch
	// written by this pass (across its groups, in offset order): their
	// marker stays (markerRemovable).
	txnKept map[int64]bool
}

// markerRemovable reports whether the transaction marker with header h,
// read in offset order, may go (Kafka's Cleaner with
// CleanedTransactionMetadata): no batch of its transaction is left in the
// log (else recovery would replay that batch and reopen the transaction
// for good), it lies below the tombstone bound (every replica has it, so
// none keeps the transaction open), and it is not the group's last batch
// (end is the group's end). It forgets the producer's transaction.
func (r *cleanRules) markerRemovable(h *batch.Header, end int64) bool {
	if h.ProducerID < 0 {
		return false
	}
	kept := r.txnKept[h.ProducerID]
	delete(r.txnKept, h.ProducerID)
	return !kept && h.LastOffset() < r.tombstoneBound && h.NextOffset() != end
}

// abortedSet finds the batches of aborted transactions.
type abortedSet map[int64][]AbortedTxn // producer id → its aborted transactions

func newAbortedSet(txns []AbortedTxn) abortedSet {
	s := abortedSet{}
	for _, t := range txns {
		s[t.ProducerID] = append(s[t.ProducerID], t)
	}
	return s
}

// has reports whether h is a transactional data batch of an aborted
// transaction: its producer's, begun at or before it and ended after it.
func (s abortedSet) has(h *batch.Header) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	for _, t := range s[h.ProducerID] {
		if t.FirstOffset <= h.BaseOffset && h.BaseOffset < t.LastOffset {
			return true
		}
	}
	return false
}

// cleanGroup writes the kept batches of group into a new segment (files
// named <base>.log.cleaned, ...) and syncs it. It returns the segment and
// the earliest delete horizon of the tombstones it kept (0 if none).
func (l *Log) cleanGroup(group []sealedSeg, r cleanRules, throttle func(int64), st *CleanStats) (*segment, int64, error) {
	base := group[0].base
	out, err := openCleaned(l.fs, l.dir, base)
	if err != nil {
		return nil, 0, l.cleanFailed(err)
	}
	out.createdMs = group[0].createdMs
	out.next = group[len(group)-1].end
	// The aborted transactions of the group stay known: the cleaner keeps
	// their records and markers (docs/transactions.md).
	l.mu.RLock()
	for _, s := range group {
		out.aborted = append(out.aborted, s.aborted...)
	}
	l.mu.RUnlock()
	w := &bufWriter{f: out.log}
	horizon := int64(0)
	for _, s := range group {
		err := l.readSegment(s, throttle, &st.BytesRead, func(h *batch.Header, b []byte) error {
			bh, hasHorizon := h.DeleteHorizon()
			expired := hasHorizon && r.nowMs >= bh // its tombstones may go
			tombstoneKept := false                 // one with a horizon still ahead
			if h.IsControl() && !r.epochStarts[h.BaseOffset] && r.markerRemovable(h, out.next) {
				// A marker whose transaction is gone: it gets a delete
				// horizon the first time, and goes once that passed.
				if expired {
					st.RecordsRead++
					st.RecordsRemoved++
					return nil
				}
				if !hasHorizon {
					b = batch.WithDeleteHorizon(b, r.deleteHorizon)
				}
				tombstoneKept = true // the log is due again at its horizon
			}
			abortedBatch := r.aborted.has(h)
			keep := func(off int64, rec *batch.Record) bool {
				st.RecordsRead++
				if abortedBatch {
					st.RecordsRemoved++
					return false
				}
				ok := off >= r.mapEnd
				if !ok && rec.Key != nil {
					ok = r.m.Get(rec.Key) <= off
					if ok && rec.Value == nil && expired {
						ok = off >= r.tombstoneBound
						if ok && (*r.blocked < 0 || off < *r.blocked) {
							*r.blocked = off
						}
					}
				}
				if ok && rec.Value == nil && !expired {
					tombstoneKept = true
				}
				if !ok {
					st.RecordsRemoved++
				}
				return ok
			}
			// Kept even when emptied: the last batch of each producer (its
			// idempotence state is rebuilt from it), the first batch of
			// each leader epoch (a condition Kafka's cleaner does not
			// have: without it a replica copying the cleaned log misses
			// the epoch, and a divergent follower is not truncated), and
			// the group's last batch, so that the segment's batches reach
			// its end.
			keepEmpty := h.ProducerID >= 0 && r.lastOffsets[h.ProducerID] == h.LastOffset() || r.epochStarts[h.BaseOffset] || h.NextOffset() == out.next
			nb, _, err := batch.Filter(b, keep, batch.FilterOptions{KeepEmpty: keepEmpty, DeleteHorizon: r.deleteHorizon})
			if err != nil {
				return fmt.Errorf("storage: cleaning %s at offset %d: %w", s.logName(), h.BaseOffset, err)
			}
			if nb == nil {
				return nil
			}
			if h.IsTransactional() && !h.IsControl() {
				r.txnKept[h.ProducerID] = true // its marker stays
			}
			nh, err := batch.ParseHeader(nb)
			if err != nil {
				return err
			}
			if hz, ok := nh.DeleteHorizon(); ok && tombstoneKept && (horizon == 0 || hz < horizon) {
				horizon = hz
			}
			pos := out.size
			out.track(&nh, pos, l.cfg.IndexIntervalBytes)
			out.size += int64(len(nb))
			if err := w.write(nb); err != nil {
				return err
			}
			st.BytesWritten += int64(len(nb))
			throttle(int64(len(nb)))
			return nil
		})
		if err != nil {
			out.close()
			l.removeCleaned(base)
			return nil, 0, l.cleanFailed(err)
		}
	}
	out.maybeTimeEntry()
	err = w.flush()
	if err == nil {
		err = out.writeIndexes()
	}
	if err == nil {
		err = out.writeTxnIndex(cleanedSuffix)
	}
	for _, f := range append(out.openIndexFiles(), out.log) {
		if err == nil {
			err = f.Sync()
		}
	}
	if err != nil {
		out.close()
		l.removeCleaned(base)
		return nil, 0, l.cleanFailed(err)
	}
	out.syncedSize, out.indexesSynced = out.size, true
	return out, horizon, nil
}

// cleanFailed sorts a cleaning error: a pass stopped by Close, or corrupt
// data the cleaner refuses to rewrite (Kafka marks such a partition
// uncleanable), is returned as it is; any other error is an I/O failure
// and takes the log offline like a failed append.
func (l *Log) cleanFailed(err error) error {
	if l.stopClean.Load() {
		return ErrCleanAborted
	}
	if errors.Is(err, ErrCleanAborted) || errors.Is(err, batch.ErrCorrupt) || errors.Is(err, errCorruptSegment) {
		return err
	}
	return l.fail(err)
}

// errCorruptSegment reports a sealed segment whose batches do not reach
// its end: the cleaner refuses to rewrite it rather than lose its tail.
var errCorruptSegment = errors.New("storage: corrupt segment")

// readSegment calls fn for every whole, CRC-checked batch of sealed segment
// s, counting the bytes read, until fn returns errStop. A segment that does
// not parse to its end is errCorruptSegment.
func (l *Log) readSegment(s sealedSeg, throttle func(int64), read *int64, fn func(h *batch.Header, b []byte) error) error {
	size := s.size
	stopped := false
	end, err := walk(s.log, 0, size, s.base, true, 1<<20, func(h *batch.Header, _ int64, b []byte) error {
		if l.stopClean.Load() {
			return ErrCleanAborted
		}
		*read += int64(len(b))
		throttle(int64(len(b)))
		err := fn(h, b)
		stopped = err == errStop
		return err
	})
	if err != nil {
		return err
	}
	if end != size && !stopped {
		return fmt.Errorf("%w: %s does not parse past byte %d of %d", errCorruptSegment, s.logName(), end, size)
	}
	return nil
}

// bufWriter batches small writes to a file.
type bufWriter struct {
	f   interface{ Write([]byte) (int, error) }
	buf []byte
}

func (w *bufWriter) write(b []byte) error {
	if len(w.buf)+len(b) > 1<<20 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(b) >= 1<<20 {
		_, err := w.f.Write(b)
		return err
	}
	w.buf = append(w.buf, b...)
	return nil
}

func (w *bufWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}
