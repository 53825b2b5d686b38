package handler

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/config"
)

// BenchmarkProducePrepare is what the produce handler does to one
// partition's batch before the append (topic config, validation,
// timestamps), on a topic with the default compression.type=producer.
func BenchmarkProducePrepare(b *testing.B) {
	recs := make([]batchtest.Record, 100)
	for i := range recs {
		recs[i] = batchtest.Record{
			Key:     fmt.Appendf(nil, "key-%04d", i),
			Value:   bytes.Repeat([]byte("v"), 100),
			Headers: []kmsg.Header{{Key: "trace", Value: []byte("abc123")}},
		}
	}
	for _, c := range []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd} {
		b.Run(c.String(), func(b *testing.B) {
			raw := batchtest.Build(batchtest.Options{Codec: c}, recs)
			tc := config.TopicConfig{}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				pc := produceConfigOf(tc)
				if _, _, _, err := prepareBatch(raw, pc, time.Now().UnixMilli()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
