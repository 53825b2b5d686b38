package handler

// CreatePartitions, versions 0-3. Grows a topic to Count partitions
// (INVALID_PARTITIONS if that is not an increase). An explicit Assignment
// gives each new partition's replicas and is honoured in its order, the
// first replica the preferred leader; the controller validates it as
// Kafka's ReplicationControlManager.createPartitions does (one list per
// new partition, each of the topic's replication factor, of registered
// brokers, without duplicates, and with an active broker:
// INVALID_REPLICA_ASSIGNMENT; metadata.AssignedPartitions). A topic named
// twice in one request gets INVALID_REQUEST ("Duplicate topic name.", as
// from Kafka's ControllerApis) and is not changed. ValidateOnly checks
// without changing anything.
//
// A request adding more than metadata.MaxPartitionsPerRequest (10,000)
// partitions over all its topics is refused whole with POLICY_VIOLATION
// (KAFKA-19673 applies ReplicationControlManager's CreateTopics bound to
// CreatePartitions); max.broker.partitions and max.partitions (KIP-578)
// are checked by the controller.

import (
	"fmt"

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
	seen, answered := map[string]int{}, map[string]bool{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case seen[rt.Topic] > 1:
			if answered[rt.Topic] {
				continue // one result per duplicated name
			}
			answered[rt.Topic] = true
			err = fmt.Errorf("%w: Duplicate topic name.", kerr.InvalidRequest)
		case !h.allowedTopic(r, rt.Topic, acl.OpAlter):
			// ALTER on the topic (KafkaApis.handleCreatePartitionsRequest).
			err = kerr.TopicAuthorizationFailed
		default:
			var assignment [][]int32
			if rt.Assignment != nil {
				// Kept even when empty: too few lists is an error.
				assignment = make([][]int32, len(rt.Assignment))
				for i, a := range rt.Assignment {
					assignment[i] = a.Replicas
				}
			}
			err = h.b.CreatePartitions(rt.Topic, rt.Count, assignment, req.ValidateOnly)
		}
		st.ErrorCode = code(err)
		st.ErrorMessage = message(err)
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}
