package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/coord"
)

// partitionExists reports whether topic has partition p.
func (c *Coordinator) partitionExists(topic string, p int32) bool {
	t := c.b.Image().Topics[topic]
	return t != nil && p >= 0 && int(p) < len(t.Partitions)
}

// OffsetCommit serves OffsetCommit. Valid offsets are appended as one batch
// and the response waits until it is durable (acks=all); only then do the
// offsets become visible to OffsetFetch.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest) Result[*kmsg.OffsetCommitResponse] {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	setAll := func(code int16) Result[*kmsg.OffsetCommitResponse] {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return ready(resp)
	}
	if req.Group == "" {
		return setAll(kerr.InvalidGroupID.Code)
	}
	var res Result[*kmsg.OffsetCommitResponse]
	if err := c.run(req.Group, func(s *shard) { res = c.commitLocked(s, req, resp, setAll) }); err != nil {
		return setAll(err.Code)
	}
	return res
}

// commitLocked is OffsetCommit on the owner of the group's shard: the
// offsets are appended as one batch, pending in the group (undone if the
// append or its commit fails) and applied once committed.
func (c *Coordinator) commitLocked(s *shard, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse,
	setAll func(int16) Result[*kmsg.OffsetCommitResponse]) Result[*kmsg.OffsetCommitResponse] {
	now := c.clock.Now()
	g := s.State().groups[req.Group]
	// A consumer group (KIP-848) checks the member id and member epoch
	// (OffsetCommit v9+ carries the epoch as the generation id);
	// its offsets live in an Empty classic Group of the same id.
	code, isConsumer := s.State().consumers.ValidateOffsetCommit(req.Group, req.MemberID, req.Generation)
	switch {
	case isConsumer && code != 0:
		return setAll(code)
	case isConsumer && g == nil:
		if g = c.group(s, req.Group, true); g == nil {
			return setAll(kerr.CoordinatorNotAvailable.Code)
		}
	case g == nil:
		if req.Generation >= 0 {
			return setAll(kerr.IllegalGeneration.Code)
		}
		if g = c.group(s, req.Group, true); g == nil {
			return setAll(kerr.CoordinatorNotAvailable.Code)
		}
	}
	if !isConsumer {
		if code := g.ValidateCommit(now, req.Generation, req.MemberID, req.InstanceID); code != 0 {
			c.schedule(s, g)
			return setAll(code)
		}
	}
	type pendingCommit struct {
		tp   TopicPartition
		o    Offset
		slot *kmsg.OffsetCommitResponseTopicPartition
	}
	var commits []pendingCommit
	var recs []record
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			slot := &resp.Topics[i].Partitions[j]
			var md string
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			switch {
			case !c.partitionExists(rt.Topic, rp.Partition):
				slot.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case len(md) > c.cfg.MaxOffsetMetadataBytes:
				slot.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			tp := TopicPartition{rt.Topic, rp.Partition}
			o := Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md, CommitTime: now}
			commits = append(commits, pendingCommit{tp, o, slot})
			recs = append(recs, offsetRecord(g.id, tp, o))
		}
	}
	c.schedule(s, g)
	if len(recs) == 0 {
		return ready(resp)
	}
	for _, pc := range commits {
		g.beginCommit(pc.tp)
	}
	undo := func() {
		for _, pc := range commits {
			g.finishCommit(pc.tp, pc.o, false)
		}
	}
	answer := make(chan *kmsg.OffsetCommitResponse, 1)
	info, aerr := c.appendPending(s, recs, undo, func(err error) {
		if err == nil {
			for _, pc := range commits {
				g.finishCommit(pc.tp, pc.o, true)
			}
		} else {
			if err == coord.ErrNotCoordinator {
				undo() // the state is dropped; keep the counts right
			}
			for _, pc := range commits {
				pc.slot.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
		answer <- resp
	})
	if aerr != nil {
		return setAll(kerr.CoordinatorNotAvailable.Code)
	}
	for i := range commits {
		commits[i].o.logOffset = info.FirstOffset + int64(i)
	}
	return waitOn(answer)
}

// fetched is one group's answer to an OffsetFetch: its topics, or a
// group error code.
type fetched struct {
	topics []kmsg.OffsetFetchResponseTopic
	code   int16
}

// fetchGroup answers one group of an OffsetFetch: the requested partitions
// (all committed ones if topics is nil), -1 for those without an offset.
// With requireStable (KIP-447), a partition with a pending transactional
// offset answers UNSTABLE_OFFSET_COMMIT and offset -1, as Kafka's
// OffsetMetadataManager does; without it the committed offset is returned.
func (c *Coordinator) fetchGroup(id string, topics []kmsg.OffsetFetchRequestTopic, requireStable bool) Result[fetched] {
	return c.fetchGroupAs(id, nil, -1, topics, requireStable)
}

// fetchGroupAs is fetchGroup for OffsetFetch v9+, naming the member
// fetching (nil and -1 for none): a consumer group checks its member id
// and epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). The answer comes from
// the committed state (readCommitted): an offset a load read above the
// high watermark is not returned until it is committed, so that a fetched
// offset never goes back after a failover.
func (c *Coordinator) fetchGroupAs(id string, memberID *string, memberEpoch int32, topics []kmsg.OffsetFetchRequestTopic, requireStable bool) Result[fetched] {
	if id == "" {
		return ready(fetched{code: kerr.InvalidGroupID.Code})
	}
	var res Result[fetched]
	if err := c.run(id, func(s *shard) {
		res = readCommitted(s, func(s *shard) fetched {
			if cd, ok := s.State().consumers.ValidateOffsetFetch(id, memberID, memberEpoch); ok && cd != 0 {
				return fetched{code: cd}
			}
			return fetched{topics: fetchOffsets(s.State().groups[id], topics, requireStable)}
		}, func(code int16) fetched { return fetched{code: code} })
	}); err != nil {
		return ready(fetched{code: err.Code})
	}
	return res
}

// fetchOffsets is fetchGroup on the owner of the group's shard; g may be
// nil.
func fetchOffsets(g *Group, topics []kmsg.OffsetFetchRequestTopic, requireStable bool) []kmsg.OffsetFetchResponseTopic {
	var offs map[TopicPartition]Offset
	if g != nil {
		offs = g.offsets
	}
	part := func(tp TopicPartition) kmsg.OffsetFetchResponseTopicPartition {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition = tp.Partition
		rp.Offset = -1
		md := ""
		if requireStable && g != nil && g.hasTxnOffset(tp) {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			rp.LeaderEpoch = -1
		} else if o, ok := offs[tp]; ok {
			rp.Offset, rp.LeaderEpoch, md = o.Offset, o.LeaderEpoch, o.Metadata
		}
		rp.Metadata = &md
		return rp
	}
	var out []kmsg.OffsetFetchResponseTopic
	if topics == nil {
		byTopic := map[string]int{}
		for tp := range offs {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(out)
				byTopic[tp.Topic] = i
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = tp.Topic
				out = append(out, rt)
			}
			out[i].Partitions = append(out[i].Partitions, part(tp))
		}
		return out
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, part(TopicPartition{t.Topic, p}))
		}
		out = append(out, rt)
	}
	return out
}

