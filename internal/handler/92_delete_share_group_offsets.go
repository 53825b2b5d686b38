package handler

// DeleteShareGroupOffsets, version 0 (KIP-932): remove an empty share
// group's share state for whole topics (kafka-share-groups.sh
// --delete-offsets). DELETE on the GROUP (else GROUP_AUTHORIZATION_FAILED
// for the request), READ on each TOPIC (else TOPIC_AUTHORIZATION_FAILED
// for it), as Kafka's KafkaApis.handleDeleteShareGroupOffsetsRequest. A
// group with members is NON_EMPTY_GROUP, one that does not exist
// GROUP_ID_NOT_FOUND; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. The
// state of every partition of the topic is deleted
// (DeleteShareGroupState through the Persister); a topic's error is the
// first of its partitions'. A node that is not the group's coordinator
// answers NOT_COORDINATOR (Kafka's GroupCoordinatorService), so that the
// client finds the coordinator again.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) deleteShareGroupOffsets(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	img := s.h.b.Image()
	var groupErr *kerr.Error
	if !s.h.allowedGroup(r, req.GroupID, acl.OpDelete) {
		groupErr = kerr.GroupAuthorizationFailed
	} else if empty, exists, err := s.group(req.GroupID); err != nil {
		groupErr = err
	} else if !exists {
		groupErr = kerr.GroupIDNotFound
	} else if !empty {
		groupErr = kerr.NonEmptyGroup
	}
	if groupErr != nil {
		resp.ErrorCode, resp.ErrorMessage = groupErr.Code, &groupErr.Message
		return protocol.Reply{Resp: resp}
	}
	type job struct {
		keys []share.Key
		slot *kmsg.DeleteShareGroupOffsetsResponseTopic
	}
	var jobs []job
	resp.Topics = make([]kmsg.DeleteShareGroupOffsetsResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		*rt = kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		mt := img.Topics[t.Topic]
		var err *kerr.Error
		switch {
		case !s.h.allowedTopic(r, t.Topic, acl.OpRead):
			err = kerr.TopicAuthorizationFailed
		case mt == nil:
			err = kerr.UnknownTopicOrPartition
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = err.Code, &err.Message
			continue
		}
		rt.TopicID = mt.ID
		j := job{slot: rt}
		for _, p := range mt.Partitions {
			j.keys = append(j.keys, share.Key{Group: req.GroupID, TopicID: mt.ID, Partition: p.Index})
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return protocol.Reply{Resp: resp}
	}
	return protocol.Reply{Await: func() kmsg.Response {
		ctx, cancel := stateCtx()
		defer cancel()
		for _, j := range jobs {
			errs := make([]error, len(j.keys))
			eachPartition(len(j.keys), func(i int) { errs[i] = s.p.Delete(ctx, j.keys[i]) })
			for _, err := range errs {
				if err != nil {
					j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
					break
				}
			}
		}
		return resp
	}}
}
