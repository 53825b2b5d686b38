package broker_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/vfs"
)

// member is one in-process broker of a test cluster.
type member struct {
	t    *testing.T
	id   int32
	dir  string
	addr string
	q    *fakeQuorum
	b    *broker.Broker
	h    *handler.Handlers
	srv  *protocol.Server
}

func startMember(t *testing.T, q *fakeQuorum, id int32, dir, addr string) *member {
	t.Helper()
	return startMemberWith(t, q, id, dir, addr, nil, nil)
}

// startMemberWith starts a member on fs (the OS if nil) with extra broker
// properties.
func startMemberWith(t *testing.T, q *fakeQuorum, id int32, dir, addr string, fs vfs.FS, props map[string]string) *member {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.NodeID = id
	cfg.DataDir = dir
	cfg.Listen = ln.Addr().String()
	cfg.Props["replica.lag.time.max.ms"] = "1000"
	cfg.Props["group.initial.rebalance.delay.ms"] = "0"
	for k, v := range props {
		cfg.Props[k] = v
	}
	self, _ := broker.SelfBroker(cfg)
	var ctl *fakeNode
	q.mu.Lock()
	for _, n := range q.nodes {
		if n.id == id {
			ctl = n
			n.watchers = nil
		}
	}
	q.mu.Unlock()
	if ctl == nil {
		ctl = q.node(self)
	}
	// Every log change must be a step of its partition's owner.
	b, err := broker.Open(broker.Options{Config: cfg, Controller: ctl, FS: fs, CheckWriters: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(ln)
	m := &member{t: t, id: id, dir: dir, addr: ln.Addr().String(), q: q, b: b, h: hs, srv: srv}
	t.Cleanup(m.stop)
	return m
}

func (m *member) stop() {
	if m.srv == nil {
		return
	}
	if n, which := m.b.WriterViolations(); n > 0 {
		m.t.Errorf("broker %d: %d log changes outside their partition's owner: %s", m.id, n, which)
	}
	m.srv.Close()
	m.h.Close()
	m.b.Close()
	m.srv = nil
}

func startCluster(t *testing.T, n int) (*fakeQuorum, []*member) {
	q := newFakeQuorum()
	var ms []*member
	for i := 1; i <= n; i++ {
		ms = append(ms, startMember(t, q, int32(i), t.TempDir(), ""))
	}
	return q, ms
}

func seeds(ms []*member) []string {
	var s []string
	for _, m := range ms {
		if m.srv != nil {
			s = append(s, m.addr)
		}
	}
	return s
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func partitionMeta(q *fakeQuorum, topic string, p int32) metadata.Partition {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.img.Topics[topic].Partitions[p]
}

// logBytes reads a replica's whole log below end.
func logBytes(t *testing.T, m *member, topic string, p int32, end int64) []byte {
	t.Helper()
	part, err := m.b.Partition(topic, p)
	if err != nil {
		t.Fatalf("broker %d: %v", m.id, err)
	}
	var out []byte
	off := part.LogStartOffset()
	for off < end {
		sl, err := part.Log().Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("broker %d read at %d: %v", m.id, off, err)
		}
		data, _ := sl.AppendTo(nil)
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			h, b, rest, err := batch.Next(data)
			if err != nil {
				t.Fatal(err)
			}
			// The leader epoch field differs by nothing; compare whole batches.
			out = append(out, b...)
			off = h.NextOffset()
			data = rest
		}
	}
	return out
}

func TestReplicationAcksAllAndIdenticalReplicas(t *testing.T) {
	q, ms := startCluster(t, 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds(ms)...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("rep"),
		kgo.WithLogger(kgo.BasicLogger(testWriter{t}, kgo.LogLevelWarn, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	two := "2"
	if err := ms[0].b.CreateTopic("rep", 3, 3, map[string]string{"min.insync.replicas": two}, false); err != nil {
		t.Fatal(err)
	}
	const N = 3000
	for i := 0; i < N; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(fmt.Sprint(i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		leader := partitionMeta(q, "rep", p).Leader
		lp, _ := ms[leader-1].b.Partition("rep", p)
		hw := lp.HighWatermark()
		waitFor(t, "followers to catch up", 10*time.Second, func() bool {
			for _, m := range ms {
				part, err := m.b.Partition("rep", p)
				if err != nil || part.LogEndOffset() < hw {
					return false
				}
			}
			return true
		})
		want := logBytes(t, ms[leader-1], "rep", p, hw)
		for _, m := range ms {
			if got := logBytes(t, m, "rep", p, hw); string(got) != string(want) {
				t.Fatalf("partition %d: broker %d's log differs from the leader's below the HW", p, m.id)
			}
		}
	}
	// Every record is readable, once.
	cons, _ := kgo.NewClient(kgo.SeedBrokers(seeds(ms)...), kgo.ConsumeTopics("rep"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < N {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", len(seen), N)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("duplicate %s", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
}

// produceOne sends one record with the given acks to partition 0 at addr
// (over a raw connection: kgo rewrites a raw request's acks).
func produceOne(t *testing.T, addr, topic string, acks int16, value string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	cl := protocol.NewClient(addr, "test")
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = buildBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func TestISRShrinkStrictMinISRAndExpand(t *testing.T) {
	q, ms := startCluster(t, 3)
	if err := ms[0].b.CreateTopic("isr", 1, 3, map[string]string{"min.insync.replicas": "2"}, false); err != nil {
		t.Fatal(err)
	}
	pm := partitionMeta(q, "isr", 0)
	leader := ms[pm.Leader-1]
	var followers []*member
	for _, m := range ms {
		if m != leader {
			followers = append(followers, m)
		}
	}
	if r := produceOne(t, leader.addr, "isr", -1, "first"); r.ErrorCode != 0 {
		t.Fatalf("first: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Stop one follower: the ISR shrinks after replica.lag.time.max.ms and
	// acks=all goes on with two in-sync replicas.
	f1dir, f1addr := followers[0].dir, followers[0].addr
	followers[0].stop()
	// Kafka only shrinks a follower that falls behind: keep writing.
	waitFor(t, "ISR shrink", 10*time.Second, func() bool {
		produceOne(t, leader.addr, "isr", 1, "filler")
		return len(partitionMeta(q, "isr", 0).ISR) == 2
	})
	if r := produceOne(t, leader.addr, "isr", -1, "second"); r.ErrorCode != 0 {
		t.Fatalf("second: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Stop the other: ISR = {leader} < min.insync.replicas.
	f2dir, f2addr := followers[1].dir, followers[1].addr
	followers[1].stop()
	waitFor(t, "ISR shrink to the leader", 10*time.Second, func() bool {
		produceOne(t, leader.addr, "isr", 1, "filler")
		return len(partitionMeta(q, "isr", 0).ISR) == 1
	})
	if r := produceOne(t, leader.addr, "isr", -1, "third"); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR below min: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// acks=1 is appended but not visible (strict min ISR freezes the HW).
	r := produceOne(t, leader.addr, "isr", 1, "fourth")
	if r.ErrorCode != 0 {
		t.Fatalf("acks=1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	lp, _ := leader.b.Partition("isr", 0)
	hwBefore := lp.HighWatermark()
	if hwBefore > r.BaseOffset {
		t.Fatalf("acks=1 record at %d visible with HW %d while ISR < min.insync.replicas", r.BaseOffset, hwBefore)
	}
	// Bring both back: the ISR grows and the record becomes visible.
	followers[0] = startMember(t, q, followers[0].id, f1dir, f1addr)
	followers[1] = startMember(t, q, followers[1].id, f2dir, f2addr)
	waitFor(t, "ISR expansion", 15*time.Second, func() bool { return len(partitionMeta(q, "isr", 0).ISR) == 3 })
	waitFor(t, "HW past the acks=1 record", 10*time.Second, func() bool { return lp.HighWatermark() > r.BaseOffset })
}

func TestLeaderFailover(t *testing.T) {
	q, ms := startCluster(t, 3)
	if err := ms[0].b.CreateTopic("fo", 1, 3, map[string]string{"min.insync.replicas": "2"}, false); err != nil {
		t.Fatal(err)
	}
	var acked []int64
	for i := 0; i < 20; i++ {
		pm := partitionMeta(q, "fo", 0)
		r := produceOne(t, ms[pm.Leader-1].addr, "fo", -1, fmt.Sprint("a", i))
		if r.ErrorCode != 0 {
			t.Fatalf("%d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
		acked = append(acked, r.BaseOffset)
	}
	old := partitionMeta(q, "fo", 0)
	oldLeader := ms[old.Leader-1]
	dir, addr := oldLeader.dir, oldLeader.addr
	oldLeader.stop()
	q.fence(old.Leader)
	nm := partitionMeta(q, "fo", 0)
	if nm.Leader < 0 || nm.Leader == old.Leader || nm.LeaderEpoch <= old.LeaderEpoch {
		t.Fatalf("no new leader: %+v", nm)
	}
	newLeader := ms[nm.Leader-1]
	waitFor(t, "new leader to serve", 10*time.Second, func() bool {
		p, err := newLeader.b.Partition("fo", 0)
		return err == nil && p.IsLeader()
	})
	for i := 0; i < 20; i++ {
		var r kmsg.ProduceResponseTopicPartition
		waitFor(t, "produce on new leader", 10*time.Second, func() bool {
			r = produceOne(t, newLeader.addr, "fo", -1, fmt.Sprint("b", i))
			return r.ErrorCode == 0
		})
		acked = append(acked, r.BaseOffset)
	}
	// The old leader returns, catches up and rejoins the ISR.
	ms[old.Leader-1] = startMember(t, q, old.Leader, dir, addr)
	q.unfence(old.Leader)
	waitFor(t, "old leader back in the ISR", 15*time.Second, func() bool {
		return slices.Contains(partitionMeta(q, "fo", 0).ISR, old.Leader)
	})
	np, _ := newLeader.b.Partition("fo", 0)
	hw := np.HighWatermark()
	want := logBytes(t, newLeader, "fo", 0, hw)
	waitFor(t, "returning replica to catch up", 10*time.Second, func() bool {
		p, err := ms[old.Leader-1].b.Partition("fo", 0)
		return err == nil && p.LogEndOffset() >= hw
	})
	for _, m := range ms {
		if got := logBytes(t, m, "fo", 0, hw); string(got) != string(want) {
			t.Fatalf("broker %d differs from the leader below the HW", m.id)
		}
	}
	for i, off := range acked {
		if off >= hw {
			t.Fatalf("acknowledged record %d at offset %d is above the HW %d", i, off, hw)
		}
	}
}

// A topic deleted and recreated under the same name between two images
// the broker applies: the old replica and its data are removed and the new
// topic starts empty (KIP-516: partitions are told apart by topic id).
func TestTopicRecreatedBetweenImages(t *testing.T) {
	q, ms := startCluster(t, 1)
	m := ms[0]
	if err := m.b.Controller().CreateTopic(context.Background(), "again", 1, 1, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	var p *broker.Partition
	waitFor(t, "the old topic's leader", 10*time.Second, func() bool {
		var err error
		p, err = m.b.Leader("again", 0)
		return err == nil
	})
	for _, v := range []string{"a", "b", "c"} {
		if _, err := p.Append(buildBatch(v), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	q.mu.Lock()
	old := q.img.Topics["again"]
	q.mu.Unlock()
	if err := q.update(func(im *metadata.Image) error {
		t := old.Clone()
		t.ID = metadata.NewUUID()
		im.Topics["again"] = t
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new replica for the recreated topic", 10*time.Second, func() bool {
		np, err := m.b.Leader("again", 0)
		return err == nil && np != p
	})
	np, _ := m.b.Leader("again", 0)
	if leo := np.LogEndOffset(); leo != 0 {
		t.Fatalf("the recreated topic's partition starts at log end %d, want 0 (the old topic's data)", leo)
	}
}
