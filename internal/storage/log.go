// Package storage is the durable, segmented log of one partition, laid out
// as Kafka lays it out: a directory of .log segments with sparse .index and
// .timeindex files, a leader-epoch-checkpoint and producer-state snapshots.
// Batches are stored byte-for-byte as received (v2 record batches); only the
// base offset and partition leader epoch are rewritten.
//
// Appends never fsync. Durability is asked for explicitly with Sync or
// SyncTo, which share fsyncs among concurrent callers (group commit). All
// file access goes through vfs.FS, so tests crash the log on vfs.Mem.
// docs/storage.md describes the formats, recovery and durability contract.
//
// Concurrency: a Log is safe for concurrent use. Appends, truncation,
// retention and configuration changes are serialized (appendMu); reads run
// concurrently with them and see only whole batches that were fully written.
// The broker makes each log's partition owner its one writer (Writer,
// writer.go): a flush round's result (ApplyFlush) and a cleaning pass's
// swaps are applied by it. Lock order: cleanMu, then the writer (Writer.Run),
// then appendMu, then mu; flushMu is never held with mu while doing I/O. A
// cleaning pass (Clean) reads sealed segments without locks and hands each
// swap to the writer.
package storage

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Errors returned by Log methods.
var (
	// ErrOffsetOutOfRange: the offset is below the log start or above the
	// log end (Kafka's OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrOffsetTiered: the offset is at or above the log start but below
	// the local log start (LocalLogStartOffset): with tiered storage
	// (KIP-405) it is read from the remote log.
	ErrOffsetTiered = errors.New("storage: offset below the local log start")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("storage: log closed")
	// ErrBatchTooLarge: a batch larger than segment.bytes
	// (Kafka's RECORD_BATCH_TOO_LARGE).
	ErrBatchTooLarge = errors.New("storage: batch larger than segment.bytes")
	// ErrUnexpectedOffset: a follower append that starts below the log end,
	// or whose batches go backwards.
	ErrUnexpectedOffset = errors.New("storage: batch offset does not continue the log")
	// ErrTruncated: SyncTo's offset was truncated away before it became
	// durable.
	ErrTruncated = errors.New("storage: offset truncated before it was flushed")
	// ErrFailed wraps the I/O error that took the log offline. After a
	// failed write or fsync nothing more is appended or acknowledged
	// (an fsync error may have dropped dirty pages); reopen the log to
	// recover from what is on disk.
	ErrFailed = errors.New("storage: log failed")
)

// AppendInfo describes an appended (or duplicate) batch.
type AppendInfo struct {
	FirstOffset  int64
	LastOffset   int64
	MaxTimestamp int64
	// Duplicate is set when an idempotent producer retried a batch that is
	// already in the log: the offsets are the original ones and nothing was
	// written.
	Duplicate bool
}

// Log is one partition's log.
type Log struct {
	fs  vfs.FS
	dir string

	appendMu sync.Mutex
	// producers is the log's own producer state, kept in step with every
	// append, before and after HandOver, as Kafka's UnifiedLog updates
	// its ProducerStateManager on append: what a roll snapshots (appendMu).
	producers *producer.State
	// owner returns a copy of the owner's producer state once the log was
	// handed over (HandOver; owner.go), nil before.
	owner     func() *producer.State
	lastNowMs int64           // (appendMu) latest time passed in
	deletes   []pendingDelete // (appendMu)
	rpBase    int64           // segment base last written to the recovery point (by the round that publishes itself, ApplyFlush, or syncAll: the writer)

	// markerPending is set when Open removed the clean-shutdown marker
	// without syncing the directory: the first change syncs it (writable,
	// under appendMu, which every change holds), so a restart of
	// thousands of partitions costs no fsync per partition until each is
	// written, and no change can reach the disk while the marker still
	// says the files are whole.
	markerPending bool // (appendMu)

	mu            sync.RWMutex
	cfg           Config
	segs          []*segment // copy-on-write: never modified in place
	leo           int64
	logStart      int64
	epochs        *epoch.Cache
	closed        bool
	failed        error
	truncGen      uint64
	dirDirty      bool
	unsyncedSnaps []vfs.File // snapshot files written at roll, not yet synced

	cleanedTo        int64        // (mu) cleaner checkpoint: offsets below are cleaned
	tombstoneHorizon int64        // (mu) earliest delete horizon of a kept tombstone, 0 if none
	tombstoneBlocked int64        // (mu) lowest tombstone kept past its horizon for want of tombstoneBound, -1 if none
	tombstoneBound   atomic.Int64 // tombstones at or above it are never removed (SetTombstoneBound)
	cleanMu          sync.Mutex   // one cleaning pass at a time; taken before appendMu
	stopClean        atomic.Bool  // set on close: a running pass gives up

	writer writerState // the one writer (writer.go)

	flushMu        sync.Mutex
	flushCond      *sync.Cond
	flushing       bool
	started        uint64 // fsync rounds started
	completed      uint64 // fsync rounds finished
	inflightTarget int64  // offset the running round will make durable, -1 unknown
	flushed        atomic.Int64
}

