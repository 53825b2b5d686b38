package group

// Transactional offset commits (KIP-98, KIP-447): TxnOffsetCommit writes
// a transaction's offsets to the group's partition of __consumer_offsets
// as ordinary offset commit records in one transactional batch (the
// producer id and epoch of the transaction). They stay pending, per
// producer id, until the transaction coordinator's marker for that
// producer id is written to the partition: CompleteTxn then commits or
// drops them (Kafka's GroupMetadata.completePendingTxnOffsetCommit).
// Replaying the partition does the same with the batches and markers it
// reads (loaded.endTxn).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/coord"
)

// MaxTxnOffsets bounds the pending transactional offsets of one
// coordinator; beyond, TxnOffsetCommit gets COORDINATOR_NOT_AVAILABLE.
const MaxTxnOffsets = 100000

// ValidateTxnCommit checks a TxnOffsetCommit against the group, as
// Kafka's ClassicGroup.validateOffsetCommit for a transactional commit:
// generation -1 commits to an empty group; otherwise, if the request names
// a generation, a member or an instance (v3+, KIP-447), the member must be
// known (UNKNOWN_MEMBER_ID), own its instance id (FENCED_INSTANCE_ID) and
// be at the current generation (ILLEGAL_GENERATION). A request naming none
// of them (v0-v2) is accepted whatever the group's state. Unlike
// OffsetCommit there is no REBALANCE_IN_PROGRESS and no heartbeat.
func (g *Group) ValidateTxnCommit(generation int32, memberID string, instanceID *string) int16 {
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case generation < 0 && g.state == Empty:
		return 0
	case generation < 0 && memberID == "" && instanceID == nil:
		return 0
	}
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case cur != memberID:
			return kerr.FencedInstanceID.Code
		}
	} else if g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// addTxnOffset records o as producer pid's pending offset of tp.
func (g *Group) addTxnOffset(pid int64, tp TopicPartition, o Offset) {
	m := g.txn[pid]
	if m == nil {
		m = map[TopicPartition]Offset{}
		g.txn[pid] = m
	}
	m[tp] = o
}

// failTxnOffset drops producer pid's pending offset of tp written at log
// offset at, whose write failed (Kafka's failPendingTxnOffsetCommit); a
// later commit of the same partition in the transaction stays.
func (g *Group) failTxnOffset(pid int64, tp TopicPartition, at int64) {
	m := g.txn[pid]
	if o, ok := m[tp]; ok && o.logOffset == at {
		delete(m, tp)
		if len(m) == 0 {
			delete(g.txn, pid)
		}
	}
}

// completeTxn ends producer pid's transaction: on commit each pending
// offset becomes the committed one unless a record later in the log
// (another commit or a deletion) already replaced it; on abort they are
// dropped.
func (g *Group) completeTxn(pid int64, commit bool) {
	offs := g.txn[pid]
	delete(g.txn, pid)
	if !commit {
		return
	}
	for tp, o := range offs {
		cur, has := g.offsets[tp]
		t, deleted := g.tombstones[tp]
		if (!has || cur.logOffset < o.logOffset) && (!deleted || t < o.logOffset) {
			g.offsets[tp] = o
		}
	}
}

// hasTxnOffset reports a pending transactional offset of tp.
func (g *Group) hasTxnOffset(tp TopicPartition) bool {
	for _, m := range g.txn {
		if _, ok := m[tp]; ok {
			return true
		}
	}
	return false
}

// dropTxnOffsets removes every pending transactional offset of tp.
func (g *Group) dropTxnOffsets(tp TopicPartition) {
	for pid, m := range g.txn {
		delete(m, tp)
		if len(m) == 0 {
			delete(g.txn, pid)
		}
	}
}

// numTxnOffsets counts the pending transactional offsets.
func (g *Group) numTxnOffsets() int {
	n := 0
	for _, m := range g.txn {
		n += len(m)
	}
	return n
}

