package batch_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// benchRecords is a typical producer batch: 100 keyed records of about
// 100 bytes with one header each.
func benchRecords() []batchtest.Record {
	recs := make([]batchtest.Record, 100)
	for i := range recs {
		recs[i] = batchtest.Record{
			Key:            fmt.Appendf(nil, "key-%04d", i),
			Value:          bytes.Repeat(fmt.Appendf(nil, "value %d ", i), 20)[:100],
			Headers:        []kmsg.Header{{Key: "trace", Value: []byte("abc123")}},
			TimestampDelta: int64(i),
		}
	}
	return recs
}

// BenchmarkValidateTimestamps is the produce path's pass over a batch
// that is kept as produced.
func BenchmarkValidateTimestamps(b *testing.B) {
	for _, c := range codecs {
		b.Run(c.String(), func(b *testing.B) {
			raw := batchtest.Build(batchtest.Options{Codec: c, BaseTimestamp: 1000}, benchRecords())
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := batch.ValidateTimestamps(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateProducerBatch is the produce path's pass over the
// batches scripts/bench-ab3.sh sends (docs/performance.md, "Replication"):
// franz-go's 1 MiB batches of 100 B values without keys or headers,
// uncompressed.
func BenchmarkValidateProducerBatch(b *testing.B) {
	recs := make([]batchtest.Record, 9000)
	for i := range recs {
		recs[i] = batchtest.Record{Value: bytes.Repeat([]byte{'v'}, 100), TimestampDelta: int64(i / 100)}
	}
	raw := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, BaseTimestamp: 1000}, recs)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := batch.ValidateTimestamps(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRebuild is the produce path's cost for a batch whose codec is
// not the topic's compression.type: validation, decompression, the new
// codec's encoding and the CRC.
func BenchmarkRebuild(b *testing.B) {
	for _, from := range codecs {
		for _, to := range codecs {
			if (from == batch.None) == (to == batch.None) {
				continue // uncompressed to each codec and back
			}
			b.Run(fmt.Sprintf("%v-to-%v", from, to), func(b *testing.B) {
				raw := batchtest.Build(batchtest.Options{Codec: from, BaseTimestamp: 1000}, benchRecords())
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, _, err := batch.Rebuild(raw, to, 0, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
