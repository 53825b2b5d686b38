package handler

// DescribeGroups, versions 0-5.
//
// State, protocol type, and members (with instance ids, v4+). Member
// metadata, assignments and the protocol name are filled only for a Stable
// group, as in Kafka. An unknown group is reported in state Dead with no
// error. With an authorizer a group the principal may not DESCRIBE is
// GROUP_AUTHORIZATION_FAILED (groups_authz.go). v3+ reports each group's
// authorized operations when asked (KIP-430, authorized_ops.go). Each
// group is described from its committed state: while its partition has
// records above the high watermark the answer waits (Reply.Await), as for
// OffsetFetch (docs/coordinators.md).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) describeGroups(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	return replyMap(g.c.DescribeGroups(req), func(resp *kmsg.DescribeGroupsResponse) *kmsg.DescribeGroupsResponse {
		g.groupAuthorizedOps(r, req, resp)
		return resp
	})
}

// groupAuthorizedOps fills the authorized operations DescribeGroups v3+
// asks for.
func (g *groupAPI) groupAuthorizedOps(r *protocol.Request, req *kmsg.DescribeGroupsRequest, resp *kmsg.DescribeGroupsResponse) {
	if !req.IncludeAuthorizedOperations {
		return
	}
	for i := range resp.Groups {
		if resp.Groups[i].ErrorCode == 0 {
			resp.Groups[i].AuthorizedOperations = g.h.authorizedOps(r, acl.ResourceGroup, resp.Groups[i].Group, groupOps)
		}
	}
}
