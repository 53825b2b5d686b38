package handler

// InitializeShareGroupState, version 0 (KIP-932): a share group
// coordinator asks the share coordinator to set a share partition's state
// to an empty one at a start offset and state epoch (a new share
// partition, or AlterShareGroupOffsets re-initializing it). Only brokers
// send it: CLUSTER_ACTION on the cluster. Per partition: NOT_COORDINATOR
// (the key's __share_group_state partition is led elsewhere),
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// FENCED_STATE_EPOCH (the state has a newer epoch), INVALID_REQUEST. An
// answer without error means the state is committed in
// __share_group_state.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) initializeShareGroupState(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	allowed := s.h.allowedCluster(r, acl.OpClusterAction)
	type job struct {
		key   share.Key
		epoch int32
		start int64
		slot  *kmsg.InitializeShareGroupStateResponseTopicPartition
	}
	var jobs []job
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.InitializeShareGroupStateResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi]
			*slot = kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			slot.Partition = p.Partition
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
			jobs = append(jobs, job{key, p.StateEpoch, p.StartOffset, slot})
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
			err := s.c.Initialize(ctx, j.key, j.epoch, j.start)
			j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
		})
		return resp
	}}
}
