package handler

// AlterPartitionReassignments, version 0 (KIP-455; v1's
// AllowReplicationFactorChange, KIP-860, is not served: a reassignment may
// change the replication factor). Each partition's Replicas start or
// replace its reassignment; null Replicas cancel it
// (NO_REASSIGNMENT_IN_PROGRESS if none is). Targets are checked like
// Kafka's ReplicationControlManager.validateManualPartitionAssignment:
// INVALID_REPLICA_ASSIGNMENT for an empty list, a broker twice or a
// broker not registered; UNKNOWN_TOPIC_OR_PARTITION for an unknown
// partition. The controller commits the valid ones together; the
// response comes after the commit, not after the data has moved
// (ListPartitionReassignments shows the progress; internal/controller
// reassign.go has the whole life of a reassignment).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) alterPartitionReassignments(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	var items []metadata.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			items = append(items, metadata.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	ra, ok := h.b.Controller().(metadata.Reassigner)
	authorized := h.allowedCluster(r, acl.OpAlter) // Kafka: ALTER on the cluster
	return protocol.Reply{Await: func() kmsg.Response {
		var results []metadata.PartitionResult
		var err error
		if !authorized {
			err = kerr.ClusterAuthorizationFailed
		} else if !ok {
			err = kerr.UnsupportedVersion
		} else if len(items) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout(req.TimeoutMillis))
			results, err = ra.AlterPartitionReassignments(ctx, items)
			cancel()
		}
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		}
		byTopic := map[string]int{}
		for i, it := range items {
			j, seen := byTopic[it.Topic]
			if !seen {
				j = len(resp.Topics)
				byTopic[it.Topic] = j
				st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
				st.Topic = it.Topic
				resp.Topics = append(resp.Topics, st)
			}
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = it.Partition
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = code(err), message(err)
			} else if res := results[i]; res.Code != 0 {
				sp.ErrorCode = res.Code
				if res.Message != "" {
					sp.ErrorMessage = kmsg.StringPtr(res.Message)
				}
			}
			resp.Topics[j].Partitions = append(resp.Topics[j].Partitions, sp)
		}
		return resp
	}}
}
