package handler

// JoinGroup, versions 0-7.
//
// Classic group membership (internal/group). A member joining with no
// member id gets one (client id + "-" + UUID); with v4+ it first gets
// MEMBER_ID_REQUIRED carrying that id and must join again with it
// (KIP-394). The response waits (in Reply.Await) until the join phase
// completes: every member rejoined, or the rebalance timeout (v0: the
// session timeout) passed, or, for a group that was empty,
// group.initial.rebalance.delay.ms. The leader gets every member's metadata
// for the chosen protocol (the one all members support that most prefer);
// assignors run in the clients. Static members (group.instance.id, v5+,
// KIP-345) rejoining with an unknown member id replace their old id, which
// is fenced (FENCED_INSTANCE_ID); in a stable group with unchanged metadata
// that causes no rebalance. Errors: INVALID_GROUP_ID,
// INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms),
// INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, GROUP_MAX_SIZE_REACHED,
// COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) joinGroup(r *protocol.Request) protocol.Reply {
	return reply(g.c.JoinGroup(r.Body.(*kmsg.JoinGroupRequest), r.ClientID, clientHost(r)))
}
