package handler

// DeleteRecords, versions 0-2. Raises a partition's log start offset to
// Offset (-1 means the high watermark); an offset above the high watermark
// is OFFSET_OUT_OF_RANGE. Whole segments below the new start are deleted.

import (
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
				if err == nil && off > p.LogStartOffset() {
					err = p.AdvanceLogStart(off)
				}
				if err == nil {
					sp.LowWatermark = p.LogStartOffset()
				}
			}
			sp.ErrorCode = code(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}
