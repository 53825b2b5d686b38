package batch

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KV is a record's key and value (nil: null).
type KV struct {
	Key, Value []byte
}

// Producer says whose batch Encode builds: ID and Epoch (-1, -1 for
// none) and the extra attribute bits (transactional, control). The batch
// carries no sequence (-1): the broker's coordinators append with
// producer epoch checks only.
type Producer struct {
	ID    int64
	Epoch int16
	Attrs int16
}

// NoProducer is a batch of no producer (Kafka's non-idempotent writes).
var NoProducer = Producer{ID: -1, Epoch: -1}

// Transactional is the transactional attribute bit, for Producer.Attrs.
const Transactional = attrTransactional

// Encode builds one uncompressed v2 batch of recs timestamped ts (ms), as
// the broker's own writers append it (the group and transaction
// coordinators, transaction markers): its base offset and leader epoch
// are set on append.
func Encode(recs []KV, ts int64, p Producer) []byte {
	var raw []byte
	for i, r := range recs {
		kr := kmsg.NewRecord()
		kr.OffsetDelta = int32(i)
		kr.Key, kr.Value = r.Key, r.Value
		// Length is written as given: size the body first.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.Attributes = p.Attrs
	b.LastOffsetDelta = int32(len(recs) - 1)
	b.FirstTimestamp, b.MaxTimestamp = ts, ts
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = p.ID, p.Epoch, -1
	b.NumRecords = int32(len(recs))
	b.Records = raw
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[lengthOffset:], uint32(len(out)-lengthOffset-4))
	binary.BigEndian.PutUint32(out[crcOffset:], ComputeCRC(out))
	return out
}
