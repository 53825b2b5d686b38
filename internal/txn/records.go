package txn

// The records of __transaction_state use Kafka's formats (TransactionLogKey
// and TransactionLogValue, kmsg's TxnMetadataKey and TxnMetadataValue), so
// Kafka tools reading the topic understand them:
//
//	TxnMetadataKey v0 (transactional id) -> TxnMetadataValue v0, or v1
//	                                        (flexible, KIP-890 tagged fields)
//	                                        for transaction version 2
//
// A null value is a tombstone: the transactional id was removed (Dead).
// Like Kafka's TransactionLog.valueToBytes, Empty and Complete* values
// carry no partitions.

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/storage"
)

// Topic is the internal topic holding transaction state.
const Topic = "__transaction_state"

// PartitionFor returns the __transaction_state partition of a
// transactional id: abs(javaHashCode(id)) % n, as Kafka computes it.
func PartitionFor(id string, n int32) int32 { return group.PartitionFor(id, n) }

// record is one key/value; a nil value is a tombstone.
type record struct {
	key, value []byte
}

func txnKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = 0
	k.TransactionalID = id
	return k.AppendTo(nil)
}

// txnRecord encodes transit t of id, a tombstone for Dead.
func txnRecord(id string, t *Transit) record {
	if t.State == Dead {
		return record{key: txnKey(id)}
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	if t.TxnVersion >= 2 {
		v.Version = 1
		v.PreviousProducerID = t.PrevProducerID
		v.NextProducerID = t.NextProducerID
		v.ClientTransactionVersion = t.TxnVersion
	}
	v.ProducerID, v.ProducerEpoch = t.ProducerID, t.Epoch
	v.TimeoutMillis = int32(t.Timeout / time.Millisecond)
	v.State = kmsg.TransactionState(t.State)
	for _, p := range SortedPartitions(t.Partitions) {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == p.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, p.Partition)
			continue
		}
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = p.Topic, []int32{p.Partition}
		v.Topics = append(v.Topics, vt)
	}
	v.LastUpdateTimestamp = t.LastUpdate.UnixMilli()
	v.StartTimestamp = -1
	if !t.Start.IsZero() {
		v.StartTimestamp = t.Start.UnixMilli()
	}
	return record{key: txnKey(id), value: v.AppendTo(nil)}
}

// encodeBatch builds one uncompressed v2 record batch holding recs, as a
// non-idempotent producer would (the log assigns the offsets).
func encodeBatch(recs []record, now time.Time) []byte {
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.key, Value: r.value}
	}
	return batch.Encode(kvs, now.UnixMilli(), batch.NoProducer)
}

// errBadRecord reports a record of __transaction_state that does not parse.
var errBadRecord = errors.New("txn: malformed __transaction_state record")

// loaded is the state rebuilt from one partition of __transaction_state:
// the last value of each transactional id.
type loaded map[string]*Metadata

// apply replays one record. Keys of unknown versions are skipped.
func (l loaded) apply(key, value []byte) error {
	if len(key) < 2 {
		return errBadRecord
	}
	if binary.BigEndian.Uint16(key) != 0 {
		return nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return errBadRecord
	}
	if value == nil {
		delete(l, k.TransactionalID)
		return nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return errBadRecord
	}
	m := NewMetadata(k.TransactionalID, v.ProducerID, time.Duration(v.TimeoutMillis)*time.Millisecond,
		time.UnixMilli(v.LastUpdateTimestamp))
	m.Epoch = v.ProducerEpoch
	m.State = State(v.State)
	if m.State < Empty || m.State > PrepareEpochFence {
		return errBadRecord
	}
	m.PrevProducerID, m.NextProducerID = v.PreviousProducerID, v.NextProducerID
	m.TxnVersion = v.ClientTransactionVersion
	if m.TxnVersion >= 2 && (m.State == PrepareCommit || m.State == PrepareAbort) {
		// The prepare record bumped the epoch (KIP-890 part 2).
		m.LastEpoch = m.Epoch - 1
	}
	if v.StartTimestamp >= 0 && (m.State == Ongoing || m.State == PrepareCommit || m.State == PrepareAbort) {
		m.Start = time.UnixMilli(v.StartTimestamp)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions[Partition{t.Topic, p}] = struct{}{}
		}
	}
	l[k.TransactionalID] = m
	return nil
}

// decodeBatches replays every record of data (whole v2 batches) into l,
// returning the offset after the last batch.
func (l loaded) decodeBatches(data []byte) (next int64, err error) {
	next = -1
	for len(data) > 0 {
		h, b, rest, err := batch.Next(data)
		if err != nil {
			return next, err
		}
		data = rest
		next = h.NextOffset()
		if h.IsControl() {
			continue
		}
		var applyErr error
		err = batch.Records(b, func(r batch.Record) bool {
			var value []byte
			if r.Value != nil {
				value = append([]byte{}, r.Value...)
			}
			applyErr = l.apply(append([]byte{}, r.Key...), value)
			return applyErr == nil
		})
		if err == nil {
			err = applyErr
		}
		if err != nil {
			return next, err
		}
	}
	return next, nil
}

// ReadLog replays the records of a __transaction_state log in [from,
// end) as a coordinator's load does and returns the state of each
// transactional id it names (tools and the simulator's checks: what a
// coordinator elected now would load). A bad record is skipped; err is
// the first problem met.
func ReadLog(log *storage.Log, from, end int64) (ids map[string]Metadata, err error) {
	l := loadLog(log, from, end, func(_ string, _ int64, e error) {
		if err == nil {
			err = e
		}
	})
	ids = make(map[string]Metadata, len(l))
	for id, m := range l {
		ids[id] = snapshot(m)
	}
	return ids, err
}
