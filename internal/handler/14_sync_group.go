package handler

// SyncGroup, versions 0-5.
//
// After a join phase, the leader sends the assignment; it is stored in
// __consumer_offsets and, once durable, every member receives its part and
// the group is Stable. Other members wait (in Reply.Await) for it; their
// own assignments are ignored, as in Kafka. In a stable group SyncGroup
// returns the member's current assignment. Errors: UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (a new join phase started),
// INCONSISTENT_GROUP_PROTOCOL (v5 protocol type/name mismatch),
// FENCED_INSTANCE_ID.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) syncGroup(r *protocol.Request) protocol.Reply {
	return reply(g.c.SyncGroup(r.Body.(*kmsg.SyncGroupRequest)))
}
