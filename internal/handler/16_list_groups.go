package handler

// ListGroups, versions 0-4.
//
// Every group this node coordinates, with its protocol type and (v4+)
// state; the v4 StatesFilter matches state names case-insensitively.
// While an offsets partition is loading the groups found so far are
// returned with COORDINATOR_NOT_AVAILABLE.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) listGroups(r *protocol.Request) protocol.Reply {
	return protocol.Reply{Resp: g.c.ListGroups(r.Body.(*kmsg.ListGroupsRequest))}
}
