package handler

// ReadShareGroupStateSummary, versions 0-1 (KIP-932; v1 adds
// DeliveryCompleteCount, KIP-1226): the share group coordinator reads a
// share partition's state epoch, leader epoch and start offset
// (DescribeShareGroupOffsets). Only brokers send it: CLUSTER_ACTION on
// the cluster. Nothing is fenced or recorded; the answer is the
// committed state. Errors as InitializeShareGroupState.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) readShareGroupStateSummary(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	allowed := s.h.allowedCluster(r, acl.OpClusterAction)
	type job struct {
		key  share.Key
		slot *kmsg.ReadShareGroupStateSummaryResponseTopicPartition
	}
	var jobs []job
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		rt.Partitions = make([]kmsg.ReadShareGroupStateSummaryResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			slot := &resp.Topics[ti].Partitions[pi]
			*slot = kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			slot.Partition, slot.StartOffset, slot.LeaderEpoch, slot.DeliveryCompleteCount = p.Partition, -1, -1, -1
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
			sum, err := s.c.ReadSummary(ctx, j.key)
			if err != nil {
				j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
				return
			}
			j.slot.StateEpoch, j.slot.LeaderEpoch, j.slot.StartOffset = sum.StateEpoch, sum.LeaderEpoch, sum.StartOffset
			j.slot.DeliveryCompleteCount = sum.DeliveryCompleteCount
		})
		return resp
	}}
}
