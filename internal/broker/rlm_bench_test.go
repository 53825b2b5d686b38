package broker_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTieredProduce compares acks=all produce throughput on one
// in-process broker with the remote log manager copying every rolled
// segment to an in-memory object store (and local retention deleting
// them) against the same broker with remote storage off, in one run:
//
//	go test ./internal/broker -run '^$' -bench TieredProduce -benchtime 4000x
func BenchmarkTieredProduce(b *testing.B) {
	for _, tiered := range []bool{false, true} {
		b.Run("remote.storage.enable="+strconv.FormatBool(tiered), func(b *testing.B) {
			q := newFakeQuorum()
			props := tieredProps()
			props["remote.log.manager.task.interval.ms"] = "100"
			m := startTieredB(b, q, b.TempDir(), props)
			configs := map[string]string{"segment.bytes": "1048576"}
			if tiered {
				configs["remote.storage.enable"] = "true"
				configs["local.retention.bytes"] = "4194304"
			}
			if err := m.b.CreateTopic("bench", 1, 1, configs, false); err != nil {
				b.Fatal(err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(m.addr), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			val := make([]byte, 1024)
			rand.Read(val)
			ctx := context.Background()
			b.SetBytes(int64(len(val)) * 16)
			b.ResetTimer()
			for range b.N {
				for range 16 {
					cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
