package group

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
)

// BenchmarkOffsetCommit measures offset commits per second on one
// coordinator partition (offsets.topic.num.partitions=1, one node): each
// commit is a simple (generation -1) OffsetCommit of 10 partitions,
// answered once durable. "serial" is one committer, "parallel" 32
// committers, each with its own group.
//
//	go test ./internal/group -run '^$' -bench OffsetCommit -benchtime 5s
func BenchmarkOffsetCommit(b *testing.B) {
	cfg := config.Defaults()
	cfg.DataDir = b.TempDir()
	cfg.Props["offsets.topic.num.partitions"] = "1"
	br, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if err := br.CreateTopic("t", 10, 1, nil, false); err != nil {
		b.Fatal(err)
	}
	c := New(br, Options{Config: ConfigFrom(br.Config())})
	defer c.Close()
	commit := func(group string, off int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group = group
		req.Generation = -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		for p := int32(0); p < 10; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		for {
			resp := c.OffsetCommit(req)
			var r *kmsg.OffsetCommitResponse
			if resp.Wait != nil {
				r = resp.Wait()
			} else {
				r = resp.Resp
			}
			code := r.Topics[0].Partitions[0].ErrorCode
			if code == 0 {
				return
			}
			if off > 0 {
				b.Fatalf("commit: error %d", code)
			}
			// The first commit may find the partition loading.
		}
	}
	commit("warmup", 0)
	b.Run("serial", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			commit("serial", int64(i+1))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Int64
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			group := "parallel-" + strconv.FormatInt(next.Add(1), 10)
			off := int64(0)
			for pb.Next() {
				off++
				commit(group, off)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
}
