package handler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/share"
)

// TestShareAPIsAdvertised: ApiVersions lists ShareFetch and
// ShareAcknowledge at versions 1-2.
func TestShareAPIsAdvertised(t *testing.T) {
	n := startNode(t, "", nil)
	resp := request[*kmsg.ApiVersionsResponse](t, n.client(), kmsg.NewPtrApiVersionsRequest())
	found := 0
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 78 || k.ApiKey == 79 {
			found++
			if k.MinVersion != 1 || k.MaxVersion != 2 {
				t.Errorf("key %d versions %d-%d", k.ApiKey, k.MinVersion, k.MaxVersion)
			}
		}
	}
	if found != 2 {
		t.Fatalf("%d of ShareFetch/ShareAcknowledge advertised", found)
	}
}

// windowOf returns the share partition's in-flight window.
func windowOf(t *testing.T, n *node, group, topic string) []share.RecordInfo {
	t.Helper()
	id, _ := n.b.TopicID(topic)
	sp := n.h.SharePartitions().Held(share.Key{Group: group, TopicID: id, Partition: 0})
	if sp == nil {
		t.Fatalf("no share partition %s/%s", group, topic)
	}
	return sp.Window(n.b.Now())
}

// TestShareBadAcknowledgements: acknowledgements of offsets never
// delivered, of another member's records, overlapping or reversed ranges,
// wrong type counts, unknown types, renew without IsRenewAck, and topics
// that do not exist get Kafka's errors and change nothing.
func TestShareBadAcknowledgements(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	sharePartTopic(t, n, "q", 10)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	if got := acquiredOf(t, a.fetch(4)); len(got) != 4 {
		t.Fatalf("a got %v", got)
	}
	b.fetch(0) // b holds 4-9
	before := windowOf(t, n, "sg", "q")
	cases := []struct {
		name string
		acks []acked
		want int16
	}{
		{"never delivered", []acked{{20, 21, []int8{1}}}, kerr.InvalidRecordState.Code},
		{"another member's", []acked{{5, 5, []int8{1}}}, kerr.InvalidRecordState.Code},
		{"partly another member's", []acked{{2, 5, []int8{1}}}, kerr.InvalidRecordState.Code},
		{"overlapping", []acked{{0, 2, []int8{1}}, {2, 3, []int8{1}}}, kerr.InvalidRequest.Code},
		{"reversed", []acked{{3, 1, []int8{1}}}, kerr.InvalidRequest.Code},
		{"type count", []acked{{0, 3, []int8{1, 1}}}, kerr.InvalidRequest.Code},
		{"unknown type", []acked{{0, 0, []int8{7}}}, kerr.InvalidRequest.Code},
		{"renew without IsRenewAck", []acked{{0, 0, []int8{4}}}, kerr.InvalidRequest.Code},
		{"negative offset", []acked{{-5, 0, []int8{1}}}, kerr.InvalidRequest.Code},
	}
	for _, c := range cases {
		r := a.ack(a.epoch, c.acks...)
		if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != c.want {
			t.Errorf("%s: %v / %v, want %v", c.name, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode), kerr.ErrorForCode(c.want))
		}
		f := a.fetch(0, c.acks...)
		if f.ErrorCode != 0 || f.Topics[0].Partitions[0].AcknowledgeErrorCode != c.want {
			t.Errorf("%s piggybacked: %v / %v", c.name, kerr.ErrorForCode(f.ErrorCode), kerr.ErrorForCode(f.Topics[0].Partitions[0].AcknowledgeErrorCode))
		}
	}
	after := windowOf(t, n, "sg", "q")
	if len(after) != len(before) {
		t.Fatalf("window %v -> %v", before, after)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("offset %d changed: %+v -> %+v", before[i].Offset, before[i], after[i])
		}
	}
	// An unknown topic id: UNKNOWN_TOPIC_ID for the partition.
	ghost := newShareMember(t, n, "sg", "q")
	ghost.topic = [16]byte{9, 9, 9}
	r := ghost.fetch(0)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", r)
	}
	// The good acknowledgement still works.
	if r := a.ack(a.epoch, acked{0, 3, []int8{1}}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("good ack: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
}

// TestShareSessionFlood: 100,000 members opening share sessions get
// SHARE_SESSION_LIMIT_REACHED past group.share.max.share.sessions
// (2,000), the cache stays at the limit, and the broker keeps serving
// (5,000 members under -short).
func TestShareSessionFlood(t *testing.T) {
	total := 100000
	if testing.Short() {
		total = 5000
	}
	n := startNode(t, "", nil)
	sharePartTopic(t, n, "q", 1)
	id, _ := n.b.TopicID("q")
	const workers = 8
	var mu sync.Mutex
	codes := map[int16]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := n.client()
			group := "flood"
			for i := 0; i < total/workers; i++ {
				member := newMemberID()
				req := kmsg.NewPtrShareFetchRequest()
				req.Version, req.GroupID, req.MemberID = 1, &group, &member
				tp := kmsg.NewShareFetchRequestTopic()
				tp.TopicID = id
				tp.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
				req.Topics = append(req.Topics, tp)
				resp, err := cl.Request(ctx(t), req)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				codes[resp.(*kmsg.ShareFetchResponse).ErrorCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if codes[0] != 2000 || codes[kerr.ShareSessionLimitReached.Code] != total-2000 {
		t.Fatalf("codes %v", codes)
	}
	if got := n.h.ShareSessions(); got != 2000 {
		t.Fatalf("%d sessions", got)
	}
	produceTo(t, manualClient(n), "q", 0, "still up")
}

// TestShareFetchLongPoll: a share fetch with nothing to acquire waits
// (MaxWaitMs) and is woken by records another member releases and by
// new records, not by its timeout.
func TestShareFetchLongPoll(t *testing.T) {
	n := startNode(t, "", map[string]string{"group.share.record.lock.duration.ms": "60000"})
	sharePartTopic(t, n, "q", 2)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	acquiredOf(t, a.fetch(0))
	poll := func() (map[int64]int16, time.Duration) {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &b.group, &b.id, b.epoch
		req.MaxWaitMillis, req.MinBytes = 20000, 1
		tp := kmsg.NewShareFetchRequestTopic()
		tp.TopicID = b.topic
		tp.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
		req.Topics = append(req.Topics, tp)
		start := time.Now()
		resp := request[*kmsg.ShareFetchResponse](t, b.cl, req)
		b.epoch++
		return acquiredOf(t, resp), time.Since(start)
	}
	// later runs fn after 300 ms; the returned channel closes when fn
	// returned (the poll may answer before: the test waits for fn).
	later := func(fn func() error) chan error {
		done := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			done <- fn()
		}()
		return done
	}
	release := later(func() error {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &a.group, &a.id, a.epoch
		tp := kmsg.NewShareAcknowledgeRequestTopic()
		tp.TopicID = a.topic
		tp.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{2}}}}}
		req.Topics = append(req.Topics, tp)
		_, err := a.cl.Request(context.Background(), req)
		return err
	})
	got, took := poll()
	if err := <-release; err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 2 || took > 10*time.Second {
		t.Fatalf("after a release: %v in %v", got, took)
	}
	producer := manualClient(n)
	produced := later(func() error {
		return producer.ProduceSync(context.Background(), &kgo.Record{Topic: "q", Partition: 0, Value: []byte("new")}).FirstErr()
	})
	got, took = poll()
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[2] != 1 || took > 10*time.Second {
		t.Fatalf("after a produce: %v in %v", got, took)
	}
}

