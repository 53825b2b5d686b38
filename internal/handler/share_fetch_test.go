package handler_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/share"
)

// sharePartProps shortens share-group locks for tests.
var sharePartProps = map[string]string{
	"group.share.record.lock.duration.ms":     "1000",
	"group.share.min.record.lock.duration.ms": "1000",
}

// newMemberID returns a Kafka Uuid string, as share consumers make.
func newMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// shareMember is one share-group member speaking ShareFetch and
// ShareAcknowledge over its own client (and so its own connections).
type shareMember struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	id     string
	epoch  int32
	topic  [16]byte
	parts  []int32
	closed bool
	// maxBytes, if set, is the fetches' MaxBytes (else the default).
	maxBytes *int32
}

func newShareMember(t *testing.T, n *node, group, topic string, parts ...int32) *shareMember {
	t.Helper()
	id, ok := n.b.TopicID(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	if len(parts) == 0 {
		parts = []int32{0}
	}
	return &shareMember{t: t, cl: n.client(), group: group, id: newMemberID(), topic: id, parts: parts}
}

// acked is one partition's acknowledgements.
type acked struct {
	first, last int64
	types       []int8
}

// fetch sends a ShareFetch at the member's epoch (opening the session at
// 0 with its partitions) with acks on partition 0.
func (m *shareMember) fetch(maxRecords int32, acks ...acked) *kmsg.ShareFetchResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxRecords = 0, 1, maxRecords
	if m.maxBytes != nil {
		req.MaxBytes = *m.maxBytes
	}
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = m.topic
	for i, p := range m.parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		if i == 0 {
			for _, a := range acks {
				b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
				b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, a.types
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
			}
		}
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp := request[*kmsg.ShareFetchResponse](m.t, m.cl, req)
	if resp.ErrorCode == 0 {
		m.epoch++
	}
	return resp
}

// ack sends a ShareAcknowledge for partition 0 at the member's epoch.
func (m *shareMember) ack(epoch int32, acks ...acked) *kmsg.ShareAcknowledgeResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 1
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = epoch
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = m.topic
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition = m.parts[0]
	for _, a := range acks {
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	}
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	resp := request[*kmsg.ShareAcknowledgeResponse](m.t, m.cl, req)
	if resp.ErrorCode == 0 && epoch > 0 {
		m.epoch++
	}
	return resp
}

// acquiredOf returns the offsets and delivery counts a response gives,
// checking that the records sent hold every acquired offset.
func acquiredOf(t *testing.T, resp *kmsg.ShareFetchResponse) map[int64]int16 {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	got := map[int64]int16{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			have := map[int64]bool{}
			for _, r := range decodeRecords(p.Records) {
				have[r.Offset] = true
			}
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					if !have[o] {
						t.Fatalf("acquired offset %d not in the records sent", o)
					}
					got[int64(p.Partition)<<32|o] = a.DeliveryCount
				}
			}
		}
	}
	return got
}

// decodeRecords decodes the records of data (control records left out).
func decodeRecords(data []byte) []*kgo.Record {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches, rp.HighWatermark, rp.LastStableOffset = data, 1<<62, 1<<62
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{}, &rp, kgo.DefaultDecompressor(), nil)
	return fp.Records
}

func sharePartTopic(t *testing.T, n *node, topic string, records int) {
	t.Helper()
	createTopic(t, n.client(), topic, 1, nil)
	var vals []string
	for i := 0; i < records; i++ {
		vals = append(vals, fmt.Sprint(i))
	}
	produceTo(t, manualClient(n), topic, 0, vals...)
}

// setGroupConfig sets a group config with IncrementalAlterConfigs.
func setGroupConfig(t *testing.T, n *node, group, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &value
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp := request[*kmsg.IncrementalAlterConfigsResponse](t, n.client(), req)
	if c := resp.Resources[0].ErrorCode; c != 0 {
		t.Fatalf("set %s=%s: %v", name, value, kerr.ErrorForCode(c))
	}
	waitFor(t, func() bool { return n.b.Image().GroupConfigs[group][name] == value }, "the group config")
}

