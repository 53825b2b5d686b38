package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestFollowerPauseShrinksISRStrictMinISR freezes the followers of an RF 3,
// min.insync.replicas=2 partition one after the other with SIGSTOP while an
// acks=1 load keeps the leader's log growing:
//
//   - one follower stopped: it leaves the ISR after replica.lag.time.max.ms
//     and acks=all still succeeds;
//   - both stopped: ISR = {leader}; acks=all gets NOT_ENOUGH_REPLICAS, and
//     an acks=1 record is appended but the high watermark stays below it
//     (strict min ISR), so consumers cannot see it;
//   - both continued: the ISR grows back to 3 and the record becomes
//     visible.
//
// The cluster has a fourth, broker-only node and the partition used has it
// as a follower, with a voter as leader: stopping two of the three controller voters would take the
// metadata quorum's majority away, and no ISR change could be committed at
// all (in Kafka's combined mode as here). With node 4 and one voter
// stopped, the other two voters keep the quorum.
//
// Known broker bug (intermittent, roughly every other run): after SIGCONT
// the leader never re-adds the broker-only follower 4 although its
// /api/v1/partitions shows follower 4 at the leader's LEO with a fresh
// lastCaughtUpMs (inSync=false); the ISR stays {leader, other voter} for
// 30 s+ (the session timeout is 60 s, nothing is fenced). The final
// "ISR back to all 3 replicas" wait then fails with that diagnostic.
func TestFollowerPauseShrinksISRStrictMinISR(t *testing.T) { runPauseTest(t, false) }

