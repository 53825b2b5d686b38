package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKIP848RegexFilteredByDescribe subscribes a KIP-848 member by
// regular expression with an authorizer on: of the matching topics, only
// those the principal may DESCRIBE are assigned (Kafka 4.1's regex
// resolution with the authorizer, also when the resolution runs after the
// heartbeat that subscribed), and granting DESCRIBE on another
// matching topic brings it in at a later heartbeat.
func TestKIP848RegexFilteredByDescribe(t *testing.T) {
	props := map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true"}
	for k, v := range kip848Props {
		props[k] = v
	}
	n := startNode(t, "", props)
	for _, topic := range []string{"re-open", "re-hidden", "other"} {
		if err := n.b.CreateTopic(topic, 2, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	cl := n.client()
	grant := func(c kmsg.CreateACLsRequestCreation) {
		t.Helper()
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = append(req.Creations, c)
		for _, r := range request[*kmsg.CreateACLsResponse](t, cl, req).Results {
			if r.ErrorCode != 0 {
				t.Fatal(kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	// An ACL for someone else on re-hidden: the anonymous principal may
	// no longer describe it (no ACL on the other topics: allowed).
	grant(creation(kmsg.ACLResourceTypeTopic, "re-hidden", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead))
	img := n.b.Image()
	openID, hiddenID := [16]byte(img.Topics["re-open"].ID), [16]byte(img.Topics["re-hidden"].ID)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "gre", "member-re", 0
	hb.RebalanceTimeoutMillis = 30000
	hb.SubscribedTopicRegex = kmsg.StringPtr("re-.*")
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	assigned := func() map[[16]byte]int {
		t.Helper()
		for i := 0; ; i++ {
			r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb)
			if r.ErrorCode == kerr.CoordinatorNotAvailable.Code || r.ErrorCode == kerr.CoordinatorLoadInProgress.Code || r.ErrorCode == kerr.NotCoordinator.Code {
				if i > 50 {
					t.Fatal(kerr.ErrorForCode(r.ErrorCode))
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if r.ErrorCode != 0 {
				t.Fatalf("heartbeat: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
			}
			hb.MemberEpoch = r.MemberEpoch
			hb.SubscribedTopicRegex, hb.RebalanceTimeoutMillis = nil, -1
			out := map[[16]byte]int{}
			if r.Assignment != nil {
				for _, tp := range r.Assignment.Topics {
					out[tp.TopicID] += len(tp.Partitions)
				}
			}
			return out
		}
	}
	// The regex is new to the group: the refresh the first heartbeat asks
	// for resolves it (with that member's ACLs), and a later heartbeat
	// gets the matched topics.
	got := assigned()
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); got = assigned() {
		time.Sleep(100 * time.Millisecond)
	}
	if got[openID] != 2 || got[hiddenID] != 0 || len(got) != 1 {
		t.Fatalf("assignment %v: want re-open's 2 partitions only (re-hidden may not be described)", got)
	}

	// DESCRIBE granted on re-hidden: a later heartbeat resolves the regex
	// again (the metadata image moved) and assigns it too.
	grant(creation(kmsg.ACLResourceTypeTopic, "re-hidden", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationDescribe))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := assigned()
		if got[hiddenID] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-hidden never assigned after DESCRIBE was granted: %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