// TxnOffsetCommit serves TxnOffsetCommit (Kafka's
// GroupCoordinator.commitTransactionalOffsets). Partitions that do not
// exist get UNKNOWN_TOPIC_OR_PARTITION; the others get the group's error
// (INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE while
// loading, ValidateTxnCommit's), OFFSET_METADATA_TOO_LARGE, or are
// written as one transactional batch and answered once it is durable.
// A producer epoch older than the partition knows for the producer id
// gets INVALID_PRODUCER_EPOCH. The offsets stay pending until CompleteTxn.
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) Result[*kmsg.TxnOffsetCommitResponse] {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	valid := 0
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			// KafkaApis answers these before asking the coordinator.
			if !c.partitionExists(rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				valid++
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	setRest := func(code int16) Result[*kmsg.TxnOffsetCommitResponse] {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if sp := &resp.Topics[i].Partitions[j]; sp.ErrorCode == 0 {
					sp.ErrorCode = code
				}
			}
		}
		return ready(resp)
	}
	switch {
	case valid == 0:
		return ready(resp)
	case req.Group == "":
		return setRest(kerr.InvalidGroupID.Code)
	case req.ProducerID < 0 || req.ProducerEpoch < 0:
		return setRest(kerr.InvalidRequest.Code)
	}
	var res Result[*kmsg.TxnOffsetCommitResponse]
	if err := c.run(req.Group, func(s *shard) { res = c.txnCommitLocked(s, req, resp, setRest) }); err != nil {
		return setRest(err.Code)
	}
	return res
}

// txnCommitLocked is TxnOffsetCommit on the owner of the group's shard:
// the offsets are pending in the group from the append on (undone if the
// append or its commit fails).
func (c *Coordinator) txnCommitLocked(s *shard, req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse,
	setRest func(int16) Result[*kmsg.TxnOffsetCommitResponse]) Result[*kmsg.TxnOffsetCommitResponse] {
	st := s.State()
	g := st.groups[req.Group]
	// A consumer group (KIP-848): the generation id is the member epoch,
	// and a stale one is ILLEGAL_GENERATION for a transactional commit
	// (Kafka's ConsumerGroup.validateOffsetCommit with isTransactional).
	code, isConsumer := st.consumers.ValidateOffsetCommit(req.Group, req.MemberID, req.Generation)
	if isConsumer {
		if code == kerr.StaleMemberEpoch.Code {
			code = kerr.IllegalGeneration.Code
		}
		if code != 0 {
			return setRest(code)
		}
		if g == nil {
			if g = c.group(s, req.Group, true); g == nil {
				return setRest(kerr.CoordinatorNotAvailable.Code)
			}
		}
	}
	if g == nil {
		// Kafka's OffsetMetadataManager: an unknown group is created for
		// a generation -1 ("simple") commit only.
		if req.Generation >= 0 {
			return setRest(kerr.IllegalGeneration.Code)
		}
		if g = c.group(s, req.Group, true); g == nil {
			return setRest(kerr.CoordinatorNotAvailable.Code)
		}
	}
	defer c.schedule(s, g)
	if code := g.ValidateTxnCommit(req.Generation, req.MemberID, req.InstanceID); code != 0 && !isConsumer {
		return setRest(code)
	}
	now := c.clock.Now()
	type txnCommit struct {
		tp   TopicPartition
		o    Offset
		slot *kmsg.TxnOffsetCommitResponseTopicPartition
	}
	var commits []txnCommit
	var recs []record
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			slot := &resp.Topics[i].Partitions[j]
			if slot.ErrorCode != 0 {
				continue
			}
			var md string
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			if len(md) > c.cfg.MaxOffsetMetadataBytes {
				slot.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			tp := TopicPartition{rt.Topic, rp.Partition}
			o := Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md, CommitTime: now}
			commits = append(commits, txnCommit{tp, o, slot})
			recs = append(recs, offsetRecord(g.id, tp, o))
		}
	}
	if len(recs) == 0 {
		return ready(resp)
	}
	if c.numTxnOffsets.Load()+int64(len(recs)) > MaxTxnOffsets {
		c.log.Warn("too many pending transactional offsets", "max", MaxTxnOffsets)
		return setRest(kerr.CoordinatorNotAvailable.Code)
	}
	pid, epoch := req.ProducerID, req.ProducerEpoch
	added := false // the undo is of the offsets added after the append
	undo := func() {
		if !added {
			return
		}
		n0 := g.numTxnOffsets()
		for _, tc := range commits {
			g.failTxnOffset(pid, tc.tp, tc.o.logOffset)
		}
		c.numTxnOffsets.Add(int64(g.numTxnOffsets() - n0))
	}
	answer := make(chan *kmsg.TxnOffsetCommitResponse, 1)
	info, aerr := s.Append(encodeTxnBatch(recs, now, pid, epoch), undo, func(err error) {
		if err == nil {
			answer <- resp
			return
		}
		code := kerr.NotCoordinator.Code
		if err != coord.ErrNotCoordinator {
			code = txnAppendError(err)
		}
		for _, tc := range commits {
			tc.slot.ErrorCode = code
		}
		answer <- resp
	})
	if aerr != nil {
		c.log.Warn("appending transactional offsets to "+OffsetsTopic, "partition", s.Partition(), "producer", pid, "err", aerr)
		return setRest(txnAppendError(aerr))
	}
	// Pending from the append on, as Kafka's
	// OffsetMetadataManager.commitTransactionalOffset replays its record.
	n0 := g.numTxnOffsets()
	for i := range commits {
		commits[i].o.logOffset = info.FirstOffset + int64(i)
		g.addTxnOffset(pid, commits[i].tp, commits[i].o)
	}
	c.numTxnOffsets.Add(int64(g.numTxnOffsets() - n0))
	added = true
	if st.txnGroups[pid] == nil {
		st.txnGroups[pid] = map[string]bool{}
	}
	st.txnGroups[pid][g.id] = true
	return waitOn(answer)
}

