package handler

// ConsumerGroupHeartbeat, versions 0-1 (KIP-848, the consumer group
// protocol; v1 adds broker-side regular expressions and the client
// generating its member id).
//
// Joins, heartbeats in and leaves a consumer group: the broker computes
// the target assignment with a server assignor (uniform, range) and hands
// each member its partitions incrementally, revoking before assigning
// (internal/group/consumer; docs/kip848.md). The answer waits until the
// records of the change are committed to __consumer_offsets. Needs READ on
// the group (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on every topic of a
// subscription by names the request carries: one topic denied fails the
// whole heartbeat with TOPIC_AUTHORIZATION_FAILED, naming no topic, before
// the coordinator sees it (Kafka 4.0 KafkaApis.handleConsumerGroupHeartbeat,
// KAFKA-18813; librdkafka's test 0109 expects it). A subscription by regular
// expression matches only the topics the principal may DESCRIBE (Kafka
// 4.1, KAFKA-18813: the resolution triggered by a member's heartbeat is
// filtered with that member's request context); a regex is re-resolved
// whenever the metadata image moves (ACL changes included). Answers UNSUPPORTED_VERSION when the cluster's
// group.version is 0 or group.coordinator.rebalance.protocols leaves out
// consumer, as Kafka's KafkaApis does; the API is then also left out of
// ApiVersions.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

// consumerProtocolOff reports whether the consumer group protocol is off
// (group.version 0, or not in group.coordinator.rebalance.protocols).
func (g *groupAPI) consumerProtocolOff() bool {
	return !g.c.ConsumerEnabled() || g.h.b.Image().GroupVersion() < 1
}

func (g *groupAPI) consumerGroupHeartbeat(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code int16) protocol.Reply {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return protocol.Reply{Resp: resp}
	}
	if g.consumerProtocolOff() {
		return fail(kerr.UnsupportedVersion.Code)
	}
	if !g.h.allowedGroup(r, req.Group, acl.OpRead) {
		return fail(groupDenied)
	}
	for _, topic := range req.SubscribedTopicNames {
		if !g.h.allowedTopic(r, topic, acl.OpDescribe) {
			return fail(kerr.TopicAuthorizationFailed.Code)
		}
	}
	var canDescribe func(string) bool
	if g.h.auth != nil {
		canDescribe = func(topic string) bool { return g.h.allowedTopic(r, topic, acl.OpDescribe) }
	}
	return reply(g.c.ConsumerGroupHeartbeat(req, r.ClientID, clientHost(r), canDescribe))
}
