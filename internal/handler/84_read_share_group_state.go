package handler

// ReadShareGroupState, version 0 (KIP-932): a share partition's leader
// reads its durable state when it loads the share partition. Only
// brokers send it: CLUSTER_ACTION on the cluster. The reader's leader
// epoch is recorded (committed before the answer) so that later writes
// from an older leader are fenced; a read with an older leader epoch than
// the recorded one gets FENCED_LEADER_EPOCH (Kafka's
// ShareCoordinatorShard). A share partition never initialized reads as
// start offset -1, state epoch 0. A topic partition not in the metadata
// is UNKNOWN_TOPIC_OR_PARTITION. Other errors as InitializeShareGroupState.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) readShareGroupState(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	allowed := s.h.allowedCluster(r, acl.OpClusterAction)
	type job struct {
		key   share.Key
		epoch int32
		slot  *kmsg.ReadShareGroupStateResponseTopicPartition
	}
	var jobs []job
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.ReadShareGroupStateResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi]
			*slot = kmsg.NewReadShareGroupStateResponseTopicPartition()
			slot.Partition, slot.StartOffset = p.Partition, -1
			key := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			var err *kerr.Error
			switch {
			case !allowed:
				err = kerr.ClusterAuthorizationFailed
			case n > maxShareStatePartitions:
				err = kerr.InvalidRequest
			default:
				err = stateKeyError(key)
			}
			if err != nil {
				slot.ErrorCode, slot.ErrorMessage = err.Code, &err.Message
				continue
			}
			jobs = append(jobs, job{key, p.LeaderEpoch, slot})
		}
	}
	if len(jobs) == 0 {
		return protocol.Reply{Resp: resp}
	}
	return protocol.Reply{Await: func() kmsg.Response {
		ctx, cancel := stateCtx()
		defer cancel()
		eachPartition(len(jobs), func(i int) {
			j := jobs[i]
			st, err := s.c.Read(ctx, j.key, j.epoch)
			if err != nil {
				j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
				return
			}
			j.slot.StateEpoch, j.slot.StartOffset = st.StateEpoch, st.StartOffset
			for _, b := range st.Batches {
				sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
				sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
				j.slot.StateBatches = append(j.slot.StateBatches, sb)
			}
		})
		return resp
	}}
}
