package handler

// ConsumerGroupDescribe, versions 0-1 (KIP-848; v1 adds each member's
// type): a consumer group's state, group epoch, assignment epoch,
// assignor, and each member's subscription, current assignment and target
// assignment. A classic group or an unknown one answers
// GROUP_ID_NOT_FOUND; a group coordinated elsewhere NOT_COORDINATOR.
// Needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the
// others), and DESCRIBE on every topic of its members' current and target
// assignments: a group with one such topic denied is answered
// TOPIC_AUTHORIZATION_FAILED, without its members (Kafka 4.0
// KafkaApis.handleConsumerGroupDescribe, KAFKA-18813). UNSUPPORTED_VERSION
// while the consumer protocol is off (68_consumer_group_heartbeat.go).
// Described from the committed state, as DescribeGroups
// (15_describe_groups.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (g *groupAPI) consumerGroupDescribe(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	if g.consumerProtocolOff() {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, id := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = id, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return protocol.Reply{Resp: resp}
	}
	var kept, refused []string
	for _, id := range req.Groups {
		if g.h.allowedGroup(r, id, acl.OpDescribe) {
			kept = append(kept, id)
		} else {
			refused = append(refused, id)
		}
	}
	sub := *req
	sub.Groups = kept
	return replyMap(g.c.ConsumerGroupDescribe(&sub), func(resp *kmsg.ConsumerGroupDescribeResponse) *kmsg.ConsumerGroupDescribeResponse {
		for i, rg := range resp.Groups {
			if rg.ErrorCode == 0 && !g.describesTopics(r, rg) {
				denied := kmsg.NewConsumerGroupDescribeResponseGroup()
				denied.Group, denied.ErrorCode = rg.Group, kerr.TopicAuthorizationFailed.Code
				denied.ErrorMessage = kmsg.StringPtr("The group has topics the client is not authorized to describe.")
				resp.Groups[i] = denied
			}
		}
		for _, id := range refused {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = id, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	})
}

// describesTopics reports whether r's principal may DESCRIBE every topic
// in the current and target assignments of rg's members.
func (g *groupAPI) describesTopics(r *protocol.Request, rg kmsg.ConsumerGroupDescribeResponseGroup) bool {
	if g.h.auth == nil {
		return true
	}
	checked := map[string]bool{}
	for _, m := range rg.Members {
		for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if checked[tp.Topic] {
					continue
				}
				checked[tp.Topic] = true
				if !g.h.allowedTopic(r, tp.Topic, acl.OpDescribe) {
					return false
				}
			}
		}
	}
	return true
}
