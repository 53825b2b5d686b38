package handler_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
)

// topicID returns a topic's id (Fetch v13+ names topics by id, KIP-516;
// kgo sends raw requests at the highest version both sides speak and
// rewrites nothing in a Fetch).
func topicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopics(ctx(t), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic id of %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}

// maxFetch caps the Fetch version a kgo client negotiates.
func maxFetch(v int16) kgo.Opt {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(1, v)
	return kgo.MaxVersions(vs)
}

// fetchReq is a consumer fetch naming partitions of one topic (by id and
// name: the version decides which is encoded) at the given offsets.
func fetchReq(id [16]byte, topic string, sessionID, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	if len(offsets) == 0 {
		return req
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	var ps []int32
	for p := range offsets {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[p], 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// answered lists a response's partitions: partition -> (error, HW, bytes).
type answer struct {
	err   int16
	hw    int64
	bytes int
}

func answered(resp *kmsg.FetchResponse) map[int32]answer {
	out := map[int32]answer{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = answer{p.ErrorCode, p.HighWatermark, len(p.RecordBatches)}
		}
	}
	return out
}

func produceTo(t *testing.T, cl *kgo.Client, topic string, partition int32, values ...string) {
	t.Helper()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
		if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func manualClient(n *node) *kgo.Client {
	return n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

func TestFetchSessionIncremental(t *testing.T) {
	clk := clock.NewManual(time.Now()) // long polls end only when told
	n := startNodeClock(t, "", nil, clk)
	cl := manualClient(n)
	createTopic(t, cl, "s", 4, nil)
	id := topicID(t, cl, "s")
	produceTo(t, cl, "s", 0, "a")

	full := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "s", 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}))
	if full.Version < 13 || full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch v%d: error %d session %d, want a session", full.Version, full.ErrorCode, full.SessionID)
	}
	if got := answered(full); len(got) != 4 || got[0].bytes == 0 || full.Topics[0].TopicID != id {
		t.Fatalf("full fetch answers %v (topic id %x)", got, full.Topics[0].TopicID)
	}
	sid := full.SessionID
	if st := n.h.FetchSessions(); st.Sessions != 1 || st.Partitions != 4 {
		t.Fatalf("cache %+v", st)
	}

	// Epoch 1 names partition 0 at its new offset; nothing else changed:
	// the response is empty.
	inc := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "s", sid, 1, map[int32]int64{0: 1}))
	if inc.ErrorCode != 0 || inc.SessionID != sid || len(answered(inc)) != 0 {
		t.Fatalf("idle incremental: error %d session %d answers %v", inc.ErrorCode, inc.SessionID, answered(inc))
	}

	// New records on partition 2 only: only it is answered.
	produceTo(t, cl, "s", 2, "b", "c")
	inc = request[*kmsg.FetchResponse](t, cl, fetchReq(id, "s", sid, 2, nil))
	if got := answered(inc); len(got) != 1 || got[2].bytes == 0 || got[2].hw != 2 {
		t.Fatalf("incremental after produce to 2: %v", got)
	}
	// The fetcher moves on; nothing more to say.
	inc = request[*kmsg.FetchResponse](t, cl, fetchReq(id, "s", sid, 3, map[int32]int64{2: 2}))
	if got := answered(inc); len(got) != 0 {
		t.Fatalf("incremental after moving on: %v", got)
	}

	// Long poll: nothing changed, the fetch parks until partition 1 gets
	// a record, and answers only partition 1. The clock does not move,
	// so it cannot time out meanwhile.
	parts := make([]*broker.Partition, 4)
	for i := range parts {
		p, err := n.b.Partition("s", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		parts[i] = p
	}
	longPoll := func(req *kmsg.FetchRequest) chan *kmsg.FetchResponse {
		done := make(chan *kmsg.FetchResponse, 1)
		go func() {
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		return done
	}
	poll := fetchReq(id, "s", sid, 4, nil)
	poll.MaxWaitMillis, poll.MinBytes = 10000, 1
	done := longPoll(poll)
	awaitParked(t, parts[1], done)
	produceTo(t, cl, "s", 1, "d")
	r := <-done
	if got := answered(r); len(got) != 1 || got[1].bytes == 0 {
		t.Fatalf("long poll answers %v", got)
	}

	// A long poll that expires answers nothing and still advances the
	// session: parked, then the clock passes its 200 ms.
	for deadline := time.Now().Add(10 * time.Second); parts[1].Watchers() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the answered long poll never left")
		}
	}
	poll = fetchReq(id, "s", sid, 5, map[int32]int64{1: 1})
	poll.MaxWaitMillis, poll.MinBytes = 200, 1
	done = longPoll(poll)
	if until, want := awaitParked(t, parts[1], done), clk.Now().Add(200*time.Millisecond); !until.Equal(want) {
		t.Fatalf("long poll of 200 ms parked until %v, want %v", until, want)
	}
	clk.Advance(199 * time.Millisecond)
	stillParked(t, clk, parts[1], done, "long poll of 200 ms after 199")
	clk.Advance(time.Millisecond)
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the expired long poll never answered")
	}
	if got := answered(r); len(got) != 0 || r.ErrorCode != 0 {
		t.Fatalf("expired long poll: %v error %d", got, r.ErrorCode)
	}
	if r = request[*kmsg.FetchResponse](t, cl, fetchReq(id, "s", sid, 6, nil)); r.ErrorCode != 0 {
		t.Fatalf("epoch after expired poll: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Forgotten partitions are no longer read: records on partition 3
	// after it is forgotten are not answered.
	forget := fetchReq(id, "s", sid, 7, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Topic, ft.Partitions = id, "s", []int32{3}
	forget.ForgottenTopics = append(forget.ForgottenTopics, ft)
	if r = request[*kmsg.FetchResponse](t, cl, forget); r.ErrorCode != 0 || len(answered(r)) != 0 {
		t.Fatalf("forget: %d %v", r.ErrorCode, answered(r))
	}
	if st := n.h.FetchSessions(); st.Partitions != 3 {
		t.Fatalf("cache after forget %+v", st)
	}
	produceTo(t, cl, "s", 3, "e")
	produceTo(t, cl, "s", 0, "f")
	r = request[*kmsg.FetchResponse](t, cl, fetchReq(id, "s", sid, 8, nil))
	if got := answered(r); len(got) != 1 || got[0].bytes == 0 {
		t.Fatalf("after forgetting 3, produce to 0 and 3: %v", got)
	}
}

func TestFetchSessionErrors(t *testing.T) {
	n := startNode(t, "", nil)
	cl := manualClient(n)
	createTopic(t, cl, "e", 2, nil)
	id := topicID(t, cl, "e")
	offsets := map[int32]int64{0: 0, 1: 0}
	newSession := func() int32 {
		r := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", 0, 0, offsets))
		if r.SessionID == 0 {
			t.Fatal("no session")
		}
		return r.SessionID
	}
	sid := newSession()
	check := func(what string, r *kmsg.FetchResponse, want *kerr.Error) {
		t.Helper()
		if r.ErrorCode != want.Code || len(r.Topics) != 0 {
			t.Fatalf("%s: error %v with %d topics, want %v", what, kerr.ErrorForCode(r.ErrorCode), len(r.Topics), want)
		}
	}
	check("wrong epoch", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 2, nil)), kerr.InvalidFetchSessionEpoch)
	check("unknown id", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid+1, 1, nil)), kerr.FetchSessionIDNotFound)
	check("no id", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", 0, 1, nil)), kerr.FetchSessionIDNotFound)
	// A v12 request (topic names) on a session of topic ids.
	old := n.client(maxFetch(12))
	check("v12 on a v13+ session", request[*kmsg.FetchResponse](t, old, fetchReq(id, "e", sid, 1, nil)), kerr.FetchSessionTopicIDError)
	// The errors did not advance the session.
	if r := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 1, nil)); r.ErrorCode != 0 {
		t.Fatalf("epoch 1 after errors: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A repeated epoch (a retried request) is refused.
	check("repeated epoch", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 1, nil)), kerr.InvalidFetchSessionEpoch)

	// A full fetch naming the session closes it and opens another.
	r := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 0, offsets))
	if r.SessionID == 0 || r.SessionID == sid || len(answered(r)) != 2 {
		t.Fatalf("full fetch naming a session: session %d (was %d), %v", r.SessionID, sid, answered(r))
	}
	check("closed session", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 2, nil)), kerr.FetchSessionIDNotFound)
	// Epoch -1 closes it and stays sessionless.
	sid = r.SessionID
	r = request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, -1, offsets))
	if r.SessionID != 0 || r.ErrorCode != 0 || len(answered(r)) != 2 {
		t.Fatalf("sessionless: session %d error %d %v", r.SessionID, r.ErrorCode, answered(r))
	}
	check("closed by epoch -1", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 1, nil)), kerr.FetchSessionIDNotFound)
	if st := n.h.FetchSessions(); st.Sessions != 0 {
		t.Fatalf("cache %+v", st)
	}

	// Forgetting every partition closes the session: sessionless answer.
	sid = newSession()
	forget := fetchReq(id, "e", sid, 1, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Partitions = id, []int32{0, 1}
	forget.ForgottenTopics = append(forget.ForgottenTopics, ft)
	if r = request[*kmsg.FetchResponse](t, cl, forget); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("forget all: error %d session %d", r.ErrorCode, r.SessionID)
	}
	check("emptied session", request[*kmsg.FetchResponse](t, cl, fetchReq(id, "e", sid, 2, nil)), kerr.FetchSessionIDNotFound)
}

