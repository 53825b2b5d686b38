package handler

// ShareGroupDescribe, version 1 (KIP-932): a share group's state, group
// epoch, assignment epoch, assignor, and each member's subscription and
// assignment. A group of another type or an unknown one answers
// GROUP_ID_NOT_FOUND; a group coordinated elsewhere NOT_COORDINATOR.
// Needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the
// others), and, as Kafka's KafkaApis handleShareGroupDescribe, DESCRIBE
// on every topic in the members' assignments: a group naming a topic the
// client may not describe answers TOPIC_AUTHORIZATION_FAILED without its
// members. UNSUPPORTED_VERSION while share.version is 0. Described from
// the committed state, as DescribeGroups (15_describe_groups.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) shareGroupDescribe(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	if g.h.shareOff() {
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		for _, id := range req.GroupIDs {
			rg := kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = id, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return protocol.Reply{Resp: resp}
	}
	var kept, refused []string
	for _, id := range req.GroupIDs {
		if g.h.allowedGroup(r, id, acl.OpDescribe) {
			kept = append(kept, id)
		} else {
			refused = append(refused, id)
		}
	}
	sub := *req
	sub.GroupIDs = kept
	return replyMap(g.c.ShareGroupDescribe(&sub), func(resp *kmsg.ShareGroupDescribeResponse) *kmsg.ShareGroupDescribeResponse {
		for i := range resp.Groups {
			rg := &resp.Groups[i]
			if rg.ErrorCode != 0 {
				continue
			}
			if !g.topicsDescribable(r, rg) {
				msg := "The group has described topic(s) that the client is not authorized to describe."
				id := rg.GroupID
				*rg = kmsg.NewShareGroupDescribeResponseGroup()
				rg.GroupID, rg.ErrorCode, rg.ErrorMessage = id, kerr.TopicAuthorizationFailed.Code, &msg
				continue
			}
			if req.IncludeAuthorizedOperations {
				rg.AuthorizedOperations = g.h.authorizedOps(r, acl.ResourceGroup, rg.GroupID, groupOps)
			}
		}
		for _, id := range refused {
			rg := kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = id, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	})
}

// topicsDescribable reports whether the client may DESCRIBE every topic
// of the group's members' assignments.
func (g *groupAPI) topicsDescribable(r *protocol.Request, rg *kmsg.ShareGroupDescribeResponseGroup) bool {
	seen := map[string]bool{}
	for _, m := range rg.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			if seen[tp.Topic] {
				continue
			}
			seen[tp.Topic] = true
			if !g.h.allowedTopic(r, tp.Topic, acl.OpDescribe) {
				return false
			}
		}
	}
	return true
}
