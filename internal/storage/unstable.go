package storage

import (
	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/producer"
)

// CompletedTxns returns the transactions whose marker is at or above
// offset from, in log order, as the disk holds them: the producer state of
// the newest snapshot at or below from (whose open transactions give their
// first offsets) and a replay of the batches after it, reading only.
//
// A replica that opens its log needs those above its high watermark: a
// transaction whose marker is not yet below the HW is still unstable, as
// a new leader may not have the marker (Kafka's
// ProducerStateManager.unreplicatedTxns, which log recovery fills through
// completeTxn). docs/transactions.md, "Producer state and the last stable offset".
func (l *Log) CompletedTxns(from int64) ([]producer.Completed, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	if from >= l.leo {
		return nil, nil
	}
	// Most opens find no marker at or above the HW: the scan of that
	// range (a few batches, usually) spares them the replay from a
	// snapshot, which may lie a whole segment lower.
	if found, err := l.markerFrom(from); err != nil || !found {
		return nil, err
	}
	ps, start := l.snapshotAtOrBelow(l.snapshotOffsets(), max(from, l.segs[0].base))
	var out []producer.Completed
	err := l.replayProducers(ps, start, false, func(c producer.Completed) {
		if c.LastOffset >= from {
			out = append(out, c)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// markerFrom reports whether a transaction marker (a control batch of a
// producer) lies at or above offset from (appendMu held).
func (l *Log) markerFrom(from int64) (bool, error) {
	found := false
	for i := l.segmentFor(from); i < len(l.segs) && !found; i++ {
		s := l.segs[i]
		var start int64
		if from > s.base {
			start = int64(floorOffset(s.offsets, uint32(from-s.base)).pos)
		}
		_, err := walk(s.log, start, s.size, -1, false, 64<<10, func(h *batch.Header, _ int64, _ []byte) error {
			if h.BaseOffset >= from && h.IsControl() && h.ProducerID >= 0 {
				found = true
				return errStop
			}
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	return found, nil
}
