package storage

import (
	"path/filepath"

	"github.com/sluice-io/sluice/internal/vfs"
)

// Sync makes everything appended before the call durable. Concurrent callers
// share fsyncs (group commit): a caller arriving while an fsync round runs
// waits for the next round, which covers it, and one round serves every
// caller that arrived during the previous one.
func (l *Log) Sync() error {
	l.flushMu.Lock()
	need := l.started + 1
	return l.waitRound(need, -1)
}

// SyncTo returns once FlushedOffset() >= offset, sharing fsync rounds with
// other callers. offset must not exceed the log end at the time of the call;
// if the log is truncated below offset before it became durable, it returns
// ErrTruncated.
func (l *Log) SyncTo(offset int64) error {
	if l.flushed.Load() >= offset {
		return nil
	}
	l.mu.RLock()
	leo, closed := l.leo, l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if offset > leo {
		return ErrOffsetOutOfRange
	}
	l.flushMu.Lock()
	need := l.started + 1
	if l.flushing && l.inflightTarget >= offset {
		need = l.started // the running round already covers offset
	}
	return l.waitRound(need, offset)
}

// waitRound waits (flushMu held, released on return) until round need has
// completed or, if offset >= 0, until offset is durable, running rounds
// itself when none is running.
func (l *Log) waitRound(need uint64, offset int64) error {
	for l.completed < need && (offset < 0 || l.flushed.Load() < offset) {
		if l.flushing {
			l.flushCond.Wait()
			continue
		}
		l.flushing = true
		l.started++
		round := l.started
		l.inflightTarget = -1
		l.flushMu.Unlock()
		l.flushRound()
		l.flushMu.Lock()
		l.flushing = false
		l.completed = round
		l.flushCond.Broadcast()
	}
	l.flushMu.Unlock()
	return l.roundResult(offset)
}

// roundResult is what Sync (offset -1) or SyncTo(offset) returns once
// its round completed.
func (l *Log) roundResult(offset int64) error {
	l.mu.RLock()
	err := l.failed
	if err == nil && l.closed && (offset < 0 || l.flushed.Load() < offset) {
		err = ErrClosed
	}
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	if offset >= 0 && l.flushed.Load() < offset {
		return ErrTruncated
	}
	return nil
}

// SyncRound is an fsync round of a Log whose files the caller makes
// durable by other means: one vfs.FSSyncer.SyncFS of the filesystem
// holding the log's directory, shared by many logs. BeginSync captures
// what the round covers, then the caller syncs the filesystem and calls
// End with the result.
type SyncRound struct {
	l     *Log
	round uint64
	c     roundCapture
	ok    bool // c was captured (the log was neither closed nor failed)
}

// BeginSync starts an fsync round as Sync does (after the running round,
// if any) and captures the log end and the dirty files — segments,
// indexes of newly sealed segments, producer snapshots, new names in the
// directory — without syncing them. Until End, the round is running:
// Sync callers, truncations and Close wait for it, so End must follow
// soon, on every path.
func (l *Log) BeginSync() *SyncRound {
	l.flushMu.Lock()
	for l.flushing {
		l.flushCond.Wait()
	}
	l.flushing = true
	l.started++
	r := &SyncRound{l: l, round: l.started}
	l.inflightTarget = -1
	l.flushMu.Unlock()
	r.c, r.ok = l.captureRound()
	return r
}

// End completes the round. err is the result of syncing the whole
// filesystem after BeginSync returned: nil makes the captured log end the
// flushed offset, as a successful Sync would; an error takes the log
// offline as a failed fsync does (ErrFailed: nothing after the last good
// round counts). It returns what Sync would have returned.
func (r *SyncRound) End(err error) error {
	l := r.l
	if r.ok {
		for _, f := range r.c.snaps {
			f.Close()
		}
		l.checkWriter("SyncRound.End")
		l.finishRound(r.c, err)
	}
	l.endRound(r.round)
	return l.roundResult(-1)
}

// EndFiles completes the round as End does but leaves its result to be
// applied by the log's writer (ApplyFlush): the broker's flusher hands it
// to the partition's owner.
func (r *SyncRound) EndFiles(err error) FlushDone {
	l := r.l
	d := FlushDone{c: r.c, ok: r.ok}
	if r.ok {
		for _, f := range r.c.snaps {
			f.Close()
		}
		if err != nil {
			d.err = l.fail(err)
		}
	}
	l.endRound(r.round)
	if !r.ok {
		d.err = l.roundResult(-1)
	}
	return d
}

// FlushDone is an fsync round whose files are synced and whose result —
// the flushed offset, the segments' synced sizes, the recovery point — is
// still to be applied by the log's one writer (ApplyFlush). The round
// itself has ended: truncations and Close no longer wait for it.
type FlushDone struct {
	c   roundCapture
	ok  bool // c was captured
	err error
}

// Err is the round's failure: ErrFailed (the fsync failed; the log is
// offline already), ErrClosed, or nil.
func (d FlushDone) Err() error { return d.err }

