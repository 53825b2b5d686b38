package handler

// DescribeGroups, versions 0-5.
//
// State, protocol type, and members (with instance ids, v4+). Member
// metadata, assignments and the protocol name are filled only for a Stable
// group, as in Kafka. An unknown group is reported in state Dead with no
// error. AuthorizedOperations is not computed; with an authorizer a group
// the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED
// (groups_authz.go).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) describeGroups(r *protocol.Request) protocol.Reply {
	return protocol.Reply{Resp: g.c.DescribeGroups(r.Body.(*kmsg.DescribeGroupsRequest))}
}