// TestShareAcknowledgeRenew: a v2 renew acknowledgement (KIP-1222)
// extends the member's lock; the records are not redelivered when the
// first lock would have passed.
func TestShareAcknowledgeRenew(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", sharePartProps, clk)
	sharePartTopic(t, n, "q", 2)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	acquiredOf(t, a.fetch(0))
	clk.Advance(800 * time.Millisecond)
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = 2, &a.group, &a.id, a.epoch, true
	tp := kmsg.NewShareAcknowledgeRequestTopic()
	tp.TopicID = a.topic
	tp.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 1, AcknowledgeTypes: []int8{4}}}}}
	req.Topics = append(req.Topics, tp)
	resp := request[*kmsg.ShareAcknowledgeResponse](t, a.cl, req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("renew: %+v", resp)
	}
	a.epoch++
	clk.Advance(800 * time.Millisecond) // 1.6s after the fetch, 0.8s after the renew
	if got := acquiredOf(t, b.fetch(0)); len(got) != 0 {
		t.Fatalf("renewed records redelivered: %v", got)
	}
	if r := a.ack(a.epoch, acked{0, 1, []int8{1}}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accept after renew: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
}

// TestShareFetchLimits: MaxRecords with KIP-1206's record_limit takes
// exactly that many records out of a larger batch, batch_optimized the
// whole batch; BatchSize cuts AcquiredRecords.
func TestShareFetchLimits(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	createTopic(t, n.client(), "q", 1, nil)
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond))
	var rs []*kgo.Record
	for i := 0; i < 10; i++ {
		rs = append(rs, &kgo.Record{Topic: "q", Partition: 0, Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, n, "sg", "q")
	send := func(mode int8, maxRecords, batchSize int32) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 2, &m.group, &m.id, m.epoch
		req.MaxRecords, req.BatchSize, req.ShareAcquireMode = maxRecords, batchSize, mode
		tp := kmsg.NewShareFetchRequestTopic()
		tp.TopicID = m.topic
		tp.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
		req.Topics = append(req.Topics, tp)
		resp := request[*kmsg.ShareFetchResponse](t, m.cl, req)
		m.epoch++
		return resp
	}
	r := send(1, 3, 0)
	if got := acquiredOf(t, r); len(got) != 3 {
		t.Fatalf("record_limit 3: %v", got)
	}
	r = send(0, 2, 2)
	got := acquiredOf(t, r)
	if len(got) != 7 || len(r.Topics[0].Partitions[0].AcquiredRecords) != 4 {
		t.Fatalf("batch_optimized: %d records in %+v", len(got), r.Topics[0].Partitions[0].AcquiredRecords)
	}
}

