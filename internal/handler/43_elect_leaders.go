package handler

// ElectLeaders, versions 0-2 (KIP-460; v0 is KIP-183's preferred replica
// election). The controller elects, per partition, with Kafka's
// ReplicationControlManager.electLeader rules: a preferred election makes
// the first replica leader if it is an active ISR member (ELECTION_NOT_NEEDED
// if it leads already, PREFERRED_LEADER_NOT_AVAILABLE otherwise); an
// unclean election (v1+) elects a leaderless partition's first active ISR
// member, or else its first active replica outside the ISR
// (ELECTION_NOT_NEEDED if the partition has a leader,
// ELIGIBLE_LEADERS_NOT_AVAILABLE if no replica is active). Null topics
// elect every partition, and then the partitions for which no election was
// needed are left out of the response (as Kafka does). Unknown partitions
// are UNKNOWN_TOPIC_OR_PARTITION. The request waits for the controller
// up to its TimeoutMillis (30 s if not positive).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// adminTimeout is a request's TimeoutMillis, 30 s if not positive.
func adminTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return 30 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}

func (h *Handlers) electLeaders(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	var parts []metadata.TopicPartition
	if req.Topics != nil {
		parts = []metadata.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	typ := req.ElectionType
	if req.Version == 0 {
		typ = metadata.ElectPreferred
	}
	el, ok := h.b.Controller().(metadata.LeaderElector)
	authorized := h.allowedCluster(r, acl.OpAlter) // Kafka: ALTER on the cluster
	return protocol.Reply{Await: func() kmsg.Response {
		var results []metadata.PartitionResult
		var err error
		if !authorized {
			err = kerr.ClusterAuthorizationFailed
		} else if !ok {
			err = kerr.UnsupportedVersion
		} else if typ != metadata.ElectPreferred && typ != metadata.ElectUnclean {
			err = kerr.InvalidRequest
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout(req.TimeoutMillis))
			results, err = el.ElectLeaders(ctx, typ, parts)
			cancel()
		}
		if err != nil {
			// The call as a whole failed: every partition asked for
			// carries the error (v0 has no top-level code).
			results = results[:0]
			for _, tp := range parts {
				res := metadata.PartitionResult{Topic: tp.Topic, Partition: tp.Partition, Code: code(err)}
				if m := message(err); m != nil {
					res.Message = *m
				}
				results = append(results, res)
			}
			if req.Version >= 1 && parts == nil {
				resp.ErrorCode = code(err)
			}
		}
		byTopic := map[string]int{}
		for _, res := range results {
			i, seen := byTopic[res.Topic]
			if !seen {
				i = len(resp.Topics)
				byTopic[res.Topic] = i
				st := kmsg.NewElectLeadersResponseTopic()
				st.Topic = res.Topic
				resp.Topics = append(resp.Topics, st)
			}
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = res.Partition, res.Code
			if res.Message != "" {
				sp.ErrorMessage = kmsg.StringPtr(res.Message)
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
		}
		return resp
	}}
}
