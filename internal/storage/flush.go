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

// syncItem is one file to fsync in a round.
type syncItem struct {
	seg     *segment
	size    int64 // log bytes covered
	indexes bool  // also sync the index files (sealed segment)
}

// flushRound is one fsync round: it captures the log end and the dirty
// files under mu, fsyncs them without any lock, then publishes the new
// flushed offset. A truncation meanwhile (truncGen) voids the round's
// result, since TruncateTo flushes by itself.
func (l *Log) flushRound() {
	l.mu.Lock()
	if l.failed != nil || l.closed {
		l.mu.Unlock()
		return
	}
	target, gen, dirDirty := l.leo, l.truncGen, l.dirDirty
	l.dirDirty = false
	var items []syncItem
	for i, s := range l.segs {
		sealed := i < len(l.segs)-1
		if s.syncedSize < s.size || (sealed && !s.indexesSynced) {
			items = append(items, syncItem{seg: s, size: s.size, indexes: sealed && !s.indexesSynced})
		}
	}
	snaps := l.unsyncedSnaps
	l.unsyncedSnaps = nil
	activeBase := l.active().base
	l.mu.Unlock()

	l.flushMu.Lock()
	l.inflightTarget = target
	l.flushMu.Unlock()

	err := l.syncFiles(dirDirty, items, snaps)
	if err != nil {
		l.fail(err)
		return
	}
	l.mu.Lock()
	if l.truncGen != gen {
		l.mu.Unlock()
		return
	}
	for _, it := range items {
		s := it.seg
		s.syncedSize = max(s.syncedSize, it.size)
		s.indexesSynced = s.indexesSynced || it.indexes
	}
	if target > l.flushed.Load() {
		l.flushed.Store(target)
	}
	l.mu.Unlock()
	if activeBase != l.rpBase {
		// Every segment below activeBase is now durable, indexes and
		// snapshots included: recovery may start there. The file itself
		// needs no fsync: a stale or torn one only means more scanning.
		if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, recoveryPointName), encodeOffsetFile(activeBase), false); err != nil {
			l.fail(err)
			return
		}
		l.rpBase = activeBase
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
	for _, f := range snaps {
		err := f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
