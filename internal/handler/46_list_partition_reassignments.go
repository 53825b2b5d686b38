package handler

// ListPartitionReassignments, version 0 (KIP-455): the partitions with a
// reassignment in progress, from this broker's committed metadata image,
// with their replicas (the target followed by the replicas being
// removed), adding and removing replicas. Null topics list every
// partition; unknown topics and partitions named in the request are left
// out, as Kafka's ReplicationControlManager.listPartitionReassignments
// does.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) listPartitionReassignments(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !h.allowedCluster(r, acl.OpDescribe) { // Kafka: DESCRIBE on the cluster
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	}
	im := h.b.Image()
	add := func(t *metadata.Topic, parts []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		for _, i := range parts {
			if i < 0 || int(i) >= len(t.Partitions) || !t.Partitions[i].Reassigning() {
				continue
			}
			p := &t.Partitions[i]
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = p.Index
			sp.Replicas = append([]int32{}, p.Replicas...)
			sp.AddingReplicas = append([]int32{}, p.AddingReplicas...)
			sp.RemovingReplicas = append([]int32{}, p.RemovingReplicas...)
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Topics == nil {
		for _, name := range im.TopicNames() {
			t := im.Topics[name]
			all := make([]int32, len(t.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
		return protocol.Reply{Resp: resp}
	}
	for _, rt := range req.Topics {
		if t := im.Topics[rt.Topic]; t != nil {
			add(t, rt.Partitions)
		}
	}
	return protocol.Reply{Resp: resp}
}
