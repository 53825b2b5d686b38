package groups

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/group"
)

// tracker records what failover members consume (by partition and offset)
// and which commits the coordinator acknowledged.
type tracker struct {
	mu        sync.Mutex
	delivered map[int32]map[int64]int // partition -> offset -> deliveries
	values    map[string]int
	acked     map[int32]int64 // partition -> highest acknowledged commit
	frozen    atomic.Bool     // members do not commit while set
	inflight  sync.WaitGroup  // commits in flight
	freezeMu  sync.Mutex      // orders freeze against starting a commit

	phase        int          // failovers so far
	redeliveries []redelivery // records delivered more than once
}

type redelivery struct {
	partition int32
	offset    int64
	phase     int
}

func newTracker() *tracker {
	return &tracker{delivered: map[int32]map[int64]int{}, values: map[string]int{}, acked: map[int32]int64{}}
}

func (tr *tracker) deliver(r *kgo.Record) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := tr.delivered[r.Partition]
	if m == nil {
		m = map[int64]int{}
		tr.delivered[r.Partition] = m
	}
	m[r.Offset]++
	if m[r.Offset] > 1 {
		tr.redeliveries = append(tr.redeliveries, redelivery{r.Partition, r.Offset, tr.phase})
	}
	tr.values[string(r.Value)]++
}

// freeze stops members from committing and waits for commits in flight.
func (tr *tracker) freeze() {
	tr.freezeMu.Lock()
	tr.frozen.Store(true)
	tr.freezeMu.Unlock()
	tr.inflight.Wait()
}

func (tr *tracker) unfreeze() { tr.frozen.Store(false) }

// beginCommit reports whether a member may commit now.
func (tr *tracker) beginCommit() bool {
	tr.freezeMu.Lock()
	defer tr.freezeMu.Unlock()
	if tr.frozen.Load() {
		return false
	}
	tr.inflight.Add(1)
	return true
}

func (tr *tracker) ackedCopy() map[int32]int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range tr.acked {
		out[p] = o
	}
	return out
}

func (tr *tracker) distinct() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.values)
}

type failoverMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// startFailoverMember consumes topic in group (cooperative-sticky) and,
// after each poll, commits everything polled (unless the tracker is
// frozen) before allowing a rebalance, noting every acknowledged commit.
func startFailoverMember(t *testing.T, c *cluster, name, group, topic string, tr *tracker) *failoverMember {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(30*time.Second),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryTimeout(30*time.Second),
		debugLogger(name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &failoverMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				cl.AllowRebalance()
				return
			}
			fs.EachError(func(tp string, p int32, err error) { t.Logf("%s: fetch %s/%d: %v", name, tp, p, err) })
			fs.EachRecord(tr.deliver)
			if tr.beginCommit() {
				offs := cl.UncommittedOffsets()
				if len(offs) > 0 {
					cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
						if err != nil {
							t.Logf("%s: commit: %v", name, err)
							return
						}
						tr.mu.Lock()
						defer tr.mu.Unlock()
						for _, rt := range resp.Topics {
							for _, rp := range rt.Partitions {
								if rp.ErrorCode != 0 {
									t.Logf("%s: commit %s/%d: %v", name, rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
									continue
								}
								if o := offs[rt.Topic][rp.Partition].Offset; o > tr.acked[rp.Partition] {
									tr.acked[rp.Partition] = o
								}
							}
						}
					})
				}
				tr.inflight.Done()
			}
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(func() { m.cancel(); cl.Close() })
	return m
}

func (m *failoverMember) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// failover is one change of the group's coordinator under load.
type failover struct {
	what      string
	committed map[int32]int64 // acknowledged commits when it happened
}

