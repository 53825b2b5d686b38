package handler

// OffsetCommit v10 and OffsetFetch v10 (KIP-848's last versions): topics
// are named by id. The request's ids are resolved to names against the
// broker's metadata image before the name-based paths run; an id the
// image does not have answers UNKNOWN_TOPIC_ID for each of its
// partitions (OffsetFetch: with offset -1), as Kafka's KafkaApis
// (handleOffsetCommitRequest / handleOffsetFetchRequest with topic ids).
// The answers carry each topic's id; when every committed offset of a
// group is fetched, a topic that no longer exists has no id and is left
// out.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// topicIDs maps topic names to ids and back, from one image.
type topicIDs struct{ img *metadata.Image }

func (t topicIDs) name(id [16]byte) (string, bool) {
	if tp := t.img.TopicByID(metadata.UUID(id)); tp != nil {
		return tp.Name, true
	}
	return "", false
}

func (t topicIDs) id(name string) ([16]byte, bool) {
	if tp, ok := t.img.Topics[name]; ok {
		return [16]byte(tp.ID), true
	}
	return [16]byte{}, false
}

// offsetCommitIDs serves OffsetCommit, resolving v10's topic ids.
func (g *groupAPI) offsetCommitIDs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	if req.Version < 10 {
		return g.offsetCommitAuthz(r)
	}
	ids := topicIDs{g.h.b.Image()}
	var unknown []kmsg.OffsetCommitResponseTopic
	var kept []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if name, ok := ids.name(t.TopicID); ok {
			t.Topic = name
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.UnknownTopicID.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		unknown = append(unknown, rt)
	}
	fill := func(resp kmsg.Response) kmsg.Response {
		oc := resp.(*kmsg.OffsetCommitResponse)
		for i := range oc.Topics {
			if id, ok := ids.id(oc.Topics[i].Topic); ok {
				oc.Topics[i].TopicID = id
			}
		}
		oc.Topics = append(oc.Topics, unknown...)
		return oc
	}
	if len(kept) == 0 {
		return protocol.Reply{Resp: fill(req.ResponseKind())}
	}
	req.Topics = kept
	rep := g.offsetCommitAuthz(r)
	if rep.Await != nil {
		wait := rep.Await
		rep.Await = func() kmsg.Response { return fill(wait()) }
		return rep
	}
	rep.Resp = fill(rep.Resp)
	return rep
}

// offsetFetchIDs serves OffsetFetch, resolving v10's topic ids.
func (g *groupAPI) offsetFetchIDs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	if req.Version < 10 {
		return g.offsetFetchAuthz(r)
	}
	ids := topicIDs{g.h.b.Image()}
	// unknown[group index] are the topics of the group with unknown ids.
	unknown := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
	for i := range req.Groups {
		rg := &req.Groups[i]
		if rg.Topics == nil {
			continue
		}
		var kept []kmsg.OffsetFetchRequestGroupTopic
		for _, t := range rg.Topics {
			if name, ok := ids.name(t.TopicID); ok {
				t.Topic = name
				kept = append(kept, t)
				continue
			}
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.UnknownTopicID.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			unknown[rg.Group] = append(unknown[rg.Group], rt)
		}
		if kept == nil {
			kept = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		rg.Topics = kept
	}
	withIDs := func(resp kmsg.Response) kmsg.Response {
		fr := resp.(*kmsg.OffsetFetchResponse)
		for i := range fr.Groups {
			rg := &fr.Groups[i]
			topics := rg.Topics[:0]
			for _, t := range rg.Topics {
				id, ok := ids.id(t.Topic)
				if !ok {
					continue
				}
				t.TopicID = id
				topics = append(topics, t)
			}
			rg.Topics = append(topics, unknown[rg.Group]...)
		}
		return fr
	}
	rep := g.offsetFetchAuthz(r)
	if rep.Await != nil {
		// The answer waits for the group's committed state.
		wait := rep.Await
		rep.Await = func() kmsg.Response { return withIDs(wait()) }
		return rep
	}
	rep.Resp = withIDs(rep.Resp)
	return rep
}
