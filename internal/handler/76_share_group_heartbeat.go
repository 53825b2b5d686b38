package handler

// ShareGroupHeartbeat, version 1 (KIP-932 share groups; v0 was Kafka
// 4.0's early access and is gone from Kafka 4.1).
//
// Joins, heartbeats in and leaves a share group: the member id is the
// client's (a UUID, INVALID_REQUEST otherwise), the broker assigns the
// subscribed topics' partitions with the simple assignor, a partition
// possibly to several members, and a member's assignment changes at its
// next heartbeat without revocation (internal/group/share;
// docs/share-groups.md). The answer waits until the records of the change
// are committed to __consumer_offsets. Needs READ on the group
// (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic
// (TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis
// handleShareGroupHeartbeat. Answers UNSUPPORTED_VERSION while the
// cluster's share.version is 0; the API is then left out of ApiVersions
// (share_gate.go).

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) shareGroupHeartbeat(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16, msg string) protocol.Reply {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return protocol.Reply{Resp: resp}
	}
	if g.h.shareOff() {
		return fail(kerr.UnsupportedVersion.Code, "")
	}
	if !g.h.allowedGroup(r, req.GroupID, acl.OpRead) {
		return fail(groupDenied, "")
	}
	var denied []string
	for _, t := range req.SubscribedTopicNames {
		if !g.h.allowedTopic(r, t, acl.OpDescribe) {
			denied = append(denied, t)
		}
	}
	if len(denied) > 0 {
		return fail(kerr.TopicAuthorizationFailed.Code, "The following topics are not authorized: "+strings.Join(denied, ", ")+".")
	}
	return reply(g.c.ShareGroupHeartbeat(req, r.ClientID, clientHost(r)))
}
