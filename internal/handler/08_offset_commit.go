package handler

// OffsetCommit, versions 0-10 (v9: member epochs of consumer groups,
// kip848.md; v10: topics by id, offset_topic_ids.go).
//
// Commits are fenced by generation (Kafka's rules): generation -1 (and v0,
// which has none) is a "simple" commit, allowed while the group has no
// members, creating the group if needed; otherwise the member must be
// known (UNKNOWN_MEMBER_ID), at the current generation
// (ILLEGAL_GENERATION), not fenced by its instance id (FENCED_INSTANCE_ID,
// v7+), and the group not waiting for its leader's assignment
// (REBALANCE_IN_PROGRESS). Commits during PreparingRebalance are accepted,
// so eager consumers can commit before rejoining. A partition that does
// not exist gets UNKNOWN_TOPIC_OR_PARTITION; metadata over
// offset.metadata.max.bytes gets OFFSET_METADATA_TOO_LARGE. Valid offsets
// are written to __consumer_offsets as one batch and acknowledged once
// durable (in Reply.Await). RetentionTimeMillis (v2-v4) is ignored, as
// since Kafka 2.1 (KIP-211): offsets.retention.minutes applies.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) offsetCommit(r *protocol.Request) protocol.Reply {
	return reply(g.c.OffsetCommit(r.Body.(*kmsg.OffsetCommitRequest)))
}
