package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ValidateCommit checks an OffsetCommit against the group (Kafka's
// doCommitOffsets): generation -1 "simple" commits are allowed while the
// group has no members; otherwise the member must be known and at the
// current generation. A valid member commit counts as a heartbeat.
func (g *Group) ValidateCommit(now time.Time, generation int32, memberID string, instanceID *string) int16 {
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case g.fencedStatic(memberID, instanceID):
		return kerr.FencedInstanceID.Code
	case generation < 0 && g.state == Empty:
		return 0
	case g.state == CompletingRebalance:
		return kerr.RebalanceInProgress.Code
	}
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m.expireAt = now.Add(m.sessionTimeout)
	return 0
}

// beginCommit notes a commit appended but not yet durable.
func (g *Group) beginCommit(tp TopicPartition) { g.pendingCommits[tp]++ }

// finishCommit applies a commit once durable (ok) or drops it. A commit
// loses to a later record of the same partition: another commit, or a
// deletion's tombstone.
func (g *Group) finishCommit(tp TopicPartition, o Offset, ok bool) {
	if ok {
		cur, has := g.offsets[tp]
		t, deleted := g.tombstones[tp]
		if (!has || cur.logOffset < o.logOffset) && (!deleted || t < o.logOffset) {
			g.offsets[tp] = o
		}
	}
	if g.pendingCommits[tp]--; g.pendingCommits[tp] <= 0 {
		delete(g.pendingCommits, tp)
		delete(g.tombstones, tp)
	}
}

// deleteOffset removes a committed offset whose tombstone sits at log
// offset at, and the partition's pending transactional offsets (Kafka's
// OffsetMetadataManager drops them on a tombstone too).
func (g *Group) deleteOffset(tp TopicPartition, at int64) {
	delete(g.offsets, tp)
	g.dropTxnOffsets(tp)
	if g.pendingCommits[tp] > 0 {
		g.tombstones[tp] = at
	}
}

// hasOffsets reports committed or in-flight offsets.
func (g *Group) hasOffsets() bool { return len(g.offsets) > 0 || len(g.pendingCommits) > 0 }

// offsetKeys lists the partitions with a committed, in-flight or pending
// transactional offset.
func (g *Group) offsetKeys() []TopicPartition {
	out := make([]TopicPartition, 0, len(g.offsets)+len(g.pendingCommits))
	seen := make(map[TopicPartition]bool, len(g.offsets))
	add := func(tp TopicPartition) {
		if !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
	}
	for tp := range g.offsets {
		add(tp)
	}
	for tp := range g.pendingCommits {
		add(tp)
	}
	for _, offs := range g.txn {
		for tp := range offs {
			add(tp)
		}
	}
	return out
}

// Offsets returns a copy of the committed offsets.
func (g *Group) Offsets() map[TopicPartition]Offset {
	out := make(map[TopicPartition]Offset, len(g.offsets))
	for tp, o := range g.offsets {
		out[tp] = o
	}
	return out
}

// expiredOffsets applies offsets.retention.minutes (KIP-211): an empty
// group loses every offset once it has been empty for the retention; a
// stable consumer group loses offsets of topics it no longer subscribes to
// that were committed longer ago than the retention; a group that never
// used group management ("simple" commits) loses each offset the retention
// after its commit. Offsets with a commit in flight or a pending
// transactional offset are kept (Kafka's cleanupExpiredOffsets).
func (g *Group) expiredOffsets(now time.Time, retention time.Duration) []TopicPartition {
	var base func(o Offset) time.Time
	var keep func(tp TopicPartition) bool
	switch {
	case g.protocolType == "" && g.state == Empty:
		base = func(o Offset) time.Time { return o.CommitTime }
	case g.state == Empty:
		base = func(Offset) time.Time { return g.stateSince }
	case g.protocolType == "consumer" && g.subscribed != nil && g.state == Stable:
		base = func(o Offset) time.Time { return o.CommitTime }
		keep = func(tp TopicPartition) bool { return g.subscribed[tp.Topic] }
	default:
		return nil
	}
	var out []TopicPartition
	for tp, o := range g.offsets {
		if g.pendingCommits[tp] > 0 || g.hasTxnOffset(tp) || keep != nil && keep(tp) {
			continue
		}
		if !now.Before(base(o).Add(retention)) {
			out = append(out, tp)
		}
	}
	return out
}
