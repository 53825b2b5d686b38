package storage

import (
	"errors"
	"slices"

	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// An owned log.
//
// The leader-epoch cache and the idempotent-producer state are derived
// from the log's batches. A log opened by Open derives them itself (from
// its checkpoint, its snapshots and a replay of the batches after them)
// and, until it is handed over, keeps both up to date on every append:
// the mode of tests, tools and benchmarks that write a log without a
// replica machine (AppendAssigning).
//
// The broker hands each partition's log over to its replica machine
// (HandOver), which from then on owns the epoch cache and the producer
// state the partition serves from: the machine applies every batch it
// assigns or fetches, and the log persists what the machine's Ready says
// — the epoch checkpoint (SetEpochs) and the aborted-transaction index
// entries of the markers it appends (Append's aborted argument). The log
// still keeps its own producer state in step with its appends (no
// sequence checks), as Kafka's UnifiedLog does, so that a segment roll
// snapshots the state exactly at the new segment's base. Truncation
// rebuilds it from the disk, and the owner takes it from there
// (ProducerState). docs/storage.md, "Owned logs".

var (
	// errNotOwned is returned by the owner's calls on a log not handed
	// over.
	errNotOwned = errors.New("storage: the log has not been handed over to an owner")
	// errOwned is returned by AppendAssigning on a log handed over.
	errOwned = errors.New("storage: the log has an owner, which assigns offsets")
)

// HandOver makes the caller the owner of the log's epoch cache and
// producer state and returns them as recovered from the disk (the
// producer state a copy: the log keeps its own for its roll snapshots).
// current returns a copy of the owner's producer state at the moment of
// the call; the cleaner asks it for each producer's last batch (which
// compaction keeps). From now on appends no longer update the epoch cache.
func (l *Log) HandOver(current func() *producer.State) ([]epoch.Entry, *producer.State) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	ps := l.producers.Clone()
	l.owner = current
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries(), ps
}

// owned reports whether the log was handed over (appendMu or mu held,
// or any time after HandOver: it never goes back).
func (l *Log) owned() bool { return l.owner != nil }

// ownerWritable is writable for the owner's calls: the log must have been
// handed over (appendMu held).
func (l *Log) ownerWritable() error {
	if !l.owned() {
		return errNotOwned
	}
	return l.writable()
}

// SetEpochs persists the owner's leader-epoch cache: the checkpoint file
// is rewritten (durably, as Kafka's LeaderEpochFileCache flushes on every
// change) when entries differ from what it holds.
func (l *Log) SetEpochs(entries []epoch.Entry) error {
	l.checkWriter("SetEpochs")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.ownerWritable(); err != nil {
		return err
	}
	l.mu.Lock()
	if slices.Equal(l.epochs.Entries(), entries) {
		l.mu.Unlock()
		return nil
	}
	l.epochs = epoch.New(entries)
	l.mu.Unlock()
	return l.persistEpochs()
}

// WriteProducerSnapshot writes the owner's producer state, encoded with
// producer.State.Encode, as the snapshot at the log end, and makes it the
// log's own: the state after every batch below the log end. The owner
// calls it when its state replaces what the disk holds (a log rebuilt
// from a remote snapshot) and before a clean close, once its appends
// reached the log (its state and the log end agree). Segment rolls
// snapshot the log's own state themselves. The file is synced by the next
// Sync.
func (l *Log) WriteProducerSnapshot(data []byte) error {
	l.checkWriter("WriteProducerSnapshot")
	ps, err := producer.Decode(data)
	if err != nil {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.ownerWritable(); err != nil {
		return err
	}
	if err := l.writeSnapshot(l.leo, data); err != nil {
		return err
	}
	l.producers = ps
	l.removeOldSnapshots()
	return nil
}

// writeSnapshot creates the producer-state snapshot at off, to be synced
// by the next Sync (appendMu held).
func (l *Log) writeSnapshot(off int64, data []byte) error {
	snap, err := l.fs.Create(fileName(l.dir, off, snapshotSuffix))
	if err != nil {
		return l.fail(err)
	}
	if _, err := snap.Write(data); err != nil {
		snap.Close()
		return l.fail(err)
	}
	l.mu.Lock()
	l.dirDirty = true
	l.unsyncedSnaps = append(l.unsyncedSnaps, snap)
	l.mu.Unlock()
	return nil
}

// diskProducers returns the producer state at the log end as the disk
// holds it: the log's own (a copy) before HandOver, and after it a state
// rebuilt from the newest snapshot and a replay of the batches after it
// (which OpenTxns offers to check the owner against), with rebuild also
// rewriting the aborted-transaction index entries of the segments
// replayed, as recovery does (appendMu held).
func (l *Log) diskProducers(rebuild bool) (*producer.State, error) {
	if !l.owned() {
		return l.producers.Clone(), nil
	}
	return l.readProducers(l.snapshotOffsets(), false, len(l.segs), rebuild)
}

// cleanerProducers is the producer state the cleaner keeps each
// producer's last batch from: the owner's, or the log's own.
func (l *Log) cleanerProducers() *producer.State {
	l.appendMu.Lock()
	owner, own := l.owner, l.producers
	if owner == nil {
		own = own.Clone()
	}
	l.appendMu.Unlock()
	if owner != nil {
		return owner() // without appendMu: the owner appends under it
	}
	return own
}
