package handler

// ListGroups, versions 0-5.
//
// Every group this node coordinates, with its protocol type, (v4+) state
// and (v5+, KIP-848) group type, "classic" for every group here; the v4
// StatesFilter and v5 TypesFilter match names case-insensitively, as
// Kafka's GroupCoordinatorService does.
// While an offsets partition is loading the groups found so far are
// returned with COORDINATOR_NOT_AVAILABLE.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) listGroups(r *protocol.Request) protocol.Reply {
	return protocol.Reply{Resp: g.c.ListGroups(r.Body.(*kmsg.ListGroupsRequest))}
}
