package handler

// DeleteShareGroupState, version 0 (KIP-932): a share group coordinator
// removes a share partition's state (DeleteGroups of a share group,
// DeleteShareGroupOffsets, a topic no longer subscribed). Only brokers
// send it: CLUSTER_ACTION on the cluster. The share coordinator writes a
// tombstone for the share partition's snapshot and update keys and
// answers once they are committed; a share partition without state is
// answered at once. Errors as InitializeShareGroupState.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) deleteShareGroupState(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	allowed := s.h.allowedCluster(r, acl.OpClusterAction)
	type job struct {
		key  share.Key
		slot *kmsg.DeleteShareGroupStateResponseTopicPartition
	}
	var jobs []job
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.DeleteShareGroupStateResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi]
			*slot = kmsg.NewDeleteShareGroupStateResponseTopicPartition()
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
			jobs = append(jobs, job{key, slot})
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
			err := s.c.Delete(ctx, j.key)
			j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
		})
		return resp
	}}
}
