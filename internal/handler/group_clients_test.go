package handler_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupProps keeps rebalances fast in tests.
var groupProps = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "1000",
	"offsets.topic.num.partitions":     "5",
}

// produceN writes n records "0".."n-1" spread over topic's partitions.
func produceN(t *testing.T, n *node, topic string, from, count int) {
	t.Helper()
	cl := n.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var rs []*kgo.Record
	for i := from; i < from+count; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checkCommittedAtEnd verifies the group's committed offsets equal the log
// end of every partition of topic.
func checkCommittedAtEnd(t *testing.T, n *node, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(n.client())
	ends, err := adm.ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		offs, err := adm.FetchOffsets(ctx(t), group)
		if err != nil {
			t.Fatal(err)
		}
		bad := ""
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := offs.Lookup(topic, e.Partition)
			if e.Offset > 0 && (!ok || o.At != e.Offset) {
				bad += fmt.Sprintf(" p%d: committed %d (found %v) end %d;", e.Partition, o.At, ok, e.Offset)
			}
		})
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets not at the log end:%s", bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStable waits until group is Stable with members members, each
// assigned something.
func waitStable(t *testing.T, n *node, group string, members int) {
	t.Helper()
	adm := kadm.NewClient(n.client())
	deadline := time.Now().Add(30 * time.Second)
	for {
		gs, err := adm.DescribeGroups(ctx(t), group)
		if err != nil {
			t.Fatal(err)
		}
		g := gs[group]
		ok := g.State == "Stable" && len(g.Members) == members
		for _, m := range g.Members {
			if ca, _ := m.Assigned.AsConsumer(); ca == nil || len(ca.Topics) == 0 {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: state %s with %d members, want Stable with %d", group, g.State, len(g.Members), members)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFranzGoGroupMembershipChanges runs three cooperative-sticky members on
// a 12-partition topic, adds a fourth and removes one mid-stream, and checks
// every record is consumed exactly once and committed offsets end at the
// log end.
func TestFranzGoGroupMembershipChanges(t *testing.T) {
	n := startNode(t, "", groupProps)
	const topic, group, total = "events", "franz-group", 6000
	createTopic(t, n.client(), topic, 12, nil)

	var mu sync.Mutex
	seen := map[string]int{}
	byMember := map[string]int{}
	var wg sync.WaitGroup
	type consumer struct {
		cl     *kgo.Client
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(name string) *consumer {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll())
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(context.Background())
		cs := &consumer{cl: cl, cancel: cancel, done: make(chan struct{})}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(cs.done)
			for {
				fs := cl.PollFetches(c)
				if c.Err() != nil {
					cl.AllowRebalance()
					return
				}
				fs.EachError(func(tp string, p int32, err error) { t.Errorf("%s: fetch %s/%d: %v", name, tp, p, err) })
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; byMember[name]++ })
				mu.Unlock()
				// Commit before allowing a rebalance: whoever gets these
				// partitions next starts after what was counted here.
				if err := cl.CommitRecords(ctx(t), fs.Records()...); err != nil {
					t.Errorf("%s: commit: %v", name, err)
				}
				cl.AllowRebalance()
			}
		}()
		return cs
	}
	stop := func(cs *consumer) {
		cs.cancel()
		<-cs.done
		cs.cl.Close() // leaves the group
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for count() < want {
			if time.Now().After(deadline) {
				t.Fatalf("consumed %d distinct records, want %d", count(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	c1, c2, c3 := start("c1"), start("c2"), start("c3")
	waitStable(t, n, group, 3)
	produceN(t, n, topic, 0, 2000)
	waitFor(2000)
	c4 := start("c4")
	waitStable(t, n, group, 4)
	produceN(t, n, topic, 2000, 2000)
	stop(c2)
	waitStable(t, n, group, 3)
	produceN(t, n, topic, 4000, 2000)
	waitFor(total)
	for _, c := range []*consumer{c1, c3, c4} {
		stop(c)
	}
	wg.Wait()
	mu.Lock()
	t.Logf("records per member: %v", byMember)
	if byMember["c4"] == 0 {
		t.Error("the member that joined mid-stream got nothing")
	}
	for i := 0; i < total; i++ {
		if k := seen[strconv.Itoa(i)]; k != 1 {
			t.Errorf("record %d consumed %d times", i, k)
		}
	}
	mu.Unlock()
	checkCommittedAtEnd(t, n, group, topic)
}