// TestShareAuthorization: READ on the group and on the topic.
func TestShareAuthorization(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true"})
	sharePartTopic(t, n, "q", 1)
	m := newShareMember(t, n, "sg", "q")
	deny := func(rt kmsg.ACLResourceType, name string) {
		req := kmsg.NewPtrCreateACLsRequest()
		c := creation(rt, name, kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationRead)
		c.PermissionType = kmsg.ACLPermissionTypeDeny
		req.Creations = append(req.Creations, c)
		if r := request[*kmsg.CreateACLsResponse](t, m.cl, req); r.Results[0].ErrorCode != 0 {
			t.Fatalf("create acl: %v", kerr.ErrorForCode(r.Results[0].ErrorCode))
		}
	}
	deny(kmsg.ACLResourceTypeTopic, "q")
	waitFor(t, func() bool {
		r := m.fetch(0)
		m.epoch = 0
		return r.ErrorCode == 0 && r.Topics[0].Partitions[0].ErrorCode == kerr.TopicAuthorizationFailed.Code
	}, "TOPIC_AUTHORIZATION_FAILED")
	deny(kmsg.ACLResourceTypeGroup, "sg")
	waitFor(t, func() bool { return m.fetch(0).ErrorCode == kerr.GroupAuthorizationFailed.Code }, "GROUP_AUTHORIZATION_FAILED")
	if r := m.ack(1); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("ShareAcknowledge: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestShareFencedStateReloads: after AlterShareGroupOffsets gives a share
// partition a new state epoch, the leader's next write is fenced
// (FENCED_STATE_EPOCH) and the share partition is loaded again, at the new
// start offset. The records stay acquired for the whole test (a lock of
// a minute): an acknowledgement of a record whose lock expired fails
// INVALID_RECORD_STATE before any write could be fenced, which a loaded
// machine reached with the one-second lock of sharePartProps.
func TestShareFencedStateReloads(t *testing.T) {
	n := startNode(t, "", map[string]string{"group.share.record.lock.duration.ms": "60000"})
	sharePartTopic(t, n, "q", 10)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a := newShareMember(t, n, "sg", "q")
	if got := acquiredOf(t, a.fetch(2)); len(got) != 2 {
		t.Fatalf("first fetch %v", got)
	}
	if r := a.ack(a.epoch, acked{0, 0, []int8{1}}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ack: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "sg"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "q", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 7}}}}
	ar := request[*kmsg.AlterShareGroupOffsetsResponse](t, a.cl, alter)
	if ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter: %+v", ar)
	}
	if r := a.ack(a.epoch, acked{1, 1, []int8{1}}); r.Topics[0].Partitions[0].ErrorCode != kerr.FencedStateEpoch.Code {
		t.Fatalf("ack after the alter: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	got := acquiredOf(t, a.fetch(0))
	if len(got) != 3 || got[7] != 1 || got[9] != 1 {
		t.Fatalf("after the alter: %v, want 7-9", got)
	}
}
