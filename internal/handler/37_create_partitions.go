package handler

// CreatePartitions, versions 0-3. Grows a topic to Count partitions
// (INVALID_PARTITIONS if that is not an increase); explicit assignments must
// name known brokers. ValidateOnly checks without changing anything.
//
// A request adding more than metadata.MaxPartitionsPerRequest (10,000)
// partitions over all its topics is refused whole with POLICY_VIOLATION
// (KAFKA-19673 applies ReplicationControlManager's CreateTopics bound to
// CreatePartitions); max.broker.partitions and max.partitions (KIP-578)
// are checked by the controller.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) createPartitions(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	img := h.b.Image()
	var total int64
	for _, rt := range req.Topics {
		if t := img.Topics[rt.Topic]; t != nil && rt.Count > int32(len(t.Partitions)) {
			total += int64(rt.Count) - int64(len(t.Partitions))
		}
	}
	if total > metadata.MaxPartitionsPerRequest {
		err := metadata.ErrTooManyPartitionsPerRequest(total)
		for _, rt := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode, st.ErrorMessage = code(err), message(err)
			resp.Topics = append(resp.Topics, st)
		}
		return protocol.Reply{Resp: resp}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if !h.allowedTopic(r, rt.Topic, acl.OpAlter) {
			// ALTER on the topic (KafkaApis.handleCreatePartitionsRequest).
			err = kerr.TopicAuthorizationFailed
		}
		for _, a := range rt.Assignment {
			for _, id := range a.Replicas {
				if _, ok := img.Brokers[id]; !ok && err == nil {
					err = kerr.InvalidReplicaAssignment
				}
			}
		}
		if err == nil {
			err = h.b.CreatePartitions(rt.Topic, rt.Count, req.ValidateOnly)
		}
		st.ErrorCode = code(err)
		st.ErrorMessage = message(err)
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}
