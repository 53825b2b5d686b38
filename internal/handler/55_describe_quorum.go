package handler

// DescribeQuorum, versions 0-2 (KIP-595; v1 the fetch timestamps, v2
// KIP-853's directory ids and the voters' listeners; Kafka forwards it from
// a broker to the controller quorum): the metadata quorum as the active
// controller sees it. The one partition is __cluster_metadata-0 (Kafka's
// name for the metadata log); any other is UNKNOWN_TOPIC_OR_PARTITION.
// LeaderEpoch is the raft term, HighWatermark the commit index,
// LogEndOffset each member's last raft index (-1 if it did not answer);
// the fetch timestamps are -1 and directory ids zero (sluice keeps
// neither). Observers are non-voting raft members and registered brokers
// that are not voters. Needs DESCRIBE on the cluster. Without --voters
// (a single-node store) the node reports itself as the only voter.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// metadataTopic is KRaft's metadata log, the partition DescribeQuorum and
// the raft APIs name.
const metadataTopic = "__cluster_metadata"

func (h *Handlers) describeQuorum(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	authorized := h.allowedCluster(r, acl.OpDescribe) // Kafka: DESCRIBE on the cluster
	qc, ok := h.b.Controller().(metadata.QuorumController)
	return protocol.Reply{Await: func() kmsg.Response {
		if !authorized {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp
		}
		var q metadata.QuorumInfo
		var err error
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout(0))
			q, err = qc.DescribeQuorum(ctx)
			cancel()
		} else {
			q = metadata.QuorumInfo{LeaderID: h.b.NodeID(), HighWatermark: h.b.Image().Offset,
				Voters: []metadata.QuorumMember{{ID: h.b.NodeID(), LogEndOffset: h.b.Image().Offset}}}
		}
		if err != nil {
			resp.ErrorCode = code(err)
			if req.Version >= 2 {
				resp.ErrorMessage = message(err)
			}
			return resp
		}
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeQuorumResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDescribeQuorumResponseTopicPartition()
				sp.Partition = rp.Partition
				if rt.Topic != metadataTopic || rp.Partition != 0 {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					st.Partitions = append(st.Partitions, sp)
					continue
				}
				sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = q.LeaderID, q.LeaderEpoch, q.HighWatermark
				sp.CurrentVoters = replicaStates(q.Voters)
				sp.Observers = replicaStates(q.Observers)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if req.Version >= 2 {
			for _, v := range q.Voters {
				host, port, err := net.SplitHostPort(v.Addr)
				p, perr := strconv.ParseUint(port, 10, 16)
				if err != nil || perr != nil {
					continue
				}
				n := kmsg.NewDescribeQuorumResponseNode()
				n.NodeID = v.ID
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(p)
				n.Listeners = append(n.Listeners, l)
				resp.Nodes = append(resp.Nodes, n)
			}
		}
		return resp
	}}
}

func replicaStates(ms []metadata.QuorumMember) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(ms))
	for _, m := range ms {
		rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		rs.ReplicaID, rs.LogEndOffset = m.ID, m.LogEndOffset
		rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = -1, -1
		out = append(out, rs)
	}
	return out
}