type pendingDelete struct {
	seg        *segment
	deadlineMs int64
}

// active returns the last segment (appendMu or mu held).
func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// writable reports why the log cannot be written. Every path that changes
// the log's files calls it first (appendMu held), so it also makes the
// removal of the clean-shutdown marker durable before the first change
// (markerPending).
func (l *Log) writable() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.markerPending {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(err)
		}
		l.markerPending = false
	}
	return nil
}

// usable reports why the log cannot be written, changing nothing: for
// the cleaner's pass, whose .cleaned files every recovery removes
// (finishSwap) and whose swap checks writable as the log's writer.
func (l *Log) usable() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// fail takes the log offline after an I/O error and returns the error to
// report.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return l.failed
}

// AppendAssigning appends one client batch b (already validated by the
// caller: CRC and records), assigning it the next offsets and stamping
// leaderEpoch, with the log's own sequence check: a log written without a
// replica machine (tests, benchmarks, tools). The broker appends with
// Append, its machine having assigned offsets and epochs. b is modified in place (base offset and leader epoch). For an
// idempotent producer the sequence is checked first: a retried batch returns
// the original offsets with Duplicate set; an invalid one returns an error
// wrapping producer.ErrOutOfOrderSequence or ErrInvalidProducerEpoch.
// The batch is not durable until Sync/SyncTo.
func (l *Log) AppendAssigning(b []byte, leaderEpoch int32, now time.Time) (AppendInfo, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return AppendInfo{}, err
	}
	if h.Size() != len(b) {
		return AppendInfo{}, batch.ErrCorrupt
	}
	l.checkWriter("AppendAssigning")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return AppendInfo{}, err
	}
	if l.owned() {
		return AppendInfo{}, errOwned // its owner checks sequences
	}
	l.observe(now)
	if int64(len(b)) > l.cfg.SegmentBytes {
		return AppendInfo{}, ErrBatchTooLarge
	}
	if h.ProducerID >= 0 && !h.IsControl() {
		dup, err := l.producers.Check(h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.LastSequence())
		if err != nil {
			return AppendInfo{}, fmt.Errorf("storage: producer %d epoch %d seq %d: %w", h.ProducerID, h.ProducerEpoch, h.BaseSequence, err)
		}
		if dup != nil {
			return AppendInfo{FirstOffset: dup.FirstOffset, LastOffset: dup.LastOffset, MaxTimestamp: dup.MaxTime, Duplicate: true}, nil
		}
	}
	if l.leo > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
		return AppendInfo{}, ErrOffsetOutOfRange
	}
	h.BaseOffset, h.LeaderEpoch = l.leo, leaderEpoch
	batch.SetBaseOffset(b, h.BaseOffset)
	batch.SetLeaderEpoch(b, leaderEpoch)
	if err := l.appendBatch(b, &h); err != nil {
		return AppendInfo{}, err
	}
	return AppendInfo{FirstOffset: h.BaseOffset, LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp}, nil
}