func TestFetchSessionsDisabledAndFull(t *testing.T) {
	n := startNode(t, "", map[string]string{"max.incremental.fetch.session.cache.slots": "1"})
	cl := manualClient(n)
	createTopic(t, cl, "d", 3, nil)
	id := topicID(t, cl, "d")
	one := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "d", 0, 0, map[int32]int64{0: 0, 1: 0}))
	if one.SessionID == 0 {
		t.Fatal("no session with a free slot")
	}
	// The cache is full and the session young: a consumer with fewer or
	// as many partitions gets no session, and is still answered in full.
	two := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "d", 0, 0, map[int32]int64{2: 0}))
	if two.SessionID != 0 || len(answered(two)) != 1 {
		t.Fatalf("full cache: session %d answers %v", two.SessionID, answered(two))
	}
	if r := request[*kmsg.FetchResponse](t, cl, fetchReq(id, "d", one.SessionID, 1, nil)); r.ErrorCode != 0 {
		t.Fatalf("first session lost: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	off := startNode(t, "", map[string]string{"max.incremental.fetch.session.cache.slots": "0"})
	ocl := manualClient(off)
	createTopic(t, ocl, "d", 1, nil)
	oid := topicID(t, ocl, "d")
	if r := request[*kmsg.FetchResponse](t, ocl, fetchReq(oid, "d", 0, 0, map[int32]int64{0: 0})); r.SessionID != 0 || r.ErrorCode != 0 {
		t.Fatalf("sessions disabled: session %d error %d", r.SessionID, r.ErrorCode)
	}
}

func TestFetchTopicIDs(t *testing.T) {
	n := startNode(t, "", nil)
	cl := manualClient(n)
	createTopic(t, cl, "re", 1, nil)
	oldID := topicID(t, cl, "re")
	produceTo(t, cl, "re", 0, "old-1", "old-2", "old-3")

	// Unknown id: UNKNOWN_TOPIC_ID per partition, the id echoed.
	bogus := [16]byte{0xde, 0xad}
	r := request[*kmsg.FetchResponse](t, cl, fetchReq(bogus, "re", 0, -1, map[int32]int64{0: 0}))
	if got := answered(r); got[0].err != kerr.UnknownTopicID.Code || r.Topics[0].TopicID != bogus {
		t.Fatalf("unknown id: %v", got)
	}

	// A session on the old topic, then delete and recreate the name.
	s := request[*kmsg.FetchResponse](t, cl, fetchReq(oldID, "re", 0, 0, map[int32]int64{0: 3}))
	if s.SessionID == 0 {
		t.Fatal("no session")
	}
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx(t), "re"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, "re", 1, nil)
	newID := topicID(t, n.client(), "re") // a new client: kgo caches metadata
	if newID == oldID {
		t.Fatal("recreated topic has the old id")
	}
	produceTo(t, cl, "re", 0, "new-1", "new-2", "new-3", "new-4")

	// The old id names nothing, sessionless or in the old session.
	r = request[*kmsg.FetchResponse](t, cl, fetchReq(oldID, "re", 0, -1, map[int32]int64{0: 0}))
	if got := answered(r); got[0].err != kerr.UnknownTopicID.Code || got[0].bytes != 0 {
		t.Fatalf("old id after recreate: %v", got)
	}
	r = request[*kmsg.FetchResponse](t, cl, fetchReq(oldID, "re", s.SessionID, 1, nil))
	if got := answered(r); r.ErrorCode != 0 || len(got) != 1 || got[0].err != kerr.UnknownTopicID.Code || got[0].bytes != 0 {
		t.Fatalf("old session after recreate: error %d %v", r.ErrorCode, got)
	}
	// The new id reads the new topic only.
	r = request[*kmsg.FetchResponse](t, cl, fetchReq(newID, "re", 0, -1, map[int32]int64{0: 0}))
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 4 || r.Topics[0].TopicID != newID {
		t.Fatalf("new id: error %d HW %d", p.ErrorCode, p.HighWatermark)
	}
	var vals []string
	for _, rec := range recordsOf(t, p.RecordBatches) {
		vals = append(vals, string(rec))
	}
	if fmt.Sprint(vals) != "[new-1 new-2 new-3 new-4]" {
		t.Fatalf("new id reads %v", vals)
	}

	// Fetch v12 still names topics.
	old := n.client(maxFetch(12))
	r = request[*kmsg.FetchResponse](t, old, fetchReq([16]byte{}, "re", 0, -1, map[int32]int64{0: 0}))
	if r.Version != 12 || r.Topics[0].Partitions[0].HighWatermark != 4 {
		t.Fatalf("v12 by name: v%d %+v", r.Version, r.Topics[0].Partitions[0])
	}
}