// SyncFiles runs an fsync round as Sync does — after the running one, if
// any — and returns once its files are synced, leaving the result to the
// log's writer (ApplyFlush). It shares nothing with other callers: the
// broker's flusher runs one round of a partition at a time.
func (l *Log) SyncFiles() FlushDone {
	l.flushMu.Lock()
	for l.flushing {
		l.flushCond.Wait()
	}
	l.flushing = true
	l.started++
	round := l.started
	l.inflightTarget = -1
	l.flushMu.Unlock()
	var d FlushDone
	if d.c, d.ok = l.captureRound(); d.ok {
		if err := l.syncFiles(d.c.dirDirty, d.c.items, d.c.snaps); err != nil {
			d.err = l.fail(err)
		}
	}
	l.endRound(round)
	if !d.ok {
		d.err = l.roundResult(-1)
	}
	return d
}

// ApplyFlush applies a round that SyncFiles or EndFiles returned, as the
// log's writer: the captured log end becomes the flushed offset (unless a
// truncation came in between: it flushed by itself) and the recovery
// point moves to the active segment the round found. It returns the
// round's error, or the one writing the recovery point.
func (l *Log) ApplyFlush(d FlushDone) error {
	l.checkWriter("ApplyFlush")
	if !d.ok || d.err != nil {
		return d.err
	}
	l.finishRound(d.c, nil)
	l.mu.RLock()
	err := l.failed
	l.mu.RUnlock()
	return err
}

// endRound marks round as completed and wakes the callers waiting for it.
func (l *Log) endRound(round uint64) {
	l.flushMu.Lock()
	l.flushing = false
	l.completed = round
	l.flushCond.Broadcast()
	l.flushMu.Unlock()
}

// syncItem is one file to fsync in a round.
type syncItem struct {
	seg     *segment
	size    int64 // log bytes covered
	indexes bool  // also sync the index files (sealed segment)
}

// roundCapture is what an fsync round covers, captured under mu.
type roundCapture struct {
	target     int64 // log end
	gen        uint64
	dirDirty   bool
	items      []syncItem
	snaps      []vfs.File
	activeBase int64
}

// flushRound is one fsync round: it captures the log end and the dirty
// files under mu, fsyncs them without any lock, then publishes the new
// flushed offset. A truncation meanwhile (truncGen) voids the round's
// result, since TruncateTo flushes by itself.
func (l *Log) flushRound() {
	c, ok := l.captureRound()
	if !ok {
		return
	}
	l.checkWriter("Sync")
	l.finishRound(c, l.syncFiles(c.dirDirty, c.items, c.snaps))
}

// captureRound captures a round (false if the log is closed or failed)
// and publishes its target as the running round's.
func (l *Log) captureRound() (roundCapture, bool) {
	l.mu.Lock()
	if l.failed != nil || l.closed {
		l.mu.Unlock()
		return roundCapture{}, false
	}
	c := roundCapture{target: l.leo, gen: l.truncGen, dirDirty: l.dirDirty}
	l.dirDirty = false
	for i, s := range l.segs {
		sealed := i < len(l.segs)-1
		if s.syncedSize < s.size || (sealed && !s.indexesSynced) {
			c.items = append(c.items, syncItem{seg: s, size: s.size, indexes: sealed && !s.indexesSynced})
		}
	}
	c.snaps = l.unsyncedSnaps
	l.unsyncedSnaps = nil
	c.activeBase = l.active().base
	l.mu.Unlock()

	l.flushMu.Lock()
	l.inflightTarget = c.target
	l.flushMu.Unlock()
	return c, true
}

// finishRound publishes a captured round whose files were synced with
// result err (an error fails the log).
func (l *Log) finishRound(c roundCapture, err error) {
	if err != nil {
		l.fail(err)
		return
	}
	l.mu.Lock()
	if l.truncGen != c.gen {
		l.mu.Unlock()
		return
	}
	for _, it := range c.items {
		s := it.seg
		s.syncedSize = max(s.syncedSize, it.size)
		s.indexesSynced = s.indexesSynced || it.indexes
	}
	if c.target > l.flushed.Load() {
		l.flushed.Store(c.target)
	}
	l.mu.Unlock()
	if c.activeBase != l.rpBase {
		// Every segment below activeBase is now durable, indexes and
		// snapshots included: recovery may start there. The file itself
		// needs no fsync: a stale or torn one only means more scanning.
		if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, recoveryPointName), encodeOffsetFile(c.activeBase), false); err != nil {
			l.fail(err)
			return
		}
		l.rpBase = c.activeBase
	}
}

// pauseFlush waits for the running fsync round and keeps new ones from
// starting until resumeFlush: truncation and close use it so that no round
// syncs files they are cutting or closing, and so that they may update the
// recovery point themselves.
func (l *Log) pauseFlush() {
	l.flushMu.Lock()
	for l.flushing {
		l.flushCond.Wait()
	}
	l.flushing = true
	l.flushMu.Unlock()
}

func (l *Log) resumeFlush() {
	l.flushMu.Lock()
	l.flushing = false
	l.flushCond.Broadcast()
	l.flushMu.Unlock()
}

func (l *Log) syncFiles(dirDirty bool, items []syncItem, snaps []vfs.File) error {
	if dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	for _, it := range items {
		files := []vfs.File{it.seg.log}
		if it.indexes {
			// Index files never opened here were not changed here.
			files = append(files, it.seg.openIndexFiles()...)
		}
		for _, f := range files {
			if err := f.Sync(); err != nil && !it.seg.deleted.Load() {
				return err
			}
		}
	}
	var err error
	for _, f := range snaps {
		if serr := f.Sync(); serr != nil && err == nil {
			err = serr
		}
		f.Close()
	}
	return err
}
