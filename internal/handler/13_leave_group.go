package handler

// LeaveGroup, versions 0-4.
//
// v0-v2 remove one member; v3+ remove a batch, each member by member id or
// by group.instance.id (KIP-345), with a per-member error
// (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID when the member id does not match
// the instance). The group rebalances without the members that left.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) leaveGroup(r *protocol.Request) protocol.Reply {
	return protocol.Reply{Resp: g.c.LeaveGroup(r.Body.(*kmsg.LeaveGroupRequest))}
}