func runPauseTest(t *testing.T, pauseController bool) {
	c := startCluster(t, 4, map[string]string{
		"replica.lag.time.max.ms":   "2000",
		"broker.session.timeout.ms": "60000", // SIGSTOPped brokers are not fenced during the test
	})
	// The partition must have the broker-only node 4 as a follower and a
	// voter as leader. CreateTopics ignores a manual ReplicaAssignment
	// (TestBrokerBug_CreateTopicsIgnoresReplicaAssignment), so create a
	// few partitions and pick one that fits.
	const topic = "strict-min-isr"
	c.CreateTopic(topic, 4, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	md, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	// Prefer (or, for the bug test, require) a second follower that is
	// (not) the active controller.
	ac, _ := c.activeController()
	part, lid, f2 := int32(-1), int32(-1), int32(-1)
	for p := int32(0); p < 4; p++ {
		m := md[p]
		if m.Leader == 4 || !slices.Contains(m.Replicas, 4) {
			continue
		}
		for _, r := range m.Replicas {
			if r != 4 && r != m.Leader {
				if part < 0 || (r == ac) == pauseController {
					part, lid, f2 = p, m.Leader, r
				}
			}
		}
	}
	if pauseController && f2 != ac {
		t.Skipf("no partition has the active controller %d as its voter follower: %v", ac, md)
	}
	t.Logf("active controller: node %d", ac)
	if part < 0 {
		t.Fatalf("no partition led by a voter with node 4 as a follower: %v", md)
	}
	t.Logf("partition %d: %v; stopping followers 4 then %d", part, md[part], f2)
	leader := c.Node(lid)

	// Clients talk to the leader only, so a stopped broker never stalls
	// them. kgo rewrites a raw ProduceRequest's acks to its RequiredAcks.
	allCl := c.Client(kgo.SeedBrokers(leader.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	oneCl := c.Client(kgo.SeedBrokers(leader.Addr()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	produce := func(cl *kgo.Client, v string) (int16, int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code, off, err := rawProduce(ctx, cl, topic, part, v)
		if err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		return code, off
	}
	hwOf := func() int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hw, err := listLatest(ctx, allCl, topic, part)
		if err != nil {
			t.Fatal(err)
		}
		return hw
	}
	isrIs := func(want ...int32) func() (bool, string) {
		return func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			m, err := testcluster.PartitionsFrom(ctx, leader.Addr(), topic)
			if err != nil {
				return false, err.Error()
			}
			want = slices.Clone(want)
			slices.Sort(want)
			return m[part].Leader == lid && slices.Equal(m[part].ISR, want), m[part].String()
		}
	}

	if code, _ := produce(allCl, "before"); code != 0 {
		t.Fatalf("acks=all with the full ISR: %v", kerr.ErrorForCode(code))
	}
	// Background acks=1 load: a follower only drops out of the ISR when it
	// falls behind the leader's log end.
	bg := c.startLoadOn(topic, []int32{part}, 400, kgo.SeedBrokers(leader.Addr()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	defer bg.Abort()
	testcluster.WaitFor(t, 10*time.Second, "background acks=1 load running", func() (bool, string) {
		n, _ := bg.AcksSince(time.Time{}, -1)
		return n >= 100, bg.Summary()
	})

	c.Pause(4)
	d := testcluster.WaitFor(t, 15*time.Second, "ISR {leader, f2} after SIGSTOP of node 4", isrIs(lid, f2))
	t.Logf("SIGSTOP node 4: ISR shrank to [%d %d] after %v", lid, f2, d.Round(time.Millisecond))
	code, off1 := produce(allCl, "one-follower-stopped")
	if code != 0 {
		t.Fatalf("acks=all with ISR {%d,%d} and min.insync.replicas=2: %v", lid, f2, kerr.ErrorForCode(code))
	}
	if hw := hwOf(); hw <= off1 {
		t.Fatalf("acks=all acknowledged offset %d but the high watermark is %d", off1, hw)
	}

	c.Pause(f2)
	d = testcluster.WaitFor(t, 40*time.Second, "ISR {leader} after SIGSTOP of the second follower", isrIs(lid))
	t.Logf("SIGSTOP node %d: ISR shrank to [%d] after %v", f2, lid, d.Round(time.Millisecond))
	if d > 8*time.Second {
		// Slow: show who was the active controller and what the leader did.
		ac, at := c.activeController()
		t.Logf("slow ISR shrink: latest active controller node %d (since %s); leader's log:\n%s", ac, at.Format("15:04:05.000"), leader.LogTail(25))
	}
	code, _ = produce(allCl, "both-followers-stopped-acks-all")
	if code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR {%d} < min.insync.replicas=2: got %v, want NOT_ENOUGH_REPLICAS", lid, kerr.ErrorForCode(code))
	}
	t.Logf("acks=all with ISR [%d]: NOT_ENOUGH_REPLICAS", lid)
	const invisible = "both-followers-stopped-acks-1"
	code, offX := produce(oneCl, invisible)
	if code != 0 {
		t.Fatalf("acks=1 with ISR {%d}: %v", lid, kerr.ErrorForCode(code))
	}
	hwFrozen := hwOf()
	if hwFrozen > offX {
		t.Fatalf("acks=1 record at offset %d is visible (HW %d) while the ISR {%d} is below min.insync.replicas=2", offX, hwFrozen, lid)
	}
	// The HW stays frozen while the load keeps appending: the leader has
	// appended (and acknowledged) 100 more acks=1 records and one more of
	// ours after offX, each a chance for a wrong rule to move the HW.
	since := time.Now()
	testcluster.WaitFor(t, 10*time.Second, "100 more acks=1 records appended", func() (bool, string) {
		n, _ := bg.AcksSince(since, -1)
		return n >= 100, bg.Summary()
	})
	if code, offY := produce(oneCl, invisible+"-again"); code != 0 || offY <= offX {
		t.Fatalf("second acks=1 record with ISR {%d}: %v at %d (first at %d)", lid, kerr.ErrorForCode(code), offY, offX)
	}
	if hw := hwOf(); hw != hwFrozen || hw > offX {
		t.Fatalf("HW moved from %d to %d (record at %d) with ISR {%d} below min.insync.replicas", hwFrozen, hw, offX, lid)
	}
	if got, ok := fetchAt(t, leader.Addr(), topic, part, offX, 1*time.Second); ok {
		t.Fatalf("consumer read %q at offset %d above the high watermark %d", got, offX, hwFrozen)
	}
	t.Logf("acks=1 record appended at offset %d; high watermark stays at %d", offX, hwFrozen)

	c.Resume(f2)
	c.Resume(4)
	resumed := time.Now()
	testcluster.WaitFor(t, 30*time.Second, "HW past the acks=1 record", func() (bool, string) {
		hw := hwOf()
		return hw > offX, fmt.Sprintf("HW %d, record at %d", hw, offX)
	})
	got, ok := fetchAt(t, leader.Addr(), topic, part, offX, 10*time.Second)
	if !ok || got != invisible {
		t.Fatalf("after SIGCONT, offset %d holds %q (found %v), want %q", offX, got, ok, invisible)
	}
	t.Logf("record at offset %d visible to a consumer %v after SIGCONT", offX, time.Since(resumed).Round(time.Millisecond))
	back := isrIs(md[part].Replicas...)
	d = testcluster.WaitFor(t, 30*time.Second, "ISR back to all 3 replicas after SIGCONT (if stuck without node 4: known broker bug, see the test comment)", func() (bool, string) {
		ok, st := back()
		if ok {
			return true, ""
		}
		// Diagnostics: the leader's view of each replica, and each
		// follower's own view.
		for _, id := range md[part].Replicas {
			if hp, err := httpPartitionOf(c.Node(id), topic, part); err == nil {
				st += fmt.Sprintf("\n  node %d: role=%s leo=%d hw=%d epoch=%d isr=%v replicaStates=%+v", id, hp.Role, hp.LogEndOffset, hp.HighWatermark, hp.LeaderEpoch, hp.ISR, hp.ReplicaStates)
			} else {
				st += fmt.Sprintf("\n  node %d: %v", id, err)
			}
		}
		return false, st
	})
	t.Logf("SIGCONT nodes %d and 4: ISR back to %v after %v", f2, md[part].Replicas, d.Round(time.Millisecond))
	if code, _ := produce(allCl, "after"); code != 0 {
		t.Fatalf("acks=all after the ISR grew back: %v", kerr.ErrorForCode(code))
	}
	bg.Stop(20 * time.Second)
	t.Logf("background acks=1 load: %s", bg.Summary())
}

// rawProduce sends one ProduceRequest with one record to the client's
// first seed broker; the acks are the client's RequiredAcks.
func rawProduce(ctx context.Context, cl *kgo.Client, topic string, part int32, values ...string) (int16, int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = part
	rp.Records = batchtest.Build(batchtest.Options{}, batchtest.Values(values...))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := kr.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("malformed produce response %+v", resp)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset, nil
}

// listLatest asks the client's first seed broker for the partition's
// latest offset (the high watermark for read_uncommitted consumers).
func listLatest(ctx context.Context, cl *kgo.Client, topic string, part int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = part
	rp.Timestamp = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	sp := kr.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return 0, kerr.ErrorForCode(sp.ErrorCode)
	}
	return sp.Offset, nil
}

// fetchAt consumes one partition from offset with a franz-go consumer
// seeded with addr and returns the value at that offset, if it becomes
// readable within wait.
func fetchAt(t *testing.T, addr, topic string, part int32, offset int64, wait time.Duration) (string, bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(offset)}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		var got string
		var ok bool
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == offset {
				got, ok = string(r.Value), true
			}
		})
		if ok {
			return got, true
		}
	}
	return "", false
}
