package handler

// DescribeProducers, version 0 (KIP-664): the producers a partition's
// leader tracks, with each one's epoch, last sequence and timestamp, the
// coordinator epoch of its last transaction marker and the first offset
// of its ongoing transaction (-1 if none): how an operator finds the
// producer holding back a partition's last stable offset. Needs READ on
// the topic (TOPIC_AUTHORIZATION_FAILED); a partition led elsewhere is
// NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION, as
// Kafka's KafkaApis.handleDescribeProducersRequest. At most
// broker.MaxDescribedProducers producers per partition.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) describeProducers(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	img := h.b.Image()
	lookup := h.b.LookupDeadline()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		readable := h.allowedTopic(r, rt.Topic, acl.OpRead)
		for _, part := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = part
			var err error
			switch {
			case !readable:
				err = kerr.TopicAuthorizationFailed
			case img.Topics[rt.Topic] == nil:
				err = kerr.UnknownTopicOrPartition
			default:
				p, lerr := h.b.LeaderBy(rt.Topic, part, lookup)
				if err = lerr; err == nil {
					for _, pi := range p.ActiveProducers() {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.Epoch)
						ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
						ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnStartOffset
						sp.ActiveProducers = append(sp.ActiveProducers, ap)
					}
				}
			}
			if err != nil {
				sp.ErrorCode = code(err)
				sp.ErrorMessage = message(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}
