package handler

// Heartbeat, versions 0-4.
//
// Keeps a member alive for its session timeout. REBALANCE_IN_PROGRESS
// tells it to rejoin; UNKNOWN_MEMBER_ID (expired or unknown),
// ILLEGAL_GENERATION (stale generation) and FENCED_INSTANCE_ID (a static
// member replaced by a newer instance, v3+) tell it it lost its
// membership.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) heartbeat(r *protocol.Request) protocol.Reply {
	return protocol.Reply{Resp: g.c.Heartbeat(r.Body.(*kmsg.HeartbeatRequest))}
}
