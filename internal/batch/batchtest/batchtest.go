// Package batchtest builds valid Kafka v2 record batches for tests and
// fuzz seeds, with any codec, as a producer would send them.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
)

// Record is one record to put in a batch.
type Record struct {
	Key, Value []byte
	Headers    []kmsg.Header
	// TimestampDelta is added to the batch's base timestamp.
	TimestampDelta int64
}

// Options shape a batch. The zero value is an uncompressed, non-idempotent
// batch at offset 0 timestamped now.
type Options struct {
	Codec         batch.Codec
	BaseOffset    int64
	BaseTimestamp int64 // ms; 0 means now
	ProducerID    int64 // 0 means -1 (none) unless Idempotent
	Idempotent    bool
	// Transactional sets the transactional attribute (implies Idempotent).
	Transactional bool
	ProducerEpoch int16
	BaseSequence  int32
	LeaderEpoch   int32
}

// Values returns records with the given values and no keys.
func Values(values ...string) []Record {
	rs := make([]Record, len(values))
	for i, v := range values {
		rs[i] = Record{Value: []byte(v)}
	}
	return rs
}

// Build encodes records into one v2 batch with a valid CRC.
func Build(opts Options, records []Record) []byte {
	ts := opts.BaseTimestamp
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	var raw []byte
	maxDelta := int64(0)
	for i, r := range records {
		kr := kmsg.NewRecord()
		kr.TimestampDelta64 = r.TimestampDelta
		kr.OffsetDelta = int32(i)
		kr.Key, kr.Value, kr.Headers = r.Key, r.Value, r.Headers
		if r.TimestampDelta > maxDelta {
			maxDelta = r.TimestampDelta
		}
		// kmsg writes Length as given: size the body first (a zero length
		// is one varint byte), then encode for real.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	data := compress(opts.Codec, raw)
	b := kmsg.NewRecordBatch()
	b.FirstOffset = opts.BaseOffset
	b.PartitionLeaderEpoch = opts.LeaderEpoch
	b.Magic = 2
	b.Attributes = int16(opts.Codec)
	if opts.Transactional {
		b.Attributes |= 0x10
		opts.Idempotent = true
	}
	b.LastOffsetDelta = int32(len(records) - 1)
	b.FirstTimestamp = ts
	b.MaxTimestamp = ts + maxDelta
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	if opts.Idempotent {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
	}
	b.NumRecords = int32(len(records))
	b.Records = data
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], batch.ComputeCRC(out))
	return out
}

func compress(c batch.Codec, raw []byte) []byte {
	var buf bytes.Buffer
	switch c {
	case batch.Gzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case batch.Snappy:
		return s2.EncodeSnappy(nil, raw)
	case batch.LZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case batch.Zstd:
		w, _ := zstd.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	default:
		return raw
	}
	return buf.Bytes()
}
