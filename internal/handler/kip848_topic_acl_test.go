package handler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// manageErrors is a franz-go hook that passes on the group management
// errors the client reports.
type manageErrors chan error

// OnGroupManageError implements kgo.HookGroupManageError.
func (m manageErrors) OnGroupManageError(err error) {
	select {
	case m <- err:
	default:
	}
}

// TestKIP848SubscribedTopicDenied subscribes a franz-go KIP-848 consumer
// (server-side balancer) to two topics by name, one of which the
// principal may not DESCRIBE (a DENY ALL ACL, as librdkafka's test 0109
// sets up): the heartbeat fails with TOPIC_AUTHORIZATION_FAILED and the
// member never joins (Kafka 4.0 KafkaApis.handleConsumerGroupHeartbeat,
// KAFKA-18813). A consumer subscribed to the allowed topic alone joins
// and is assigned its partitions, and ConsumerGroupDescribe of its group
// answers TOPIC_AUTHORIZATION_FAILED once the caller may no longer
// describe that topic.
func TestKIP848SubscribedTopicDenied(t *testing.T) {
	props := map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true"}
	for k, v := range kip848Props {
		props[k] = v
	}
	n := startNode(t, "", props)
	c := ctx(t)
	admin := n.client()
	createTopic(t, admin, "tacl-ok", 2, nil)
	createTopic(t, admin, "tacl-denied", 1, nil)
	deny := creation(kmsg.ACLResourceTypeTopic, "tacl-denied", kmsg.ACLResourcePatternTypeLiteral, "User:*", kmsg.ACLOperationAll)
	deny.PermissionType = kmsg.ACLPermissionTypeDeny
	acls := kmsg.NewPtrCreateACLsRequest()
	acls.Creations = append(acls.Creations, deny)
	for _, r := range request[*kmsg.CreateACLsResponse](t, admin, acls).Results {
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}

	errs := make(manageErrors, 16)
	denied := n.client(kgo.ConsumerGroup("tacl-denied-group"), kgo.ConsumeTopics("tacl-ok", "tacl-denied"),
		kgo.ServerSideBalancer(), kgo.WithHooks(errs))
	go func() {
		for {
			if f := denied.PollFetches(c); f.IsClientClosed() || c.Err() != nil {
				return
			}
		}
	}()
	select {
	case err := <-errs:
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("group management error %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no group management error for a subscription with a topic the consumer may not describe")
	}
	describe := func(group string) kmsg.ConsumerGroupDescribeResponseGroup {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		return request[*kmsg.ConsumerGroupDescribeResponse](t, admin, req).Groups[0]
	}
	if g := describe("tacl-denied-group"); g.ErrorCode == 0 && len(g.Members) != 0 {
		t.Fatalf("a member joined with a denied topic in its subscription: %+v", g.Members)
	}

	allowed := n.client(kgo.ConsumerGroup("tacl-ok-group"), kgo.ConsumeTopics("tacl-ok"), kgo.ServerSideBalancer())
	go func() {
		for {
			if f := allowed.PollFetches(c); f.IsClientClosed() || c.Err() != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		g := describe("tacl-ok-group")
		if g.ErrorCode == 0 && len(g.Members) == 1 && len(g.Members[0].Assignment.TopicPartitions) == 1 &&
			len(g.Members[0].Assignment.TopicPartitions[0].Partitions) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer of the allowed topic was not assigned its 2 partitions: %+v", g)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// ConsumerGroupDescribe hides a group with a topic the caller may not
	// describe in its assignments (KAFKA-18813): only the DESCRIBE ACL
	// of another principal on tacl-ok, so the anonymous caller may no
	// longer describe it.
	other := creation(kmsg.ACLResourceTypeTopic, "tacl-ok", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationDescribe)
	acls = kmsg.NewPtrCreateACLsRequest()
	acls.Creations = append(acls.Creations, other)
	for _, r := range request[*kmsg.CreateACLsResponse](t, admin, acls).Results {
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if g := describe("tacl-ok-group"); g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 {
		t.Fatalf("describe of a group on a topic the caller may not describe: %v, %d members; want TOPIC_AUTHORIZATION_FAILED and none",
			kerr.ErrorForCode(g.ErrorCode), len(g.Members))
	}
}