// TestCoordinatorFailover: three members consume a topic that a producer
// keeps writing to, and the group's coordinator changes three times:
//
//  1. the coordinating node is SIGKILLed;
//  2. it is restarted, and the controller's preferred-leader election
//     moves the offsets partition back to it (a graceful move: the other
//     node resigns, it loads the partition);
//  3. the coordinating node is stopped with SIGTERM (controlled shutdown).
//
// Each time, the members must find the new coordinator; it must hold
// exactly the offsets whose commits were acknowledged before (commits are
// paused around the change so they are known); consumption must go on
// from them: a record is redelivered only at or after its partition's
// offset committed at the last change, never from the start. After the
// first change a fourth member joins (a rebalance on the new coordinator,
// so moved partitions start from their committed offsets there). In the
// end every acknowledged record has been consumed and the committed
// offsets are at the log end.
func TestCoordinatorFailover(t *testing.T) {
	c := startClusterWith(t, map[string]string{"leader.imbalance.check.interval.seconds": "1"})
	const topic, group, partitions = "failover", "failover-group", 12
	c.CreateTopic(topic, partitions, 3, nil, nil)
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }

	coord, err := c.coordinator(c.Client(), group)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	var members []*failoverMember
	for i := 1; i <= 3; i++ {
		members = append(members, startFailoverMember(t, c, fmt.Sprintf("m%d", i), group, topic, tr))
	}
	c.waitStable(group, 3, 60*time.Second)
	step(fmt.Sprintf("3 members stable; node %d coordinates %s", coord, group))

	// A producer writes continuously until told to stop; acknowledged
	// values are remembered (every one must be consumed).
	var producedMu sync.Mutex
	var produced []string
	stopProducing := make(chan struct{})
	producerDone := make(chan struct{})
	pcl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(60*time.Second))
	go func() {
		defer close(producerDone)
		for i := 0; ; {
			select {
			case <-stopProducing:
				return
			default:
			}
			var rs []*kgo.Record
			for range 500 {
				rs = append(rs, &kgo.Record{Value: []byte(value("f", i))})
				i++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			res := pcl.ProduceSync(ctx, rs...)
			cancel()
			producedMu.Lock()
			for _, r := range res {
				if r.Err != nil {
					t.Errorf("produce %s: %v", r.Record.Value, r.Err)
					continue
				}
				produced = append(produced, string(r.Record.Value))
			}
			producedMu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	numProduced := func() int {
		producedMu.Lock()
		defer producedMu.Unlock()
		return len(produced)
	}
	// progress waits until n more records are produced and all produced
	// so far are consumed.
	progress := func(n int, what string) {
		t.Helper()
		mark := numProduced() + n
		deadline := time.Now().Add(90 * time.Second)
		for numProduced() < mark || tr.distinct() < mark {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d produced, %d consumed, want %d", what, numProduced(), tr.distinct(), mark)
			}
			time.Sleep(20 * time.Millisecond)
		}
		step(what)
	}

	var failovers []failover
	// change freezes commits, runs act, waits for a coordinator other
	// than from and checks it holds exactly the acknowledged offsets.
	change := func(what string, from int32, act func()) int32 {
		t.Helper()
		tr.freeze()
		before := tr.ackedCopy()
		onOld, err := c.committed(c.Admin(), group, topic)
		if err != nil {
			t.Fatalf("%s: fetching offsets before: %v", what, err)
		}
		for p, o := range before {
			if onOld[p] != o {
				t.Fatalf("%s: before: partition %d committed %d on the coordinator, %d acknowledged to the member", what, p, onOld[p], o)
			}
		}
		if len(before) != partitions {
			t.Fatalf("%s: commits acknowledged for %d partitions, want %d: %v", what, len(before), partitions, before)
		}
		tr.mu.Lock()
		tr.phase++
		tr.mu.Unlock()
		failovers = append(failovers, failover{what, before})
		at := time.Now()
		act()
		probe := c.Client()
		var to int32
		deadline := time.Now().Add(60 * time.Second)
		for {
			nc, err := c.coordinator(probe, group)
			if err == nil && nc != from {
				to = nc
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: FindCoordinator still answers %d / %v after 60s", what, nc, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var after map[int32]int64
		for {
			// A fresh client each try: a broker that has not yet
			// applied the change can still name the old coordinator,
			// and franz-go keeps a coordinator it cannot dial until the
			// request's context ends, so a reused client would keep
			// dialing the killed node.
			adm := c.Admin()
			after, err = c.committed(adm, group, topic)
			adm.Close()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: fetching offsets from node %d: %v", what, to, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for p := range int32(partitions) {
			if after[p] != before[p] {
				t.Errorf("%s: partition %d: node %d has committed offset %d, %d was acknowledged before", what, p, to, after[p], before[p])
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		step(fmt.Sprintf("%s: node %d coordinates %s after %v, with the acknowledged offsets", what, to, group, time.Since(at).Round(time.Millisecond)))
		tr.unfreeze()
		return to
	}

	progress(3000, "consuming")

	// 1. SIGKILL.
	killed := c.Node(coord)
	coord = change(fmt.Sprintf("SIGKILL node %d", killed.NodeID()), coord, killed.Kill)
	progress(1000, "consumption resumed after the SIGKILL")
	members = append(members, startFailoverMember(t, c, "m4", group, topic, tr))
	c.waitStable(group, 4, 60*time.Second)
	step("m4 joined on the new coordinator")
	progress(1000, "consuming with 4 members")

	// 2. The killed node returns. It was the first leader of the group's
	// offsets partition, so normally its preferred replica: the
	// controller's preferred-leader election then moves the partition,
	// and the group, back to it.
	restart := func() {
		killed.Restart()
		c.WaitTopicReady("__consumer_offsets", 0, 30*time.Second)
	}
	if c.preferredCoordinator(group) == int32(killed.NodeID()) {
		coord = change(fmt.Sprintf("restart node %d, preferred leader of the group's partition", killed.NodeID()), coord, restart)
		progress(1000, "consuming after the move back")
	} else {
		restart()
		step(fmt.Sprintf("restarted node %d (not the preferred leader of the group's partition)", killed.NodeID()))
	}

	// 3. Controlled shutdown of the coordinator.
	stopped := c.Node(coord)
	coord = change(fmt.Sprintf("SIGTERM node %d", stopped.NodeID()), coord, stopped.Stop)
	progress(1000, "consumption resumed after the SIGTERM")

	close(stopProducing)
	<-producerDone
	total := numProduced()
	deadline := time.Now().Add(60 * time.Second)
	for tr.distinct() < total {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d distinct of %d produced", tr.distinct(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	step(fmt.Sprintf("all %d produced records consumed", total))
	c.waitCommittedAtEnd(group, topic, 60*time.Second)
	for _, m := range members {
		m.stop()
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	producedMu.Lock()
	defer producedMu.Unlock()
	for _, v := range produced {
		if tr.values[v] == 0 {
			t.Errorf("record %s acknowledged but never consumed", v)
		}
	}
	perPhase := make([]int, len(failovers)+1)
	bad := 0
	for _, r := range tr.redeliveries {
		perPhase[r.phase]++
		var min int64
		if r.phase > 0 {
			min = failovers[r.phase-1].committed[r.partition]
		} else {
			min = 1 << 62 // no redelivery expected before the first change
		}
		if r.offset < min {
			if bad++; bad <= 5 {
				t.Errorf("partition %d offset %d redelivered in phase %d, below the offset committed at the change (%d): consumption did not resume from the committed offset", r.partition, r.offset, r.phase, min)
			}
		}
	}
	for i, f := range failovers {
		t.Logf("change %d (%s): %d records redelivered afterwards, all at or after the offsets committed then", i+1, f.what, perPhase[i+1])
	}
	t.Logf("%d records produced and consumed; %d redelivered in all", total, len(tr.redeliveries))
}

// preferredCoordinator is the preferred replica (first in the replica
// list) of group's __consumer_offsets partition.
func (c *cluster) preferredCoordinator(g string) int32 {
	c.t.Helper()
	md, err := c.Admin().Metadata(tctx(c.t, 10*time.Second), "__consumer_offsets")
	if err != nil {
		c.t.Fatal(err)
	}
	td := md.Topics["__consumer_offsets"]
	i := group.PartitionFor(g, int32(len(td.Partitions)))
	if p, ok := td.Partitions[i]; ok && len(p.Replicas) > 0 {
		return p.Replicas[0]
	}
	return -1
}
