package handler_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848Props keeps KIP-848 heartbeats fast in tests.
var kip848Props = map[string]string{
	"group.initial.rebalance.delay.ms":         "0",
	"offsets.topic.num.partitions":             "5",
	"group.consumer.heartbeat.interval.ms":     "200",
	"group.consumer.min.heartbeat.interval.ms": "100",
	"group.consumer.session.timeout.ms":        "10000",
	"group.consumer.min.session.timeout.ms":    "1000",
}

// owners tracks which member holds each partition, failing the test when
// a partition is given to a member while another still holds it.
type owners struct {
	t  *testing.T
	mu sync.Mutex
	by map[int32]string
}

func (o *owners) assigned(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, parts := range ps {
		for _, p := range parts {
			if cur, ok := o.by[p]; ok && cur != member {
				o.t.Errorf("partition %d assigned to %s while %s holds it", p, member, cur)
			}
			o.by[p] = member
		}
	}
}

func (o *owners) released(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, parts := range ps {
		for _, p := range parts {
			if o.by[p] == member {
				delete(o.by, p)
			}
		}
	}
}

// TestKIP848FranzGoMembershipChanges runs franz-go consumers with the
// server-side balancer (KIP-848 ConsumerGroupHeartbeat) on a 12-partition
// topic: members join and leave mid-stream, every record is consumed, no
// partition is held by two members at once, and the committed offsets
// reach the log end. The group is a consumer group (ListGroups type,
// ConsumerGroupDescribe epochs).
func TestKIP848FranzGoMembershipChanges(t *testing.T) {
	n := startNode(t, "", kip848Props)
	const topic, group, total = "events848", "franz-848", 6000
	createTopic(t, n.client(), topic, 12, nil)

	own := &owners{t: t, by: map[int32]string{}}
	var mu sync.Mutex
	seen := map[string]int{}
	byMember := map[string]int{}
	var wg sync.WaitGroup
	type member struct {
		cl     *kgo.Client
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(name string) *member {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assigned(name, ps) }),
			kgo.OnPartitionsRevoked(func(c context.Context, cl *kgo.Client, ps map[string][]int32) {
				// Commit what was consumed before giving the partitions up.
				if err := cl.CommitUncommittedOffsets(c); err != nil && c.Err() == nil {
					t.Logf("%s: commit on revoke: %v", name, err)
				}
				own.released(name, ps)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(name, ps) }))
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(context.Background())
		m := &member{cl: cl, cancel: cancel, done: make(chan struct{})}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(m.done)
			for {
				fs := cl.PollFetches(c)
				if c.Err() != nil {
					return
				}
				fs.EachError(func(tp string, p int32, err error) { t.Errorf("%s: fetch %s/%d: %v", name, tp, p, err) })
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; byMember[name]++ })
				mu.Unlock()
				cl.MarkCommitRecords(fs.Records()...)
				if err := cl.CommitMarkedOffsets(c); err != nil && c.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
		}()
		return m
	}
	stop := func(m *member) {
		m.cancel()
		<-m.done
		m.cl.Close() // commits nothing more, leaves the group (epoch -1)
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for count() < want {
			if time.Now().After(deadline) {
				t.Fatalf("consumed %d distinct records, want %d", count(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	adm := kadm.NewClient(n.client())
	waitMembers := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{group}
			resp, err := req.RequestWith(ctx(t), n.client())
			if err != nil {
				t.Fatal(err)
			}
			g := resp.Groups[0]
			if g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s: %v state %s with %d members, want Stable with %d", group, kerr.ErrorForCode(g.ErrorCode), g.State, len(g.Members), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	m1, m2, m3 := start("m1"), start("m2"), start("m3")
	waitMembers(3)
	produceN(t, n, topic, 0, 2000)
	waitFor(2000)
	m4 := start("m4")
	waitMembers(4)
	produceN(t, n, topic, 2000, 2000)
	stop(m2)
	waitMembers(3)
	produceN(t, n, topic, 4000, 2000)
	waitFor(total)

	// The group is listed as a consumer group and described with epochs.
	listed, err := adm.ListGroupsByType(ctx(t), []string{"consumer"})
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed[group]; !ok || lg.ProtocolType != "consumer" {
		t.Errorf("ListGroups(consumer) = %v, want %s of protocol type consumer", listed, group)
	}
	if classic, err := adm.ListGroupsByType(ctx(t), []string{"classic"}); err != nil || len(classic) != 0 {
		t.Errorf("ListGroups(classic) = %v, %v; want none", classic, err)
	}

	for _, m := range []*member{m1, m3, m4} {
		stop(m)
	}
	wg.Wait()
	mu.Lock()
	t.Logf("records per member: %v", byMember)
	if byMember["m4"] == 0 {
		t.Error("the member that joined mid-stream got nothing")
	}
	dups := 0
	for i := 0; i < total; i++ {
		switch k := seen[strconv.Itoa(i)]; {
		case k == 0:
			t.Errorf("record %d not consumed", i)
		case k > 1:
			dups++
		}
	}
	mu.Unlock()
	t.Logf("records consumed more than once: %d", dups)
	checkCommittedAtEnd(t, n, group, topic)
}

// TestKIP848OffsetCommitMemberEpoch checks OffsetCommit v9 and
// OffsetFetch v9 against a consumer group: a stale member epoch is
// STALE_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID, the member's
// own epoch commits, and ApiVersions advertises the APIs and group.version.
func TestKIP848OffsetCommitMemberEpoch(t *testing.T) {
	n := startNode(t, "", kip848Props)
	cl := n.client()
	createTopic(t, cl, "t848", 2, nil)

	av := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	var hb bool
	for _, k := range av.ApiKeys {
		if k.ApiKey == 68 && k.MaxVersion == 1 {
			hb = true
		}
	}
	var gv int16
	for _, f := range av.FinalizedFeatures {
		if f.Name == "group.version" {
			gv = f.MaxVersionLevel
		}
	}
	if !hb || gv != 1 {
		t.Fatalf("ApiVersions: ConsumerGroupHeartbeat v1 advertised %v, group.version %d", hb, gv)
	}

	var resp *kmsg.ConsumerGroupHeartbeatResponse
	for i := 0; ; i++ {
		hbReq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hbReq.Group, hbReq.MemberID, hbReq.MemberEpoch = "g848", "member-1", 0
		hbReq.RebalanceTimeoutMillis = 30000
		hbReq.SubscribedTopicNames = []string{"t848"}
		hbReq.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp = request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hbReq)
		if resp.ErrorCode == 0 || i > 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp.ErrorCode != 0 || resp.MemberEpoch < 1 {
		t.Fatalf("join: %v epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch)
	}
	epoch := resp.MemberEpoch
	commit := func(member string, e int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "g848", member, e
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t848"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 7
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return request[*kmsg.OffsetCommitResponse](t, pinned(n, 8, 9), req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("member-1", epoch+5); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("stale epoch commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("nobody", epoch); code != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("member-1", epoch); code != 0 {
		t.Errorf("member commit: %v", kerr.ErrorForCode(code))
	}
	fetch := func(member string, e int32) (int16, int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberEpoch = "g848", e
		g.MemberID = &member
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t848", Partitions: []int32{0}}}
		req.Groups = append(req.Groups, g)
		r := request[*kmsg.OffsetFetchResponse](t, cl, req).Groups[0]
		if r.ErrorCode != 0 || len(r.Topics) == 0 {
			return r.ErrorCode, -1
		}
		return 0, r.Topics[0].Partitions[0].Offset
	}
	if code, _ := fetch("member-1", epoch+5); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("stale epoch fetch: %v", kerr.ErrorForCode(code))
	}
	if code, off := fetch("member-1", epoch); code != 0 || off != 7 {
		t.Errorf("member fetch: %v offset %d, want 7", kerr.ErrorForCode(code), off)
	}
	// The status pages' summary (/api/v1/groups) shows the type, the
	// epochs and the member's target.
	var found bool
	for _, sum := range n.h.Groups().Summaries() {
		if sum.ID != "g848" {
			continue
		}
		found = true
		if sum.Type != "consumer" || sum.GroupEpoch != epoch || sum.AssignmentEpoch != epoch || sum.Assignor != "uniform" ||
			len(sum.Members) != 1 || sum.Members[0].MemberEpoch != epoch || len(sum.Members[0].Target) != 2 || len(sum.Offsets) != 1 {
			t.Errorf("summary %+v", sum)
		}
	}
	if !found {
		t.Error("no summary of the consumer group")
	}
	// A classic JoinGroup on the non-empty consumer group joins it as a
	// classic-protocol member (after KIP-394's MEMBER_ID_REQUIRED); a
	// protocol type other than consumer, or a malformed embedded
	// protocol, is refused.
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "g848", "connect", 10000, 10000
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Topics = []string{"t848"}
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	if r := request[*kmsg.JoinGroupResponse](t, cl, jg); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("classic join of a consumer group with protocol type connect: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	jg.ProtocolType = "consumer"
	r := request[*kmsg.JoinGroupResponse](t, cl, jg)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("classic join of a consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	jg.MemberID = r.MemberID
	if r := request[*kmsg.JoinGroupResponse](t, cl, jg); r.ErrorCode != 0 || r.Generation <= epoch || r.LeaderID != "" {
		t.Errorf("classic rejoin of a consumer group: %v generation %d leader %q", kerr.ErrorForCode(r.ErrorCode), r.Generation, r.LeaderID)
	}
	jg.Protocols[0].Metadata = []byte{0, 0}
	if r := request[*kmsg.JoinGroupResponse](t, cl, jg); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("classic join with a malformed subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestKIP848ProtocolOffAndMaxSize checks group.coordinator.rebalance.protocols
// without consumer (ConsumerGroupHeartbeat not advertised, answered
// UNSUPPORTED_VERSION) and group.consumer.max.size (GROUP_MAX_SIZE_REACHED).
func TestKIP848ProtocolOffAndMaxSize(t *testing.T) {
	join := func(cl *kgo.Client, member string) int16 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "gmax", member, 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"tmax"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for i := 0; ; i++ {
			r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, req)
			if (r.ErrorCode != kerr.CoordinatorNotAvailable.Code && r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.NotCoordinator.Code) || i > 50 {
				return r.ErrorCode
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	off := map[string]string{"group.coordinator.rebalance.protocols": "classic"}
	for k, v := range kip848Props {
		off[k] = v
	}
	n := startNode(t, "", off)
	cl := n.client()
	av := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	for _, k := range av.ApiKeys {
		if k.ApiKey == 68 || k.ApiKey == 69 {
			t.Errorf("API %d advertised with the consumer protocol off", k.ApiKey)
		}
	}
	// franz-go sends no request the broker does not advertise: write it.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 1, "gmax", "a"
	hb.SubscribedTopicNames = []string{"tmax"}
	if r := rawRequest(t, n.addr, hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("heartbeat with the consumer protocol off: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	max := map[string]string{"group.consumer.max.size": "2"}
	for k, v := range kip848Props {
		max[k] = v
	}
	n2 := startNode(t, "", max)
	cl2 := n2.client()
	createTopic(t, cl2, "tmax", 2, nil)
	for _, m := range []string{"a", "b"} {
		if code := join(cl2, m); code != 0 {
			t.Fatalf("join %s: %v", m, kerr.ErrorForCode(code))
		}
	}
	if code := join(cl2, "c"); code != kerr.GroupMaxSizeReached.Code {
		t.Errorf("third member of a group of at most 2: %v", kerr.ErrorForCode(code))
	}
}

// rawRequest sends req (at its set version) on a new connection and
// reads the answer, bypassing a client's version checks.
func rawRequest(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := (&kmsg.RequestFormatter{}).AppendRequest(nil, req, 7)
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	skip := 4 // correlation id
	if resp.IsFlexible() {
		skip++ // empty tagged fields
	}
	if err := resp.ReadFrom(buf[skip:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestKIP848GroupConfigOverride: consumer.heartbeat.interval.ms set on a
// GROUP resource (IncrementalAlterConfigs) is the interval the group's
// members are given; other groups keep the broker's.
func TestKIP848GroupConfigOverride(t *testing.T) {
	props := map[string]string{"group.consumer.min.heartbeat.interval.ms": "100", "group.consumer.heartbeat.interval.ms": "5000"}
	for k, v := range groupProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	cl := n.client()
	createTopic(t, cl, "tcfg", 1, nil)
	v := "1234"
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "gcfg"
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "consumer.heartbeat.interval.ms", Value: &v}}
	iac.Resources = append(iac.Resources, rr)
	if r := request[*kmsg.IncrementalAlterConfigsResponse](t, cl, iac); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group config: %v", kerr.ErrorForCode(r.Resources[0].ErrorCode))
	}
	interval := func(group string) int32 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, "m-"+group, 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"tcfg"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for i := 0; ; i++ {
			r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, req)
			if r.ErrorCode == 0 {
				return r.HeartbeatIntervalMillis
			}
			if i > 50 {
				t.Fatalf("join %s: %v", group, kerr.ErrorForCode(r.ErrorCode))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if got := interval("gcfg"); got != 1234 {
		t.Errorf("group with an override: heartbeat interval %d, want 1234", got)
	}
	if got := interval("gother"); got != 5000 {
		t.Errorf("group without an override: heartbeat interval %d, want 5000", got)
	}
}

// TestKIP848TxnOffsetCommitMemberEpoch: a TxnOffsetCommit from a consumer
// group member carries its member epoch as the generation id: a stale
// one is ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, the
// member's own epoch is accepted (Kafka's
// ConsumerGroup.validateOffsetCommit with isTransactional).
func TestKIP848TxnOffsetCommitMemberEpoch(t *testing.T) {
	n := startNode(t, "", kip848Props)
	cl := n.client()
	createTopic(t, cl, "ttx", 1, nil)
	var epoch int32
	for i := 0; ; i++ {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch = "gtx", "member-tx", 0
		hb.RebalanceTimeoutMillis = 30000
		hb.SubscribedTopicNames = []string{"ttx"}
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, hb)
		if r.ErrorCode == 0 {
			epoch = r.MemberEpoch
			break
		}
		if i > 50 {
			t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var pid int64
	var pepoch int16
	for i := 0; ; i++ {
		ip := kmsg.NewPtrInitProducerIDRequest()
		txid := "tx-848"
		ip.TransactionalID, ip.TransactionTimeoutMillis = &txid, 60000
		r := request[*kmsg.InitProducerIDResponse](t, cl, ip)
		if r.ErrorCode == 0 {
			pid, pepoch = r.ProducerID, r.ProducerEpoch
			break
		}
		if i > 50 {
			t.Fatalf("init producer id: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		time.Sleep(100 * time.Millisecond)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx-848", pid, pepoch, "gtx"
	if r := request[*kmsg.AddOffsetsToTxnResponse](t, cl, ao); r.ErrorCode != 0 {
		t.Fatalf("add offsets to txn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commit := func(member string, gen int32) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx-848", pid, pepoch, "gtx"
		req.MemberID, req.Generation = member, gen
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "ttx"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 3
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return request[*kmsg.TxnOffsetCommitResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("member-tx", epoch+3); code != kerr.IllegalGeneration.Code {
		t.Errorf("stale member epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("nobody", epoch); code != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member: %v", kerr.ErrorForCode(code))
	}
	if code := commit("member-tx", epoch); code != 0 {
		t.Errorf("the member at its epoch: %v", kerr.ErrorForCode(code))
	}
}

// TestMetadataV12ByTopicID: Metadata v12 is advertised and finds a topic
// by id (librdkafka's KIP-848 consumer resolves its assignment's topic
// ids with Metadata v12 and asserts the broker supports it).
func TestMetadataV12ByTopicID(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	createTopic(t, cl, "byid", 2, nil)
	req := kmsg.NewPtrMetadataRequest()
	name := "byid"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	r := request[*kmsg.MetadataResponse](t, cl, req)
	id := r.Topics[0].TopicID
	byID := kmsg.NewPtrMetadataRequest()
	byID.Version = 12
	byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}}
	got := rawRequest(t, n.addr, byID).(*kmsg.MetadataResponse)
	if len(got.Topics) != 1 || got.Topics[0].ErrorCode != 0 || got.Topics[0].Topic == nil || *got.Topics[0].Topic != "byid" || len(got.Topics[0].Partitions) != 2 {
		t.Fatalf("Metadata v12 by id: %+v", got.Topics)
	}
	av := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	for _, k := range av.ApiKeys {
		if k.ApiKey == 3 && k.MaxVersion < 12 {
			t.Errorf("Metadata advertised up to v%d, want 12", k.MaxVersion)
		}
	}
}