// TestShareFetchMembersGetDisjointRecords: two members of a share group
// fetching one partition are never given the same record, and together
// they get every record once.
func TestShareFetchMembersGetDisjointRecords(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	sharePartTopic(t, n, "q", 20)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	// franz-go's member ids are padded base64 (24 characters).
	var raw [16]byte
	rand.Read(raw[:])
	b.id = base64.URLEncoding.EncodeToString(raw[:])
	seen := map[int64]string{}
	for i := 0; i < 6; i++ {
		for _, m := range []*shareMember{a, b} {
			for o := range acquiredOf(t, m.fetch(3)) {
				if who, dup := seen[o]; dup {
					t.Fatalf("offset %d given to %s and %s", o, who, m.id)
				}
				seen[o] = m.id
			}
		}
	}
	if len(seen) != 20 {
		t.Fatalf("%d records delivered, want 20", len(seen))
	}
}

// TestShareFetchMaxBytesZero: a ShareFetch with MaxBytes 0 (a consumer's
// fetch.max.bytes=0) acquires nothing, as Kafka's; the records stay
// available for the next fetch.
func TestShareFetchMaxBytesZero(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	sharePartTopic(t, n, "q0", 5)
	setGroupConfig(t, n, "sg0", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, n, "sg0", "q0")
	zero := int32(0)
	m.maxBytes = &zero
	for range 3 {
		if got := acquiredOf(t, m.fetch(0)); len(got) != 0 {
			t.Fatalf("MaxBytes 0 acquired %v", got)
		}
	}
	m.maxBytes = nil
	if got := acquiredOf(t, m.fetch(0)); len(got) != 5 {
		t.Fatalf("default MaxBytes acquired %v, want 5 records", got)
	}
}

// TestShareFetchLockExpiryRedelivers: a record whose lock passes is given
// to another member with delivery count 2, and the first member's late
// acknowledgement is INVALID_RECORD_STATE.
func TestShareFetchLockExpiryRedelivers(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", sharePartProps, clk)
	sharePartTopic(t, n, "q", 3)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	resp := a.fetch(0)
	if resp.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("lock timeout %d", resp.AcquisitionLockTimeoutMillis)
	}
	if got := acquiredOf(t, resp); len(got) != 3 || got[0] != 1 {
		t.Fatalf("first delivery %v", got)
	}
	if got := acquiredOf(t, b.fetch(0)); len(got) != 0 {
		t.Fatalf("b got locked records %v", got)
	}
	clk.Advance(time.Second)
	got := acquiredOf(t, b.fetch(0))
	if len(got) != 3 || got[0] != 2 || got[2] != 2 {
		t.Fatalf("redelivery %v", got)
	}
	r := a.ack(a.epoch, acked{0, 2, []int8{1}})
	if c := r.Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidRecordState.Code {
		t.Fatalf("late ack: %v", kerr.ErrorForCode(c))
	}
	r = b.ack(b.epoch, acked{0, 2, []int8{1}})
	if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("ack: %v", kerr.ErrorForCode(c))
	}
}

