package storage

import "github.com/sluice-io/sluice/internal/producer"

// CompletedTxns returns the transactions whose marker is at or above
// offset from, in log order, as the disk holds them: the producer state of
// the newest snapshot at or below from (whose open transactions give their
// first offsets) and a replay of the batches after it, reading only.
//
// A replica that opens its log needs those above its high watermark: a
// transaction whose marker is not yet below the HW is still unstable, as
// a new leader may not have the marker (Kafka's
// ProducerStateManager.unreplicatedTxns, which log recovery fills through
// completeTxn). docs/transactions.md, "The last stable offset".
func (l *Log) CompletedTxns(from int64) ([]producer.Completed, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	if from >= l.leo {
		return nil, nil
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
