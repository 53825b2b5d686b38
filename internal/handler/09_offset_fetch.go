package handler

// OffsetFetch, versions 0-10 (v8: a batch of groups; v9: member epochs
// of consumer groups, kip848.md; v10: topics by id, offset_topic_ids.go).
//
// Returns each requested partition's committed offset, leader epoch (v5+)
// and metadata, or offset -1 when none is committed (also for an unknown
// group). A null topic list (v2+) returns every committed offset of the
// group. Only durable commits are visible: the answer waits (in
// Reply.Await) while the group's partition has records above the high
// watermark (a coordinator just elected), docs/coordinators.md. Group errors
// (COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR,
// INVALID_GROUP_ID) go in every partition for v0-v1, in the top-level
// ErrorCode for v2-v7, and per group for v8. Transactional offsets
// (TxnOffsetCommit) are not returned until their transaction commits;
// with RequireStable (v7+, KIP-447) a partition that has some pending
// answers UNSTABLE_OFFSET_COMMIT and offset -1 in its own ErrorCode (v7
// and v8 alike, as Kafka's OffsetMetadataManager), and clients retry.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) offsetFetch(r *protocol.Request) protocol.Reply {
	return reply(g.c.OffsetFetch(r.Body.(*kmsg.OffsetFetchRequest)))
}
