package storage

import (
	"path/filepath"

	"github.com/sluice-io/sluice/internal/vfs"
)

// The local file formats as tiered storage (KIP-405) reads them back from
// the remote log: each remote object is a local file's bytes
// (internal/remote), so the remote reader parses them with the same
// decoders recovery uses.

// OffsetIndex is a parsed .index file (Kafka's OffsetIndex): sparse
// (relative offset, position) entries of one segment.
type OffsetIndex struct{ e []offsetEntry }

// ParseOffsetIndex parses the bytes of a segment's .index file, whose .log
// holds logSize bytes. Entries must increase strictly in both columns and
// point inside the log.
func ParseOffsetIndex(data []byte, logSize int64) (OffsetIndex, error) {
	e, err := decodeOffsetIndex(data, logSize)
	return OffsetIndex{e: e}, err
}

// Floor returns the position in the .log of the last indexed batch whose
// relative offset is at most rel (0 if none): scanning batches from there
// finds the batch holding base+rel.
func (ix OffsetIndex) Floor(rel uint32) int64 { return int64(floorOffset(ix.e, rel).pos) }

// Len is the number of entries.
func (ix OffsetIndex) Len() int { return len(ix.e) }

// TimeIndex is a parsed .timeindex file (Kafka's TimeIndex).
type TimeIndex struct{ e []timeEntry }

// ParseTimeIndex parses the bytes of a segment's .timeindex file; maxRel
// is the segment's next offset minus its base.
func ParseTimeIndex(data []byte, maxRel int64) (TimeIndex, error) {
	e, err := decodeTimeIndex(data, maxRel)
	return TimeIndex{e: e}, err
}

// Lower returns the relative offset to scan from for the first batch whose
// max timestamp is at least ts (0 if no entry is below ts).
func (ix TimeIndex) Lower(ts int64) uint32 { return lowerTime(ix.e, ts) }

// Len is the number of entries.
func (ix TimeIndex) Len() int { return len(ix.e) }

// ParseTxnIndex parses the bytes of a .txnindex file (Kafka's
// TransactionIndex): its whole entries, in file order.
func ParseTxnIndex(data []byte) []AbortedTxn { return decodeTxnIndex(data) }

// TruncateFullyAndStartTiered empties the local log and restarts it at
// localStart with the log start at logStart (<= localStart): a follower
// that rebuilt its state from the remote log (KIP-405, Kafka's
// ReplicaFetcherTierStateMachine.buildRemoteLogAuxState, which calls
// truncateFullyAndStartAt then maybeIncrementLogStartOffset with the
// leader's log start), so the range [logStart, localStart) stays readable
// from the remote log. It needs Config.RemoteStorage.
func (l *Log) TruncateFullyAndStartTiered(logStart, localStart int64) error {
	l.checkWriter("TruncateFullyAndStartTiered")
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if logStart > localStart || logStart < 0 {
		return ErrOffsetOutOfRange
	}
	if err := l.truncateFully(localStart); err != nil {
		return err
	}
	if logStart == localStart || !l.cfg.RemoteStorage {
		return nil
	}
	// As DeleteLocalBelow: recovery keeps a persisted log start below the
	// first local segment under remote storage.
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, logStartName), encodeOffsetFile(logStart), true); err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	l.logStart = logStart
	l.mu.Unlock()
	return nil
}
