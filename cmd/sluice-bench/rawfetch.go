package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConsume reads want records of topic from the start with plain Fetch
// requests, counting batches from their headers without decoding records:
// it measures what the broker serves, not what a client library can parse
// (franz-go's per-record decoding, on the same cores, is otherwise the
// ceiling). It returns the records and bytes read and the seconds taken.
func rawConsume(ctx context.Context, seeds []string, topic string, want int) (int, int64, float64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, 0, 0, err
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, 0, 0, err
	}
	t, ok := td[topic]
	if !ok || t.Err != nil {
		return 0, 0, 0, fmt.Errorf("topic %s: %v", topic, t.Err)
	}
	offsets := make([]int64, len(t.Partitions))
	var records int
	var bytes int64
	start := time.Now()
	for records < want {
		if err := ctx.Err(); err != nil {
			return records, bytes, time.Since(start).Seconds(), err
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.ReplicaState.ID = -1, -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 64<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, t.ID
		for p, off := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, 16<<20
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		kresp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return records, bytes, time.Since(start).Seconds(), err
		}
		for _, rt := range kresp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					return records, bytes, time.Since(start).Seconds(), fmt.Errorf("partition %d: error %d", rp.Partition, rp.ErrorCode)
				}
				b := rp.RecordBatches
				bytes += int64(len(b))
				// v2 batch header: baseOffset int64, length int32, ...,
				// lastOffsetDelta int32 at 23, records count int32 at 57.
				for len(b) >= 61 {
					size := 12 + int(binary.BigEndian.Uint32(b[8:]))
					if size > len(b) {
						break
					}
					base := int64(binary.BigEndian.Uint64(b))
					offsets[rp.Partition] = base + int64(binary.BigEndian.Uint32(b[23:])) + 1
					records += int(binary.BigEndian.Uint32(b[57:]))
					b = b[size:]
				}
			}
		}
	}
	return records, bytes, time.Since(start).Seconds(), nil
}