// recordsOf returns the record values of whole v2 batches.
func recordsOf(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		_, b, rest, err := batch.Next(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := batch.Records(b, func(r batch.Record) bool { out = append(out, append([]byte(nil), r.Value...)); return true }); err != nil {
			t.Fatal(err)
		}
		data = rest
	}
	return out
}

func TestFetchAPIVersion(t *testing.T) {
	n := startNode(t, "", nil)
	resp := request[*kmsg.ApiVersionsResponse](t, n.client(), kmsg.NewPtrApiVersionsRequest())
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 1 && (k.MinVersion != 4 || k.MaxVersion != 16) {
			t.Fatalf("Fetch versions %d-%d, want 4-16", k.MinVersion, k.MaxVersion)
		}
	}
}

// A franz-go consumer (fetch sessions on by default) reads every record of
// several partitions, in order, while they are produced; its fetches go
// through a session.
func TestFranzConsumerWithFetchSessions(t *testing.T) {
	n := startNode(t, "", nil)
	pcl := manualClient(n)
	const parts, per = 6, 300
	createTopic(t, pcl, "live", parts, nil)
	ccl := n.client(kgo.ConsumeTopics("live"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	var wg sync.WaitGroup
	for p := int32(0); p < parts; p++ {
		wg.Add(1)
		go func(p int32) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r := &kgo.Record{Topic: "live", Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}
				if err := pcl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(p)
	}
	next := make([]int, parts)
	total := 0
	c := ctx(t)
	sawSession := false
	for total < parts*per {
		fs := ccl.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", total, parts*per, c.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch error %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("%d-%d", r.Partition, next[r.Partition]); string(r.Value) != want || r.Offset != int64(next[r.Partition]) {
				t.Fatalf("partition %d: got %q at %d, want %q", r.Partition, r.Value, r.Offset, want)
			}
			next[r.Partition]++
			total++
		})
		if n.h.FetchSessions().Sessions > 0 {
			sawSession = true
		}
	}
	wg.Wait()
	if !sawSession {
		t.Fatal("the consumer never had a fetch session")
	}
}
