package handler

// DeleteGroups, versions 0-2.
//
// Deletes groups without members: their offsets and metadata get
// tombstones in __consumer_offsets and the response waits until they are
// durable. GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for one
// with members, INVALID_GROUP_ID for an empty id.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) deleteGroups(r *protocol.Request) protocol.Reply {
	return reply(g.c.DeleteGroups(r.Body.(*kmsg.DeleteGroupsRequest)))
}
