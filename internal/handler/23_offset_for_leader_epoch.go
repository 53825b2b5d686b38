package handler

// OffsetForLeaderEpoch, versions 0-4 (KIP-101, KIP-279, KIP-320).
//
// For each partition, the largest epoch <= the requested one and the offset
// where it ends, from the leader-epoch cache (docs/kafka-replication.md §3.3). A
// CurrentLeaderEpoch (v2+) that does not match is fenced.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) offsetForLeaderEpoch(r *protocol.Request) protocol.Reply {
	lookup := h.b.LookupDeadline()
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// A follower needs CLUSTER_ACTION on the cluster, a consumer DESCRIBE
	// on each topic (KafkaApis.handleOffsetForLeaderEpochRequest).
	follower := req.ReplicaID >= 0
	clusterOK := !follower || h.allowedCluster(r, acl.OpClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		var denied error
		switch {
		case !clusterOK:
			denied = kerr.ClusterAuthorizationFailed
		case !follower && !h.allowedTopic(r, rt.Topic, acl.OpDescribe):
			denied = kerr.TopicAuthorizationFailed
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if denied != nil {
				sp.ErrorCode = code(denied)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := h.b.PartitionBy(rt.Topic, rp.Partition, lookup)
			if err == nil && req.ReplicaID < 0 && !p.IsLeader() {
				err = kerr.NotLeaderForPartition
			}
			switch {
			case err != nil:
				sp.ErrorCode = code(err)
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.LeaderEpoch():
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.CurrentLeaderEpoch > p.LeaderEpoch():
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			default:
				sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}
