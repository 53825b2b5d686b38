package handler

// WriteShareGroupState, versions 0-1 (KIP-932; v1 adds
// DeliveryCompleteCount, KIP-1226): a share partition's leader writes the
// start offset and the state batches that changed. Only brokers send it:
// CLUSTER_ACTION on the cluster. The batches are merged into the stored
// state (share.Combine, Kafka's PersisterStateBatchCombiner); the answer
// comes once the record is committed in __share_group_state. Per
// partition: FENCED_LEADER_EPOCH (an older leader epoch than the state's),
// FENCED_STATE_EPOCH (an older state epoch), INVALID_REQUEST (a batch
// whose last offset is before its first, a delivery state other than 0,
// 2, 3 (Archiving, KIP-1191) or 4, a negative delivery count), UNKNOWN_TOPIC_OR_PARTITION (a topic
// partition not in the metadata), and the coordinator errors of
// InitializeShareGroupState.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

// maxStateBatches bounds the state batches of one partition in a write.
const maxStateBatches = 100000

func (s *shareStateAPI) writeShareGroupState(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	allowed := s.h.allowedCluster(r, acl.OpClusterAction)
	type job struct {
		key  share.Key
		st   share.State
		slot *kmsg.WriteShareGroupStateResponseTopicPartition
	}
	var jobs []job
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.WriteShareGroupStateResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi]
			*slot = kmsg.NewWriteShareGroupStateResponseTopicPartition()
			slot.Partition = p.Partition
			key := share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			st := share.State{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset, DeliveryCompleteCount: -1}
			if req.Version >= 1 {
				st.DeliveryCompleteCount = p.DeliveryCompleteCount
			}
			var err *kerr.Error
			switch {
			case !allowed:
				err = kerr.ClusterAuthorizationFailed
			case n > maxShareStatePartitions || len(p.StateBatches) > maxStateBatches:
				err = kerr.InvalidRequest
			default:
				err = stateKeyError(key)
			}
			for _, b := range p.StateBatches {
				if err != nil {
					break
				}
				if b.LastOffset < b.FirstOffset || b.FirstOffset < 0 || b.DeliveryCount < 0 ||
					(b.DeliveryState != share.StateAvailable && b.DeliveryState != share.StateAcknowledged && b.DeliveryState != share.StateArchiving && b.DeliveryState != share.StateArchived) {
					err = kerr.InvalidRequest
					break
				}
				st.Batches = append(st.Batches, share.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
					DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
			}
			if err != nil {
				slot.ErrorCode, slot.ErrorMessage = err.Code, &err.Message
				continue
			}
			jobs = append(jobs, job{key, st, slot})
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
			err := s.c.Write(ctx, j.key, j.st)
			j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
		})
		return resp
	}}
}