// OffsetFetch serves OffsetFetch: one group (v0-v7; a group error goes in
// every partition for v0-v1, at the top level for v2+) or a batch of
// groups (v8+). The answer waits while a group's state is not committed
// (fetchGroupAs).
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) Result[*kmsg.OffsetFetchResponse] {
	if req.Version >= 8 {
		parts := make([]Result[fetched], 0, len(req.Groups))
		for _, rg := range req.Groups {
			var topics []kmsg.OffsetFetchRequestTopic
			if rg.Topics != nil {
				topics = make([]kmsg.OffsetFetchRequestTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			memberEpoch := int32(-1)
			var memberID *string
			if req.Version >= 9 {
				memberID, memberEpoch = rg.MemberID, rg.MemberEpoch
			}
			parts = append(parts, c.fetchGroupAs(rg.Group, memberID, memberEpoch, topics, req.RequireStable))
		}
		return gather(parts, func(got []fetched) *kmsg.OffsetFetchResponse { return batchFetchResponse(req, got) })
	}
	topics := req.Topics
	if req.Version < 2 && topics == nil {
		topics = []kmsg.OffsetFetchRequestTopic{}
	}
	return gather([]Result[fetched]{c.fetchGroup(req.Group, topics, req.RequireStable)}, func(got []fetched) *kmsg.OffsetFetchResponse {
		return fetchResponse(req, got[0])
	})
}

// batchFetchResponse is the response to an OffsetFetch v8+ whose groups
// answered got, in request order.
func batchFetchResponse(req *kmsg.OffsetFetchRequest, got []fetched) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for i, rg := range req.Groups {
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = rg.Group, got[i].code
		for _, t := range got[i].topics {
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic = t.Topic
			for _, p := range t.Partitions {
				gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
				gp.ErrorCode = p.ErrorCode
				gt.Partitions = append(gt.Partitions, gp)
			}
			g.Topics = append(g.Topics, gt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// fetchResponse is the response to an OffsetFetch v0-v7 whose group
// answered f.
func fetchResponse(req *kmsg.OffsetFetchRequest, f fetched) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if f.code == 0 {
		resp.Topics = f.topics
		return resp
	}
	if req.Version >= 2 {
		resp.ErrorCode = f.code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode = p, -1, f.code
			md := ""
			rp.Metadata = &md
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// OffsetDelete serves OffsetDelete: offsets of an empty group are deleted;
// a group with members keeps those of topics it subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC; for a KIP-848 consumer group, topics a
// member subscribes to by name or by a resolved regex), and a
// non-consumer classic group with members refuses (NON_EMPTY_GROUP). The response waits for the tombstones.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) Result[*kmsg.OffsetDeleteResponse] {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return ready(resp)
	}
	var res Result[*kmsg.OffsetDeleteResponse]
	if err := c.run(req.Group, func(s *shard) { res = c.deleteOffsetsLocked(s, req, resp) }); err != nil {
		resp.ErrorCode = err.Code
		return ready(resp)
	}
	return res
}

// deleteOffsetsLocked is OffsetDelete on the owner of the group's shard:
// the offsets are removed at once and the answer waits for the
// tombstones' commit (a failed commit does not bring them back).
func (c *Coordinator) deleteOffsetsLocked(s *shard, req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) Result[*kmsg.OffsetDeleteResponse] {
	g := s.State().groups[req.Group]
	// A KIP-848 consumer group keeps its offsets in an Empty classic
	// group of the same id (which may not exist yet); the subscriptions
	// are its members' (Kafka's OffsetMetadataManager.deleteOffsets asks
	// the group's isSubscribedToTopic).
	cg := s.State().consumers.Group(req.Group)
	if cg == nil && (g == nil || g.state == Dead) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return ready(resp)
	}
	if cg == nil && g.state != Empty && g.protocolType != "consumer" {
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return ready(resp)
	}
	subscribed := func(topic string) bool {
		if cg != nil {
			return cg.SubscribedTo(topic)
		}
		return g.state != Empty && g.subscribedTo(topic)
	}
	var recs []record
	var tps []TopicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			tp := TopicPartition{rt.Topic, rp.Partition}
			switch {
			case !c.partitionExists(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed(rt.Topic):
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case g == nil:
			default:
				_, committed := g.offsets[tp]
				if committed || g.pendingCommits[tp] > 0 || g.hasTxnOffset(tp) {
					tps = append(tps, tp)
					recs = append(recs, offsetTombstone(g.id, tp))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(recs) == 0 {
		return ready(resp)
	}
	done, wait := durable()
	first, aerr := c.appendRecords(s, recs, nil, done)
	if aerr != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return ready(resp)
	}
	n0 := g.numTxnOffsets()
	for i, tp := range tps {
		g.deleteOffset(tp, first+int64(i))
	}
	c.numTxnOffsets.Add(int64(g.numTxnOffsets() - n0))
	return Result[*kmsg.OffsetDeleteResponse]{Wait: func() *kmsg.OffsetDeleteResponse {
		if err := wait(); err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		return resp
	}}
}
