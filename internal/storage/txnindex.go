package storage

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"sort"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/vfs"
)

// The aborted-transaction index (Kafka's TransactionIndex, .txnindex): for
// each ABORT marker, the producer id, the offset of the transaction's first
// batch and the marker's offset. It belongs to the segment that holds the
// marker. A read_committed fetch gets the aborted transactions that overlap
// the range it returns (AbortedTxns), so the consumer can drop their
// records.
//
// Entries live in memory with their segment. The file <base>.txnindex is
// written whole, and fsynced, when the segment is sealed or the log closes
// cleanly, and only when the segment has entries; it is read at recovery.
// Entries of segments a crash may have touched (from the producer
// snapshot recovery replays from) are rebuilt by that replay. File format,
// Kafka's: 34-byte entries of i16 version 0, i64 producer id, i64 first
// offset, i64 last offset, i64 last stable offset; a torn tail entry is
// ignored.

const (
	txnIndexSuffix    = ".txnindex"
	txnEntrySize      = 2 + 8 + 8 + 8 + 8
	maxTxnIndexBytes  = 64 << 20
	txnIndexVersion   = 0
	maxAbortedPerRead = 100_000 // bound on one AbortedTxns answer
)

// AbortedTxn is one aborted transaction: its producer and the offsets of
// its first batch and of its ABORT marker. LastStable is the partition's
// last stable offset once the marker was applied, by producer state alone
// (the first offset of the oldest transaction still open, else the
// marker's offset plus one): a search that reaches an entry with
// LastStable at or above its upper bound has seen every transaction that
// began below it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	LastStable  int64
}

func encodeTxnIndex(es []AbortedTxn) []byte {
	b := make([]byte, 0, len(es)*txnEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint16(b, txnIndexVersion)
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(e.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastStable))
	}
	return b
}

// decodeTxnIndex parses whole entries, stopping at a torn or unknown one.
func decodeTxnIndex(b []byte) []AbortedTxn {
	var out []AbortedTxn
	for len(b) >= txnEntrySize && binary.BigEndian.Uint16(b) == txnIndexVersion {
		e := AbortedTxn{
			ProducerID:  int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset: int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:  int64(binary.BigEndian.Uint64(b[18:])),
			LastStable:  int64(binary.BigEndian.Uint64(b[26:])),
		}
		if e.ProducerID < 0 || e.FirstOffset < 0 || e.LastOffset < e.FirstOffset {
			break
		}
		out = append(out, e)
		b = b[txnEntrySize:]
	}
	return out
}

// loadTxnIndex reads s's aborted-transaction index, if it has one, keeping
// the entries whose marker lies in the segment.
func (s *segment) loadTxnIndex() error {
	b, err := vfs.ReadFile(s.fs, fileName(s.dir, s.base, txnIndexSuffix), maxTxnIndexBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, vfs.ErrTooLarge):
		return nil // rebuilt only by a replay; reads miss nothing else
	case err != nil:
		return err
	}
	for _, e := range decodeTxnIndex(b) {
		if e.LastOffset >= s.base {
			s.aborted = append(s.aborted, e)
		}
	}
	return nil
}

// writeTxnIndex writes s's aborted-transaction index file (name plus
// suffix, e.g. for the cleaner's .cleaned files) and fsyncs it; with no
// entries it removes the file instead.
func (s *segment) writeTxnIndex(suffix string) error {
	name := fileName(s.dir, s.base, txnIndexSuffix) + suffix
	if len(s.aborted) == 0 {
		if err := s.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	f, err := s.fs.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(encodeTxnIndex(s.aborted)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// trimAborted drops the entries whose marker is at or above offset
// (copy-on-truncate: readers may hold the old slice).
func trimAborted(es []AbortedTxn, offset int64) []AbortedTxn {
	n := sort.Search(len(es), func(i int) bool { return es[i].LastOffset >= offset })
	if n == len(es) {
		return es
	}
	return append([]AbortedTxn(nil), es[:n]...)
}

// applyProducer records a batch in the producer state (leader, follower
// and recovery alike) and returns the transaction a marker aborted, if
// any. b is the whole batch, needed only for a control batch; without it
// (nil) the marker is read from the log by the caller.
func applyProducer(ps *producer.State, h *batch.Header, b []byte) (AbortedTxn, bool) {
	c, ok := applyBatch(ps, h, b)
	if !ok || !c.Aborted {
		return AbortedTxn{}, false
	}
	return AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStable: ps.StableAfter(c)}, true
}

// applyBatch records a batch in the producer state as applyProducer does
// and returns the transaction a marker ended (committed or aborted), if
// any.
func applyBatch(ps *producer.State, h *batch.Header, b []byte) (producer.Completed, bool) {
	if h.ProducerID < 0 {
		return producer.Completed{}, false
	}
	if h.IsControl() {
		m, err := batch.ParseMarker(b)
		if err != nil {
			return producer.Completed{}, false // not a transaction marker
		}
		return ps.EndTxn(h.ProducerID, h.ProducerEpoch, m.CoordinatorEpoch, h.BaseOffset, h.MaxTimestamp, !m.Commit)
	}
	ps.Update(h.ProducerID, h.ProducerEpoch, producer.Batch{
		FirstSeq:    h.BaseSequence,
		LastSeq:     h.LastSequence(),
		FirstOffset: h.BaseOffset,
		LastOffset:  h.LastOffset(),
		MaxTime:     h.MaxTimestamp,
	})
	if h.IsTransactional() {
		ps.BeginTxn(h.ProducerID, h.BaseOffset)
	}
	return producer.Completed{}, false
}

// AbortedTxns returns the aborted transactions that overlap [from, upto):
// those whose marker is at or after from and whose first batch is below
// upto, at most maxAbortedPerRead of them, in marker order. As Kafka's
// LocalLog.collectAbortedTransactions, it searches the segments from the
// one holding from until an entry's LastStable reaches upto.
func (l *Log) AbortedTxns(from, upto int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		for _, e := range l.segs[i].aborted {
			if e.LastOffset >= from && e.FirstOffset < upto {
				out = append(out, e)
				if len(out) == maxAbortedPerRead {
					return out
				}
			}
			if e.LastStable >= upto {
				return out
			}
		}
	}
	return out
}
