package handler

// AlterShareGroupOffsets, version 0 (KIP-932): set the start offsets of
// an empty share group's share partitions (kafka-share-groups.sh
// --reset-offsets). READ on the GROUP (else GROUP_AUTHORIZATION_FAILED for
// the request), READ on each TOPIC (else TOPIC_AUTHORIZATION_FAILED for its
// partitions), as Kafka's KafkaApis.handleAlterShareGroupOffsetsRequest. A
// group with members is NON_EMPTY_GROUP; a group that does not exist yet
// gets its share state all the same (Kafka creates the share group). Each
// partition's state is initialized again at its new start offset with
// the next state epoch (InitializeShareGroupState through the Persister),
// which fences any write from the share partition's previous load.
// Unknown topics or partitions, and negative offsets, are
// UNKNOWN_TOPIC_OR_PARTITION and INVALID_REQUEST. A node that is not the
// group's coordinator answers NOT_COORDINATOR.

import (
	sharegroup "github.com/sluice-io/sluice/internal/group/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (s *shareStateAPI) alterShareGroupOffsets(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	img := s.h.b.Image()
	groupErr := func() *kerr.Error {
		if !s.h.allowedGroup(r, req.GroupID, acl.OpRead) {
			return kerr.GroupAuthorizationFailed
		}
		empty, _, err := s.group(req.GroupID)
		if err != nil {
			return err
		}
		if !empty {
			return kerr.NonEmptyGroup
		}
		return nil
	}()
	if groupErr != nil {
		resp.ErrorCode, resp.ErrorMessage = groupErr.Code, &groupErr.Message
	}
	type job struct {
		key   share.Key
		topic string
		start int64
		slot  *kmsg.AlterShareGroupOffsetsResponseTopicPartition
	}
	var jobs []job
	resp.Topics = make([]kmsg.AlterShareGroupOffsetsResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		*rt = kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		mt := img.Topics[t.Topic]
		if mt != nil {
			rt.TopicID = mt.ID
		}
		topicOK := s.h.allowedTopic(r, t.Topic, acl.OpRead)
		rt.Partitions = make([]kmsg.AlterShareGroupOffsetsResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			var err *kerr.Error
			switch {
			case groupErr != nil:
				err = groupErr
			case !topicOK:
				err = kerr.TopicAuthorizationFailed
			case mt == nil || p.Partition < 0 || int(p.Partition) >= len(mt.Partitions):
				err = kerr.UnknownTopicOrPartition
			case p.StartOffset < 0 || req.GroupID == "":
				err = kerr.InvalidRequest
			}
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = err.Code, &err.Message
				continue
			}
			jobs = append(jobs, job{share.Key{Group: req.GroupID, TopicID: mt.ID, Partition: p.Partition}, t.Topic, p.StartOffset, rp})
		}
	}
	if len(jobs) == 0 {
		return protocol.Reply{Resp: resp}
	}
	return protocol.Reply{Await: func() kmsg.Response {
		// The group coordinator creates the share group if needed and
		// records the partitions as initialized first, so that the group
		// describes them and a DeleteGroups deletes their state.
		parts := make([]sharegroup.SharePartition, len(jobs))
		for i, j := range jobs {
			parts[i] = sharegroup.SharePartition{TopicID: j.key.TopicID, Topic: j.topic, Partition: j.key.Partition}
		}
		if gerr := s.h.groups.EnsureShareGroup(req.GroupID, parts); gerr != nil {
			for _, j := range jobs {
				j.slot.ErrorCode, j.slot.ErrorMessage = gerr.Code, &gerr.Message
			}
			return resp
		}
		ctx, cancel := stateCtx()
		defer cancel()
		eachPartition(len(jobs), func(i int) {
			j := jobs[i]
			sum, err := s.p.ReadSummary(ctx, j.key)
			if err == nil {
				err = s.p.Initialize(ctx, j.key, sum.StateEpoch+1, j.start)
			}
			j.slot.ErrorCode, j.slot.ErrorMessage = code(err), message(err)
		})
		return resp
	}}
}
