package handler

// OffsetDelete, version 0.
//
// Deletes committed offsets of a group. An empty group loses any of them;
// a consumer group with members keeps those of topics it subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC per partition); a non-consumer group with
// members refuses (NON_EMPTY_GROUP). GROUP_ID_NOT_FOUND for an unknown
// group, UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
// The response waits for the tombstones to be durable.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) offsetDelete(r *protocol.Request) protocol.Reply {
	return reply(g.c.OffsetDelete(r.Body.(*kmsg.OffsetDeleteRequest)))
}