// TestShareAcknowledgeTypes: accept and reject are final, release
// redelivers with the next delivery count; the start offset moves over
// what is done; a delivery limit archives a record released too often.
func TestShareAcknowledgeTypes(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	sharePartTopic(t, n, "q", 4)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	setGroupConfig(t, n, "sg", "share.delivery.count.limit", "2")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	acquiredOf(t, a.fetch(0))
	// 0 accept, 1 release, 2 reject, 3 release: piggybacked on a fetch.
	resp := a.fetch(0, acked{0, 3, []int8{1, 2, 3, 2}})
	if c := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; c != 0 {
		t.Fatalf("ack: %v", kerr.ErrorForCode(c))
	}
	// The released ones are acquired again: by the same fetch if their
	// write returned before it acquired (the two run side by side, as in
	// Kafka; a record under a write is not acquirable), else by the next.
	got := acquiredOf(t, resp)
	if len(got) == 0 {
		got = acquiredOf(t, a.fetch(0))
	}
	if len(got) != 2 || got[1] != 2 || got[3] != 2 {
		t.Fatalf("redelivered %v", got)
	}
	// Released a second time they reach the limit (2) and are archived.
	if r := a.ack(a.epoch, acked{1, 1, []int8{2}}, acked{3, 3, []int8{2}}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if got := acquiredOf(t, b.fetch(0)); len(got) != 0 {
		t.Fatalf("delivered past the limit or again after accept/reject: %v", got)
	}
	id, _ := n.b.TopicID("q")
	st, err := n.h.SharePartitions().Persister().ReadSummary(ctx(t), share.Key{Group: "sg", TopicID: id, Partition: 0})
	if err != nil || st.StartOffset != 4 {
		t.Fatalf("persisted start offset %+v %v, want 4", st, err)
	}
}

// TestShareSessionErrors: incremental fetches without a session, with a
// wrong epoch, acknowledgements opening a session, and more sessions than
// group.share.max.share.sessions get Kafka's errors and change nothing.
func TestShareSessionErrors(t *testing.T) {
	props := map[string]string{"group.share.max.share.sessions": "2"}
	for k, v := range sharePartProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	sharePartTopic(t, n, "q", 2)
	a := newShareMember(t, n, "sg", "q")
	a.epoch = 1
	if r := a.fetch(0); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	a.epoch = 0
	if r := a.fetch(0, acked{0, 0, []int8{1}}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acks on epoch 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	a.fetch(0)
	if r := a.ack(0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge epoch 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	a.epoch = 5
	if r := a.fetch(0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	a.epoch = 1
	if r := a.fetch(0); r.ErrorCode != 0 {
		t.Fatalf("right epoch after a wrong one: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	newShareMember(t, n, "sg", "q").fetch(0)
	if r := newShareMember(t, n, "sg", "q").fetch(0); r.ErrorCode != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("third session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	bad := newShareMember(t, n, "sg", "q")
	bad.id = "not-a-uuid"
	if r := bad.fetch(0); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("member id not a Uuid: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := n.h.ShareSessions(); got != 2 {
		t.Fatalf("%d sessions", got)
	}
	// Closing with -1 releases the member's locks.
	if r := a.ack(-1); r.ErrorCode != 0 {
		t.Fatalf("close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := n.h.ShareSessions(); got != 1 {
		t.Fatalf("%d sessions after a close", got)
	}
}

// TestShareFetchConnCloseReleasesLocks: when a member's connection closes,
// its share session goes and its records are delivered to another member
// at once, without waiting for the lock.
func TestShareFetchConnCloseReleasesLocks(t *testing.T) {
	n := startNode(t, "", map[string]string{"group.share.record.lock.duration.ms": "60000"})
	sharePartTopic(t, n, "q", 5)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	a, b := newShareMember(t, n, "sg", "q"), newShareMember(t, n, "sg", "q")
	if got := acquiredOf(t, a.fetch(0)); len(got) != 5 {
		t.Fatalf("a got %v", got)
	}
	if got := acquiredOf(t, b.fetch(0)); len(got) != 0 {
		t.Fatalf("b got %v", got)
	}
	a.cl.Close()
	var got map[int64]int16
	waitFor(t, func() bool {
		got = acquiredOf(t, b.fetch(0))
		return len(got) > 0
	}, "the released records")
	if len(got) != 5 || got[0] != 2 {
		t.Fatalf("after a's connection closed b got %v", got)
	}
	waitFor(t, func() bool { return n.h.ShareSessions() == 1 }, "the session to close")
}

// TestShareFetchReadCommittedSkipsAborted: a share group with
// share.isolation.level=read_committed is never given aborted records
// nor control records; a read_uncommitted one gets the aborted ones too.
func TestShareFetchReadCommittedSkipsAborted(t *testing.T) {
	props := map[string]string{}
	for k, v := range txnProps {
		props[k] = v
	}
	for k, v := range sharePartProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	createTopic(t, n.client(), "tq", 1, nil)
	p := n.client(kgo.TransactionalID("tx-share"), kgo.DefaultProduceTopic("tq"))
	run := func(commit kgo.TransactionEndTry, vals ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx(t), commit); err != nil {
			t.Fatal(err)
		}
	}
	run(kgo.TryCommit, "c1")
	run(kgo.TryAbort, "a1", "a2")
	run(kgo.TryCommit, "c2")
	for _, g := range []string{"rc", "ru"} {
		setGroupConfig(t, n, g, "share.auto.offset.reset", "earliest")
	}
	setGroupConfig(t, n, "rc", "share.isolation.level", "read_committed")
	values := func(group string) []string {
		m := newShareMember(t, n, group, "tq")
		resp := m.fetch(0)
		got := acquiredOf(t, resp)
		var vals []string
		for _, r := range decodeRecords(resp.Topics[0].Partitions[0].Records) {
			if _, ok := got[r.Offset]; ok {
				vals = append(vals, string(r.Value))
			}
		}
		sort.Strings(vals)
		return vals
	}
	if got := values("rc"); fmt.Sprint(got) != "[c1 c2]" {
		t.Fatalf("read_committed got %v", got)
	}
	if got := values("ru"); fmt.Sprint(got) != "[a1 a2 c1 c2]" {
		t.Fatalf("read_uncommitted got %v", got)
	}
}

// TestShareFetchConcurrentMembers: four members fetch, accept some
// records and release the others concurrently over TCP. No record is held
// by two members at once, no record is accepted twice, and every record
// is accepted in the end.
func TestShareFetchConcurrentMembers(t *testing.T) {
	n := startNode(t, "", map[string]string{"group.share.record.lock.duration.ms": "60000"})
	const total = 300
	sharePartTopic(t, n, "q", total)
	setGroupConfig(t, n, "sg", "share.auto.offset.reset", "earliest")
	var mu sync.Mutex
	holder := map[int64]string{}
	accepted := map[int64]int{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		m := newShareMember(t, n, "sg", "q")
		wg.Add(1)
		go func(seed int) {
			defer wg.Done()
			var pending []acked
			for round := 0; ; round++ {
				mu.Lock()
				done := len(accepted) == total
				mu.Unlock()
				if done || round > 2000 {
					return
				}
				resp := m.fetch(7, pending...)
				if resp.ErrorCode != 0 {
					t.Errorf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
					return
				}
				if len(pending) > 0 {
					if c := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; c != 0 {
						t.Errorf("ack: %v", kerr.ErrorForCode(c))
						return
					}
					mu.Lock()
					for _, a := range pending {
						if a.types[0] == 1 {
							for o := a.first; o <= a.last; o++ {
								accepted[o]++
								if accepted[o] > 1 {
									t.Errorf("offset %d accepted twice", o)
								}
							}
						}
					}
					mu.Unlock()
				}
				pending = nil
				got := acquiredOf(t, resp)
				mu.Lock()
				for o := range got {
					if h, ok := holder[o]; ok {
						t.Errorf("offset %d given to %s while %s holds it", o, m.id, h)
					}
					holder[o] = m.id
				}
				// Give up what is acknowledged before the broker hears it.
				for o := range got {
					ty := int8(1)
					if (o+int64(seed)+int64(round))%3 == 0 {
						ty = 2
					}
					delete(holder, o)
					pending = append(pending, acked{o, o, []int8{ty}})
				}
				mu.Unlock()
				sort.Slice(pending, func(i, j int) bool { return pending[i].first < pending[j].first })
			}
		}(w)
	}
	wg.Wait()
	if len(accepted) != total {
		t.Fatalf("%d of %d records accepted", len(accepted), total)
	}
}