// Append appends one or more batches whose offsets and epochs are already
// set (by the replica machine, for a leader's own appends and a follower's
// fetched batches alike): each must start at or after the end of
// the one before (the first at or after the log end). A compacted leader
// log has gaps, which the follower's log keeps (Kafka's follower append
// only refuses offsets below the log end). Time-based rolling uses the
// batches' timestamps, or the latest time passed to another method.
//
// Before HandOver the log updates its own epoch cache and producer state
// (without sequence checks) and indexes the transactions its markers
// abort. After it, the owner has done both: aborted holds the index
// entries of the ABORT markers among b, each kept with the segment that
// receives its marker (LastOffset).
func (l *Log) Append(b []byte, aborted ...AbortedTxn) error {
	l.checkWriter("Append")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if len(aborted) > 0 && !l.owned() {
		return errNotOwned
	}
	next := l.leo
	// Validate the framing of the whole input before writing any of it.
	for p := b; len(p) > 0; {
		h, one, rest, err := batch.Next(p)
		if err != nil {
			return err
		}
		if h.BaseOffset < next {
			return fmt.Errorf("%w: batch at %d, expected at least %d", ErrUnexpectedOffset, h.BaseOffset, next)
		}
		if int64(len(one)) > l.cfg.SegmentBytes {
			return ErrBatchTooLarge
		}
		if next > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
			return ErrOffsetOutOfRange
		}
		next = h.NextOffset()
		p = rest
	}
	for len(b) > 0 {
		h, one, rest, _ := batch.Next(b)
		if err := l.appendBatch(one, &h); err != nil {
			return err
		}
		for len(aborted) > 0 && aborted[0].LastOffset <= h.LastOffset() {
			l.mu.Lock()
			seg := l.active()
			seg.aborted = append(seg.aborted, aborted[0])
			l.mu.Unlock()
			aborted = aborted[1:]
		}
		b = rest
	}
	return nil
}

// observe records now as the latest time seen (appendMu held).
func (l *Log) observe(now time.Time) {
	if ms := now.UnixMilli(); ms > l.lastNowMs {
		l.lastNowMs = ms
	}
}

// appendBatch writes one batch whose header h already carries its final
// base offset and epoch, rolling first if needed, then publishes it to
// readers and updates indexes, the producer state and, unless the log was
// handed over, the epoch cache and aborted index (appendMu held).
func (l *Log) appendBatch(b []byte, h *batch.Header) error {
	seg := l.active()
	if l.shouldRoll(seg, h, len(b)) {
		var err error
		if seg, err = l.roll(); err != nil {
			return err
		}
	}
	pos := seg.size
	if _, err := seg.log.Write(b); err != nil {
		// Best effort to drop a partial write; the log is offline either
		// way and recovery truncates torn bytes.
		seg.log.Truncate(pos)
		return l.fail(err)
	}
	l.mu.Lock()
	// The active segment's index entries live in memory; its index files
	// are written whole when it is sealed (roll) or the log is closed
	// cleanly. A crash always rescans the active segment, so nothing is
	// lost, and appends to thousands of partitions make no index writes.
	seg.track(h, pos, l.cfg.IndexIntervalBytes)
	seg.size += int64(len(b))
	seg.next = h.NextOffset()
	l.leo = seg.next
	if l.owned() {
		l.mu.Unlock()
		// The owner hands in the aborted-index entries (Append).
		applyProducer(l.producers, h, b)
		return nil
	}
	epochChanged := l.epochs.Assign(h.LeaderEpoch, h.BaseOffset)
	l.mu.Unlock()
	if epochChanged {
		if err := l.persistEpochs(); err != nil {
			return err
		}
	}
	if a, ok := applyProducer(l.producers, h, b); ok {
		l.mu.Lock()
		seg.aborted = append(seg.aborted, a)
		l.mu.Unlock()
	}
	return nil
}

// shouldRoll applies Kafka's roll conditions before appending h: the
// segment is full, an index is full, the relative offset would overflow, or
// the segment is older than segment.ms. An empty segment is never rolled.
func (l *Log) shouldRoll(seg *segment, h *batch.Header, size int) bool {
	if seg.size == 0 {
		return false
	}
	if seg.size+int64(size) > l.cfg.SegmentBytes || seg.indexFull(&l.cfg) {
		return true
	}
	if h.LastOffset()-seg.base > math.MaxUint32 {
		return true
	}
	if seg.firstTs >= 0 && h.MaxTimestamp >= 0 {
		return h.MaxTimestamp-seg.firstTs > l.cfg.SegmentMs
	}
	return l.lastNowMs-seg.createdMs > l.cfg.SegmentMs
}

