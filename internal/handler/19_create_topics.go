package handler

// CreateTopics, versions 0-7.
//
// NumPartitions/ReplicationFactor of -1 take num.partitions and
// default.replication.factor (KIP-464). A manual ReplicaAssignment must name
// known brokers. Configs are validated by name, type and range
// (INVALID_CONFIG); ValidateOnly checks without creating. v5+ responses echo
// the partitions, replication factor and effective configs.
//
// A request creating more than metadata.MaxPartitionsPerRequest (10,000)
// partitions over all its topics is refused whole, before anything is
// placed: every topic gets POLICY_VIOLATION "Excessively large number of
// partitions per request" (Kafka's
// ReplicationControlManager.validateTotalNumberOfPartitions, KAFKA-17870).
// max.broker.partitions and max.partitions (KIP-578) are checked by the
// controller per topic, with POLICY_VIOLATION and a message naming the limit.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) createTopics(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	if total := h.requestPartitions(req); total > metadata.MaxPartitionsPerRequest {
		err := metadata.ErrTooManyPartitionsPerRequest(total)
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode, st.ErrorMessage = code(err), message(err)
			resp.Topics = append(resp.Topics, st)
		}
		return protocol.Reply{Resp: resp}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if !h.allowedCluster(r, acl.OpCreate) && !h.allowedTopic(r, rt.Topic, acl.OpCreate) {
			// CREATE on the cluster or the topic (KafkaApis.handleCreateTopicsRequest).
			err = kerr.TopicAuthorizationFailed
		} else {
			err = h.createTopic(&rt, seen[rt.Topic] > 1, req.ValidateOnly)
		}
		st.ErrorCode = code(err)
		st.ErrorMessage = message(err)
		if err == nil {
			img := h.b.Image()
			if t := img.Topics[rt.Topic]; t != nil {
				st.TopicID = t.ID
				st.NumPartitions = int32(len(t.Partitions))
				st.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
				st.Configs = describeTopicConfigs(h.b, t, nil, false)
			} else { // validate only
				st.NumPartitions, st.ReplicationFactor = rt.NumPartitions, rt.ReplicationFactor
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}

// requestPartitions counts the partitions a CreateTopics request asks for
// (num.partitions for -1, the assignments' count if given).
func (h *Handlers) requestPartitions(req *kmsg.CreateTopicsRequest) int64 {
	var total int64
	for _, rt := range req.Topics {
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += h.b.Config().Int("num.partitions", 1)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	return total
}

func (h *Handlers) createTopic(rt *kmsg.CreateTopicsRequestTopic, duplicate, validateOnly bool) error {
	if duplicate {
		return errors.Join(kerr.InvalidRequest, errors.New("topic listed more than once"))
	}
	partitions, rf := rt.NumPartitions, rt.ReplicationFactor
	var assignment [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 || rf != -1 {
			return kerr.InvalidRequest
		}
		img := h.b.Image()
		partitions = int32(len(rt.ReplicaAssignment))
		rf = int16(len(rt.ReplicaAssignment[0].Replicas))
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) || len(a.Replicas) != int(rf) {
				return kerr.InvalidReplicaAssignment
			}
			seen := map[int32]bool{}
			for _, id := range a.Replicas {
				if _, ok := img.Brokers[id]; !ok || seen[id] {
					return kerr.InvalidReplicaAssignment
				}
				seen[id] = true
			}
			assignment = append(assignment, a.Replicas)
		}
		partitions, rf = -1, -1
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			continue
		}
		configs[c.Name] = *c.Value
	}
	return h.b.CreateTopicAssigned(rt.Topic, partitions, rf, assignment, configs, validateOnly)
}
