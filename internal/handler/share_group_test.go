package handler_test

import (
	"context"
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/share"
)

// shareGroupProps keeps share-group heartbeats fast in tests.
var shareGroupProps = map[string]string{
	"offsets.topic.num.partitions":          "5",
	"group.share.heartbeat.interval.ms":     "1000",
	"group.share.min.heartbeat.interval.ms": "1000",
	"group.share.session.timeout.ms":        "10000",
	"group.share.min.session.timeout.ms":    "1000",
}

// describeShare describes one share group, retrying while its coordinator
// is loading.
func describeShare(t *testing.T, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	for i := 0; ; i++ {
		g := request[*kmsg.ShareGroupDescribeResponse](t, cl, req).Groups[0]
		if (g.ErrorCode != kerr.CoordinatorNotAvailable.Code && g.ErrorCode != kerr.CoordinatorLoadInProgress.Code && g.ErrorCode != kerr.NotCoordinator.Code) || i > 50 {
			return g
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shareHeartbeat sends one ShareGroupHeartbeat, retrying while the
// coordinator is loading.
func shareHeartbeat(t *testing.T, cl *kgo.Client, group, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
	for i := 0; ; i++ {
		r := request[*kmsg.ShareGroupHeartbeatResponse](t, cl, req)
		if (r.ErrorCode != kerr.CoordinatorNotAvailable.Code && r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.NotCoordinator.Code) || i > 50 {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShareGroupFranzGoMembers runs two franz-go share consumers
// (kgo.ShareGroup) on a 3-partition topic: both join the share group
// through ShareGroupHeartbeat, ShareGroupDescribe shows them with every
// partition assigned to one of them, ListGroups lists the group as a share
// group, DescribeGroups answers it Dead (it is not a classic group), DeleteGroups
// refuses it while it has members and deletes it once they left, with
// the state of its share partitions.
func TestShareGroupFranzGoMembers(t *testing.T) {
	n := startNode(t, "", shareGroupProps)
	cl := n.client()
	const topic, group = "queue", "workers"
	createTopic(t, cl, topic, 3, nil)

	av := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	var keys []int16
	for _, k := range av.ApiKeys {
		if k.ApiKey == 76 || k.ApiKey == 77 {
			keys = append(keys, k.ApiKey)
		}
	}
	sv := int16(-1)
	for _, f := range av.FinalizedFeatures {
		if f.Name == "share.version" {
			sv = f.MaxVersionLevel
		}
	}
	if !slices.Equal(keys, []int16{76, 77}) || sv != 2 {
		t.Fatalf("ApiVersions: share APIs %v, share.version %d", keys, sv)
	}

	var members []*kgo.Client
	for _, name := range []string{"w1", "w2"} {
		m, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(name), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
		c, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for c.Err() == nil {
				m.PollFetches(c) // ShareFetch is another API: only the membership is tested
			}
		}()
		t.Cleanup(func() { cancel(); <-done; m.Close() })
	}

	var g kmsg.ShareGroupDescribeResponseGroup
	deadline := time.Now().Add(20 * time.Second)
	for {
		g = describeShare(t, cl, group)
		assigned := map[int32]int{}
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				for _, p := range tp.Partitions {
					assigned[p]++
				}
			}
		}
		if g.ErrorCode == 0 && len(g.Members) == 2 && len(assigned) == 3 && g.Members[0].MemberEpoch == g.AssignmentEpoch && g.Members[1].MemberEpoch == g.AssignmentEpoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group not formed: %+v", g)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if g.GroupState != "Stable" || g.Assignor != "simple" || g.GroupEpoch < 2 {
		t.Fatalf("describe: %+v", g)
	}
	clients := map[string]bool{}
	for _, m := range g.Members {
		clients[m.ClientID] = true
		if !slices.Equal(m.SubscribedTopicNames, []string{topic}) || m.Assignment.TopicPartitions[0].Topic != topic {
			t.Fatalf("member %+v", m)
		}
		if n := len(m.Assignment.TopicPartitions[0].Partitions); n != 1 && n != 2 {
			t.Fatalf("member %s has %d partitions", m.MemberID, n)
		}
	}
	if !clients["w1"] || !clients["w2"] {
		t.Fatalf("members' client ids %v", clients)
	}

	// kadm's share-group describe reads the same.
	described, err := kadm.NewClient(cl).DescribeShareGroups(ctx(t), group)
	if d := described[group]; err != nil || d.Err != nil || d.GroupState != "Stable" || len(d.Members) != 2 || len(d.AssignedPartitions().Sorted()) != 1 {
		t.Fatalf("kadm describe: %v %+v", err, d)
	}
	// The status pages' summary (/api/v1/groups) shows the share group,
	// its members and their partitions.
	found := false
	for _, sum := range n.h.Groups().Summaries() {
		if sum.ID != group {
			continue
		}
		found = true
		parts := 0
		for _, m := range sum.Members {
			parts += len(m.Assigned)
		}
		if sum.Type != "share" || sum.State != "Stable" || sum.Assignor != "simple" || len(sum.Members) != 2 || parts != 3 {
			t.Fatalf("summary %+v", sum)
		}
	}
	if !found {
		t.Fatal("no summary of the share group")
	}

	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"share"}
	found = false
	for _, x := range request[*kmsg.ListGroupsResponse](t, cl, lg).Groups {
		found = found || (x.Group == group && x.GroupType == "share" && x.ProtocolType == "share" && x.GroupState == "Stable")
	}
	if !found {
		t.Fatal("ListGroups does not list the share group")
	}
	lg.TypesFilter = []string{"consumer", "classic"}
	for _, x := range request[*kmsg.ListGroupsResponse](t, cl, lg).Groups {
		if x.Group == group {
			t.Fatalf("share group listed as %s", x.GroupType)
		}
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	// DescribeGroups v5 (sluice's highest) has no error for it: Dead.
	if d := request[*kmsg.DescribeGroupsResponse](t, cl, dg).Groups[0]; d.ErrorCode != 0 || d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("DescribeGroups of a share group: %v %s", kerr.ErrorForCode(d.ErrorCode), d.State)
	}

	// The share partitions' state (here in a MemPersister standing for
	// the share coordinator) is deleted with the group.
	persister := share.NewMemPersister()
	n.h.Groups().SetSharePersister(persister)
	topicID := g.Members[0].Assignment.TopicPartitions[0].TopicID
	for p := int32(0); p < 3; p++ {
		if err := persister.Initialize(ctx(t), share.Key{Group: group, TopicID: topicID, Partition: p}, 1, 0); err != nil {
			t.Fatal(err)
		}
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{group}
	if r := request[*kmsg.DeleteGroupsResponse](t, cl, del); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with members: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	for _, m := range members {
		m.Close() // leaves: ShareGroupHeartbeat epoch -1
	}
	if g := describeShare(t, cl, group); g.GroupState != "Empty" || len(g.Members) != 0 {
		t.Fatalf("after the members left: %+v", g)
	}
	if r := request[*kmsg.DeleteGroupsResponse](t, cl, del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty share group: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	if g := describeShare(t, cl, group); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after delete: %+v", g)
	}
	for p := int32(0); p < 3; p++ {
		if st, err := persister.Read(ctx(t), share.Key{Group: group, TopicID: topicID, Partition: p}, 0); err != nil || st.StartOffset != -1 {
			t.Fatalf("share state of partition %d after delete: %+v %v", p, st, err)
		}
	}
}

// TestShareGroupTypesExclusive: a group id used by a consumer group is not
// a share group and the other way round, and a classic JoinGroup for a
// share group is refused with INCONSISTENT_GROUP_PROTOCOL; a member id
// that is not a UUID is INVALID_REQUEST.
func TestShareGroupTypesExclusive(t *testing.T) {
	props := map[string]string{}
	for k, v := range shareGroupProps {
		props[k] = v
	}
	for k, v := range kip848Props {
		props[k] = v
	}
	n := startNode(t, "", props)
	cl := n.client()
	createTopic(t, cl, "tx", 2, nil)
	uuid := func(b byte) string { return base64.URLEncoding.EncodeToString(append(make([]byte, 15), b)) }

	if r := shareHeartbeat(t, cl, "sg", "not-a-uuid", 0, []string{"tx"}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("member id not a UUID: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := shareHeartbeat(t, cl, "sg", uuid(1), 0, []string{"tx"})
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.TopicPartitions[0].Partitions) != 2 || r.HeartbeatIntervalMillis != 1000 {
		t.Fatalf("join: %+v", r)
	}

	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.MemberEpoch, cg.RebalanceTimeoutMillis = "sg", "c1", 0, 30000
	cg.SubscribedTopicNames, cg.Topics = []string{"tx"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, cg); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat on a share group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "sg", 10000, 10000, "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	if r := request[*kmsg.JoinGroupResponse](t, cl, jg); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join on a share group: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	cg.Group = "cg"
	for i := 0; ; i++ {
		r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, cg)
		if r.ErrorCode == 0 {
			break
		}
		if i > 50 {
			t.Fatalf("consumer join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := shareHeartbeat(t, cl, "cg", uuid(2), 0, []string{"tx"}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if g := describeShare(t, cl, "cg"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share describe of a consumer group: %v", kerr.ErrorForCode(g.ErrorCode))
	}
}

// TestShareGroupConfigs: share.heartbeat.interval.ms and
// share.session.timeout.ms set on a GROUP resource are what the share
// group's members get; the share-partition configs are validated
// (INVALID_CONFIG, nothing changed) and read back through
// Broker.GroupConfig.
func TestShareGroupConfigs(t *testing.T) {
	n := startNode(t, "", shareGroupProps)
	cl := n.client()
	createTopic(t, cl, "tq", 1, nil)
	alter := func(group string, kv ...string) int16 {
		iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		for i := 0; i < len(kv); i += 2 {
			v := kv[i+1]
			rr.Configs = append(rr.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: kv[i], Value: &v})
		}
		iac.Resources = append(iac.Resources, rr)
		return request[*kmsg.IncrementalAlterConfigsResponse](t, cl, iac).Resources[0].ErrorCode
	}
	for _, bad := range [][]string{
		{"share.delivery.count.limit", "0"},
		{"share.auto.offset.reset", "by_duration:1h"},
		{"share.record.lock.duration.ms", "1000"},
		{"share.isolation.level", "snapshot"},
		{"share.heartbeat.interval.ms", "20000"},
	} {
		if code := alter("gq", bad...); code != kerr.InvalidConfig.Code {
			t.Errorf("%v: %v", bad, kerr.ErrorForCode(code))
		}
	}
	if code := alter("gq", "share.heartbeat.interval.ms", "1500", "share.session.timeout.ms", "50000",
		"share.auto.offset.reset", "by_duration:PT1H", "share.delivery.count.limit", "3", "share.isolation.level", "read_committed"); code != 0 {
		t.Fatalf("alter: %v", kerr.ErrorForCode(code))
	}
	for name, want := range map[string]string{"share.auto.offset.reset": "by_duration:PT1H", "share.delivery.count.limit": "3", "share.isolation.level": "read_committed"} {
		if v, set := n.b.GroupConfig("gq", name); v != want || !set {
			t.Errorf("%s: %q %v", name, v, set)
		}
	}
	if v, set := n.b.GroupConfig("other", "share.delivery.count.limit"); v != "5" || set {
		t.Errorf("default delivery count limit: %q %v", v, set)
	}
	id := base64.URLEncoding.EncodeToString(make([]byte, 16))
	if r := shareHeartbeat(t, cl, "gq", id, 0, []string{"tq"}); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 1500 {
		t.Fatalf("override: %+v", r)
	}
	if r := shareHeartbeat(t, cl, "other", id, 0, []string{"tq"}); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 1000 {
		t.Fatalf("broker default: %+v", r)
	}
}

// TestShareGroupSessionExpiryAndReload: a share member that stops
// heartbeating is removed after share.session.timeout.ms (a coordinator
// timer, on a manual clock here) and the other member takes its
// partitions; after a restart the group is loaded back from
// __consumer_offsets with the same epochs and assignments.
func TestShareGroupSessionExpiryAndReload(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, dir, shareGroupProps, clk)
	cl := n.client()
	createTopic(t, cl, "tr", 4, nil)
	a := base64.URLEncoding.EncodeToString(append(make([]byte, 15), 1))
	b := base64.URLEncoding.EncodeToString(append(make([]byte, 15), 2))
	if r := shareHeartbeat(t, cl, "gr", a, 0, []string{"tr"}); r.ErrorCode != 0 {
		t.Fatalf("join a: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(t, cl, "gr", b, 0, []string{"tr"}); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("join b: %+v", r)
	}
	if r := shareHeartbeat(t, cl, "gr", a, 1, nil); r.ErrorCode != 0 || r.MemberEpoch != 2 || r.Assignment == nil {
		t.Fatalf("a at epoch 2: %+v", r)
	}
	before := describeShare(t, cl, "gr")
	n.stop()

	clk2 := clock.NewManual(time.Now())
	n2 := startNodeClock(t, dir, shareGroupProps, clk2)
	cl2 := n2.client()
	after := describeShare(t, cl2, "gr")
	if after.ErrorCode != 0 || after.GroupEpoch != before.GroupEpoch || len(after.Members) != 2 {
		t.Fatalf("reloaded: %+v\nbefore: %+v", after, before)
	}
	for i := range after.Members {
		if after.Members[i].MemberEpoch != before.Members[i].MemberEpoch ||
			!slices.Equal(after.Members[i].Assignment.TopicPartitions[0].Partitions, before.Members[i].Assignment.TopicPartitions[0].Partitions) {
			t.Fatalf("member %d reloaded as %+v, was %+v", i, after.Members[i], before.Members[i])
		}
	}
	// b keeps heartbeating, a does not: a is removed once its session
	// (10s, armed again at the load) has passed.
	epoch, got := int32(2), 0
	for range 6 {
		clk2.Advance(2 * time.Second)
		r := shareHeartbeat(t, cl2, "gr", b, epoch, nil)
		if r.ErrorCode != 0 {
			t.Fatalf("b: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		epoch = r.MemberEpoch
		if r.Assignment != nil {
			got = len(r.Assignment.TopicPartitions[0].Partitions)
		}
	}
	g := describeShare(t, cl2, "gr")
	if len(g.Members) != 1 || g.Members[0].MemberID != b || g.GroupEpoch != before.GroupEpoch+1 {
		t.Fatalf("after a's session expired: %+v", g)
	}
	if epoch != g.GroupEpoch || got != 4 {
		t.Fatalf("b after a left: epoch %d, %d partitions", epoch, got)
	}
	if r := shareHeartbeat(t, cl2, "gr", a, 2, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("a after expiry: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestShareVersionGate: a new Raft cluster finalizes share.version 2 and
// advertises ShareGroupHeartbeat and ShareGroupDescribe; downgraded to 0
// (UpdateFeatures) they leave ApiVersions and answer UNSUPPORTED_VERSION;
// at 1 again they are served.
func TestShareVersionGate(t *testing.T) {
	n := startRaftNode(t, shareGroupProps)
	cl := n.client()
	state := func() (advertised []int16, level int16) {
		av := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
		for _, k := range av.ApiKeys {
			if k.ApiKey == 76 || k.ApiKey == 77 {
				advertised = append(advertised, k.ApiKey)
			}
		}
		for _, f := range av.FinalizedFeatures {
			if f.Name == "share.version" {
				level = f.MaxVersionLevel
			}
		}
		return advertised, level
	}
	set := func(level int16) {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "share.version", level, 1
		if level == 0 {
			u.UpgradeType = 2 // safe downgrade
		}
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		req.TimeoutMillis = 10000
		r := request[*kmsg.UpdateFeaturesResponse](t, cl, req)
		if r.ErrorCode != 0 {
			t.Fatalf("share.version %d: %v", level, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if keys, level := state(); !slices.Equal(keys, []int16{76, 77}) || level != 2 {
		t.Fatalf("new cluster: share APIs %v, share.version %d", keys, level)
	}
	set(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		keys, level := state()
		if len(keys) == 0 && level == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after downgrade: share APIs %v, share.version %d", keys, level)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID = 1, "g", base64.URLEncoding.EncodeToString(make([]byte, 16))
	hb.SubscribedTopicNames = []string{"t"}
	if r := rawRequest(t, n.addr, hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat at share.version 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	set(1)
	createTopic(t, cl, "t", 1, nil)
	for keys, _ := state(); len(keys) != 2; keys, _ = state() {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("after upgrade: share APIs %v", keys)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A new client: the first one remembers the APIs as unsupported.
	if r := shareHeartbeat(t, n.client(), "g", hb.MemberID, 0, []string{"t"}); r.ErrorCode != 0 {
		t.Fatalf("heartbeat at share.version 1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestShareGroupACLs: ShareGroupHeartbeat needs READ on the group and
// DESCRIBE on every subscribed topic, ShareGroupDescribe DESCRIBE on the
// group and on the topics of its assignments, as Kafka's KafkaApis.
func TestShareGroupACLs(t *testing.T) {
	props := map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true"}
	for k, v := range shareGroupProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	cl := n.client()
	for _, topic := range []string{"open", "secret", "later"} {
		createTopic(t, cl, topic, 1, nil)
	}
	deny := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
		c := creation(rt, name, kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", op)
		c.PermissionType = kmsg.ACLPermissionTypeDeny
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = append(req.Creations, c)
		if r := request[*kmsg.CreateACLsResponse](t, cl, req); r.Results[0].ErrorCode != 0 {
			t.Fatalf("deny %s: %v", name, kerr.ErrorForCode(r.Results[0].ErrorCode))
		}
	}
	deny(kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLOperationDescribe)
	deny(kmsg.ACLResourceTypeGroup, "denied", kmsg.ACLOperationRead)
	deny(kmsg.ACLResourceTypeGroup, "hidden", kmsg.ACLOperationDescribe)
	id := base64.URLEncoding.EncodeToString(make([]byte, 16))
	// Straight to the node: FindCoordinator needs DESCRIBE on the group,
	// which an ACL naming the group takes away here.
	md := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	node := cl.Broker(int(md.Brokers[0].NodeID))
	direct := func(req kmsg.Request) kmsg.Response {
		resp, err := node.Request(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "denied", id, []string{"open"}
	if r := direct(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("group without READ: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(t, cl, "sg", id, 0, []string{"open", "secret"}); r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("subscribing to a topic without DESCRIBE: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(t, cl, "sg", id, 0, []string{"open", "later"}); r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if g := describeShare(t, cl, "sg"); g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("describe: %+v", g)
	}
	dr := kmsg.NewPtrShareGroupDescribeRequest()
	dr.GroupIDs = []string{"hidden"}
	if g := direct(dr).(*kmsg.ShareGroupDescribeResponse).Groups[0]; g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("describe without DESCRIBE on the group: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	// A topic of the assignment the client may no longer describe.
	deny(kmsg.ACLResourceTypeTopic, "later", kmsg.ACLOperationDescribe)
	if g := describeShare(t, cl, "sg"); g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 {
		t.Errorf("describe with an assigned topic not describable: %v, %d members", kerr.ErrorForCode(g.ErrorCode), len(g.Members))
	}
}