// roll seals the active segment and starts a new one at the log end, taking
// a producer-state snapshot named after it: the state after every batch
// below the new segment's base, as Kafka's UnifiedLog.roll has
// producerStateManager.takeSnapshot() at the new base offset. Retention
// deletes snapshots below the first segment's base only, so the first
// segment always keeps its own (appendMu held). Nothing is fsynced here:
// the next Sync covers the new names and the snapshot.
func (l *Log) roll() (*segment, error) {
	old := l.active()
	l.mu.Lock()
	old.maybeTimeEntry()
	l.mu.Unlock()
	if err := old.writeIndexes(); err != nil {
		return nil, l.fail(err)
	}
	if err := old.writeTxnIndex(""); err != nil {
		return nil, l.fail(err)
	}
	seg, err := openSegmentFiles(l.fs, l.dir, l.leo, true)
	if err != nil {
		return nil, l.fail(err)
	}
	seg.createdMs = l.lastNowMs
	if err := l.writeSnapshot(l.leo, l.producers.Encode()); err != nil {
		seg.close()
		return nil, err
	}
	l.mu.Lock()
	l.segs = append(l.segs[:len(l.segs):len(l.segs)], seg)
	l.dirDirty = true
	l.mu.Unlock()
	l.removeOldSnapshots()
	l.processDeletes(l.lastNowMs)
	return seg, nil
}

// persistEpochs writes the leader-epoch checkpoint durably (Kafka flushes it
// synchronously on assign).
func (l *Log) persistEpochs() error {
	l.mu.RLock()
	data := l.epochs.Encode()
	l.mu.RUnlock()
	if err := vfs.WriteFileAtomic(l.fs, l.dir+"/"+epochCheckpointName, data, true); err != nil {
		return l.fail(err)
	}
	return nil
}

// Generation counts the truncations of the log's end: an offset that
// was flushed in one generation may hold other data in a later one.
func (l *Log) Generation() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.truncGen
}

// FlushedOffset is the highest offset+1 known to be durable.
func (l *Log) FlushedOffset() int64 { return l.flushed.Load() }

// LogEndOffset is the offset the next batch will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo
}

// LogStartOffset is the first offset readers may ask for.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// LocalLogStartOffset is the first offset held on the local disk (Kafka's
// UnifiedLog.localLogStartOffset): the log start, or the first segment's
// base when that is higher (tiered storage deleted older segments locally
// after they were copied to the remote log).
func (l *Log) LocalLogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return max(l.logStart, l.segs[0].base)
}

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments is the number of segments (for tests and metrics).
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LatestEpoch is the newest leader epoch in the cache, or -1.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.LatestEpoch()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for e (see
// epoch.Cache.EndOffsetFor), with the log end as the latest epoch's end.
func (l *Log) EndOffsetForEpoch(e int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EndOffsetFor(e, l.leo)
}

// EpochEntries returns a copy of the leader-epoch cache.
func (l *Log) EpochEntries() []epoch.Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries()
}

// AssignEpoch records that epoch e starts at start (a new leader assigns
// (epoch, LEO) before appending), persisting the checkpoint if it changed.
func (l *Log) AssignEpoch(e int32, start int64) error {
	l.checkWriter("AssignEpoch")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	l.mu.Lock()
	if start > l.leo || start < 0 {
		l.mu.Unlock()
		return ErrOffsetOutOfRange
	}
	changed := l.epochs.Assign(e, start)
	l.mu.Unlock()
	if changed {
		return l.persistEpochs()
	}
	return nil
}

// ProducerEntry returns a copy of the state of producer pid as the disk
// holds it (ProducerState), or nil.
func (l *Log) ProducerEntry(pid int64) *producer.Entry {
	ps, err := l.ProducerState()
	if err != nil {
		return nil
	}
	e := ps.Get(pid)
	if e == nil {
		return nil
	}
	c := *e
	c.Batches = append([]producer.Batch(nil), e.Batches...)
	return &c
}

// ProducerState returns a copy of the log's own idempotent-producer state
// at the log end, which is what the owner starts again from after a
// truncation: TruncateTo rebuilt it from the disk (the newest snapshot and
// the batches after it, the aborted index rebuilt with it).
func (l *Log) ProducerState() (*producer.State, error) {
	l.checkWriter("ProducerState")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil && l.owned() {
		return nil, err
	}
	return l.producers.Clone(), nil
}

// OpenTxns returns the ongoing transactions as the disk holds them
// (producer id to the offset of its first batch in the transaction),
// reading only: the index is left as it is.
func (l *Log) OpenTxns() (map[int64]int64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	ps, err := l.diskProducers(false)
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	ps.EachOpenTxn(func(pid, first int64) { out[pid] = first })
	return out, nil
}

// SetConfig replaces the configuration; it applies to later appends and
// retention runs. An invalid config is rejected.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.checkWriter("SetConfig")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
	return nil
}

// Config returns the current configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}