// txnAppendError is the TxnOffsetCommit answer to a failed append or wait
// for durability: a fenced producer epoch as it is, a lost leadership
// NOT_COORDINATOR, and anything else COORDINATOR_NOT_AVAILABLE (clients
// find the coordinator again and retry), as Kafka's GroupCoordinatorService
// maps write errors.
func txnAppendError(err error) int16 {
	switch err {
	case kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidProducerIDMapping:
		return err.(*kerr.Error).Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// CompleteTxn ends producer producerID's transaction on offsets partition
// partition: the WriteTxnMarkers handler calls it once the marker for
// producerID is committed on that partition of __consumer_offsets, before
// it answers. On commit every group's pending offsets of the producer
// become the committed ones, except where a record later in the log (a
// non-transactional commit or a deletion) replaced them; on abort they are
// dropped. A partition this node does not coordinate is ignored (whoever
// loads it replays the marker); one still loading applies the call once
// loaded.
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	complete := func(s *shard) { c.completeTxnLocked(s, producerID, commit) }
	if err := c.rt.Run(partition, complete); err == coord.ErrLoading {
		c.rt.Post(partition, complete)
	}
}

// completeTxnLocked is CompleteTxn on a loaded shard (owner).
func (c *Coordinator) completeTxnLocked(s *shard, pid int64, commit bool) {
	st := s.State()
	for id := range st.txnGroups[pid] {
		g := st.groups[id]
		if g == nil {
			continue
		}
		n0 := g.numTxnOffsets()
		g.completeTxn(pid, commit)
		c.numTxnOffsets.Add(int64(g.numTxnOffsets() - n0))
		c.schedule(s, g)
	}
	delete(st.txnGroups, pid)
}

// restoreTxnOffsets installs the pending transactional offsets replayed
// from the log (transactions without their marker yet) into st's groups,
// creating groups that have no other state (while loading).
func (c *Coordinator) restoreTxnOffsets(st *shardState, l *loaded, now time.Time) {
	for pid, byGroup := range l.txn {
		for id, offs := range byGroup {
			if len(offs) == 0 {
				continue
			}
			g := st.groups[id]
			if g == nil {
				g = newGroup(id, &c.cfg, now)
				st.groups[id] = g
			}
			g.txn[pid] = offs
			if st.txnGroups[pid] == nil {
				st.txnGroups[pid] = map[string]bool{}
			}
			st.txnGroups[pid][id] = true
		}
	}
}
