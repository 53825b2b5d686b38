package handler

// DeleteRecords, versions 0-2. Raises a partition's log start offset to
// Offset (-1 means the high watermark); an offset above the high watermark
// is OFFSET_OUT_OF_RANGE. Whole segments below the new start are deleted.
// The answer waits, at most TimeoutMillis, until every live replica has
// raised its log start too (broker.Partition.DeleteRecords; Kafka's
// DelayedDeleteRecords); past it the partition gets REQUEST_TIMED_OUT.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) deleteRecords(r *protocol.Request) protocol.Reply {
	lookup := h.b.LookupDeadline()
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	deadline := h.b.Clock().Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
	type waiting struct {
		topic, part int
		ch          <-chan broker.DeleteResult
	}
	var waits []waiting
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		// DELETE on the topic (KafkaApis.handleDeleteRecordsRequest).
		deletable := h.allowedTopic(r, rt.Topic, acl.OpDelete)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			var p *broker.Partition
			err := error(kerr.TopicAuthorizationFailed)
			if deletable {
				p, err = h.b.LeaderBy(rt.Topic, rp.Partition, lookup)
			}
			if err == nil {
				off := rp.Offset
				hw := p.HighWatermark()
				switch {
				case off == -1:
					off = hw
				case off < 0 || off > hw:
					err = kerr.OffsetOutOfRange
				}
				if err == nil {
					waits = append(waits, waiting{len(resp.Topics), len(st.Partitions), p.DeleteRecords(off, deadline)})
				}
			}
			sp.ErrorCode = code(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) == 0 {
		return protocol.Reply{Resp: resp}
	}
	return protocol.Reply{Await: func() kmsg.Response {
		for _, w := range waits {
			res := <-w.ch
			sp := &resp.Topics[w.topic].Partitions[w.part]
			sp.LowWatermark, sp.ErrorCode = res.LowWatermark, code(res.Err)
		}
		return resp
	}}
}
