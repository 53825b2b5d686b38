package handler

// DescribeTopicPartitions, version 0 (KIP-966; Kafka's
// DescribeTopicPartitionsRequestHandler): the topics' partitions with
// their leader, epochs, replicas, ISR, eligible leader replicas and last
// known ELR, paginated. The topics asked for (every topic the client may
// describe when none is named) are taken in name order, starting at the
// cursor's topic and partition; at most ResponsePartitionLimit partitions
// (capped at Kafka's max.request.partition.size.limit default, 2000) are
// returned, and NextCursor names the first partition left out, if any. A
// topic named but unknown is UNKNOWN_TOPIC_OR_PARTITION and one the
// client may not describe TOPIC_AUTHORIZATION_FAILED; a cursor whose topic
// is not among those asked for gives every topic INVALID_REQUEST.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// maxDescribePartitions is Kafka's max.request.partition.size.limit
// default: the most partitions one DescribeTopicPartitions answers.
const maxDescribePartitions = 2000

func (h *Handlers) describeTopicPartitions(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := h.b.Image()
	var names []string
	if len(req.Topics) == 0 {
		for _, n := range img.TopicNames() {
			if h.allowedTopic(r, n, acl.OpDescribe) {
				names = append(names, n)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, t := range req.Topics {
			if !seen[t.Topic] {
				seen[t.Topic] = true
				names = append(names, t.Topic)
			}
		}
		sort.Strings(names)
	}
	start, first := 0, int32(0)
	if c := req.Cursor; c != nil {
		i := sort.SearchStrings(names, c.Topic)
		if i == len(names) || names[i] != c.Topic || c.Partition < 0 {
			// Kafka: "cursor topic must be included in the topic list";
			// its error response gives every topic asked for the error
			// (DescribeTopicPartitionsRequest.getErrorResponse).
			for _, n := range names {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), kerr.InvalidRequest.Code
				resp.Topics = append(resp.Topics, rt)
			}
			return protocol.Reply{Resp: resp}
		}
		start, first = i, c.Partition
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribePartitions {
		limit = maxDescribePartitions
	}
	left := limit
	for i := start; i < len(names); i++ {
		name := names[i]
		if left == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = &name
		t := img.Topics[name]
		switch {
		case !h.allowedTopic(r, name, acl.OpDescribe):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t == nil:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			rt.TopicID = t.ID
			rt.IsInternal = isInternal(name)
			rt.AuthorizedOperations = h.authorizedOps(r, acl.ResourceTopic, name, topicOps)
			from := int32(0)
			if i == start {
				from = first
			}
			for j := from; int(j) < len(t.Partitions); j++ {
				if left == 0 {
					resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: j}
					break
				}
				rt.Partitions = append(rt.Partitions, describePartition(img, &t.Partitions[j]))
				left--
			}
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return protocol.Reply{Resp: resp}
}

// describePartition is one partition of a DescribeTopicPartitions answer;
// replicas on fenced or unregistered brokers are offline, as in Metadata.
func describePartition(img *metadata.Image, p *metadata.Partition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	rp.Partition, rp.LeaderID, rp.LeaderEpoch = p.Index, p.Leader, p.LeaderEpoch
	rp.Replicas = append([]int32{}, p.Replicas...)
	rp.ISR = append([]int32{}, p.ISR...)
	rp.EligibleLeaderReplicas = append([]int32{}, p.ELR...)
	rp.LastKnownELR = append([]int32{}, p.LastKnownELR...)
	rp.OfflineReplicas = []int32{}
	for _, id := range p.Replicas {
		if br, ok := img.Brokers[id]; !ok || br.Fenced {
			rp.OfflineReplicas = append(rp.OfflineReplicas, id)
		}
	}
	return rp
}
