package handler

// CreateTopics, versions 0-7.
//
// NumPartitions/ReplicationFactor of -1 take num.partitions and
// default.replication.factor (KIP-464). A manual ReplicaAssignment must name
// known brokers. Configs are validated by name, type and range
// (INVALID_CONFIG); ValidateOnly checks without creating. v5+ responses echo
// the partitions, replication factor and effective configs.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) createTopics(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		err := h.createTopic(&rt, seen[rt.Topic] > 1, req.ValidateOnly)
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
