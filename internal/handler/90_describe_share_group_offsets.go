package handler

// DescribeShareGroupOffsets, versions 0-1 (KIP-932; v1 adds Lag,
// KIP-1226): each share partition's start offset, read from its share
// coordinator (ReadShareGroupStateSummary through the Persister). A group
// needs DESCRIBE on the GROUP (else GROUP_AUTHORIZATION_FAILED for the
// group), a topic DESCRIBE on the TOPIC (else TOPIC_AUTHORIZATION_FAILED
// for its partitions), as Kafka's KafkaApis.handleDescribeShareGroupOffsetsRequest.
// A group without Topics describes every topic partition that has share
// state for it (every topic of the metadata is looked at). Unknown topics
// and partitions are UNKNOWN_TOPIC_OR_PARTITION; a partition without state
// has start offset -1. Lag is the records from the start offset to the
// high watermark this node knows (its local replica's) less those
// already acknowledged or archived above the start offset; -1 when
// unknown. A node that is not the group's coordinator answers the group
// NOT_COORDINATOR, as Kafka's GroupCoordinatorService does, so that the
// client finds the coordinator again.

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) describeShareGroupOffsets(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	img := s.h.b.Image()
	type job struct {
		key  share.Key
		all  bool // from a group without Topics: dropped if without state
		slot *kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition
	}
	var jobs []job
	resp.Groups = make([]kmsg.DescribeShareGroupOffsetsResponseGroup, len(req.Groups))
	for gi, g := range req.Groups {
		rg := &resp.Groups[gi]
		*rg = kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if !s.h.allowedGroup(r, g.GroupID, acl.OpDescribe) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if _, exists, err := s.group(g.GroupID); err != nil {
			rg.ErrorCode, rg.ErrorMessage = err.Code, &err.Message
			continue
		} else if !exists {
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			continue
		}
		topics := g.Topics
		all := topics == nil
		if all {
			for _, name := range img.TopicNames() {
				t := img.Topics[name]
				if strings.HasPrefix(name, "__") || !s.h.allowedTopic(r, name, acl.OpDescribe) {
					continue
				}
				rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
				rt.Topic = name
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, p.Index)
				}
				topics = append(topics, rt)
			}
		}
		rg.Topics = make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, len(topics))
		for ti, t := range topics {
			rt := &rg.Topics[ti]
			*rt = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			mt := img.Topics[t.Topic]
			if mt != nil {
				rt.TopicID = mt.ID
			}
			topicOK := s.h.allowedTopic(r, t.Topic, acl.OpDescribe)
			rt.Partitions = make([]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, len(t.Partitions))
			for pi, p := range t.Partitions {
				rp := &rt.Partitions[pi]
				*rp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				switch {
				case !topicOK:
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case mt == nil || p < 0 || int(p) >= len(mt.Partitions):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					jobs = append(jobs, job{share.Key{Group: g.GroupID, TopicID: mt.ID, Partition: p}, all, rp})
				}
			}
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
			sum, err := s.p.ReadSummary(ctx, j.key)
			if err != nil {
				j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
				return
			}
			j.slot.StartOffset, j.slot.LeaderEpoch = sum.StartOffset, sum.LeaderEpoch
			j.slot.Lag = s.lag(j.key, sum)
		})
		for gi := range resp.Groups {
			dropUnset(&resp.Groups[gi], req.Groups[gi].Topics == nil)
		}
		return resp
	}}
}

// dropUnset removes, from a group described for all topics, the
// partitions without share state and the topics left without partitions.
func dropUnset(rg *kmsg.DescribeShareGroupOffsetsResponseGroup, all bool) {
	if !all {
		return
	}
	topics := rg.Topics[:0]
	for _, t := range rg.Topics {
		ps := t.Partitions[:0]
		for _, p := range t.Partitions {
			if p.StartOffset >= 0 || p.ErrorCode != 0 {
				ps = append(ps, p)
			}
		}
		if t.Partitions = ps; len(ps) > 0 {
			topics = append(topics, t)
		}
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	rg.Topics = topics
}

// lag is the share partition's records not yet delivered to completion:
// from its start offset to the local replica's high watermark, less the
// ones acknowledged or archived above the start offset; -1 if unknown.
func (s *shareStateAPI) lag(key share.Key, sum share.Summary) int64 {
	if sum.StartOffset < 0 || sum.DeliveryCompleteCount < 0 {
		return -1
	}
	t := s.h.b.Image().TopicByID(key.TopicID)
	if t == nil {
		return -1
	}
	p, err := s.h.b.Partition(t.Name, key.Partition)
	if err != nil {
		return -1
	}
	return max(p.HighWatermark()-sum.StartOffset-int64(sum.DeliveryCompleteCount), 0)
}
