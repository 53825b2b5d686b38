package handler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// migrationRun is a group of franz-go members, some classic (the default
// cooperative-sticky balancer) and some KIP-848 (kgo.ServerSideBalancer),
// consuming one topic, with the checks of an online migration: no
// partition is given to a member while another holds it, no record is
// consumed twice within one member's tenure of its partition, and every
// produced record is consumed.
type migrationRun struct {
	t     *testing.T
	n     *node
	topic string
	group string
	own   *owners

	mu     sync.Mutex
	seen   map[string]int   // record value -> times consumed
	tenure map[string]int64 // member/partition -> last offset consumed while held
	wg     sync.WaitGroup
}

type migrationMember struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *migrationRun) start(name string, kip848 bool, extra ...kgo.Opt) *migrationMember {
	t := r.t
	key := func(p int32) string { return fmt.Sprintf("%s/%d", name, p) }
	opts := []kgo.Opt{kgo.SeedBrokers(r.n.addr), kgo.ClientID(name),
		kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(300 * time.Millisecond), kgo.SessionTimeout(10 * time.Second),
		kgo.FetchMaxWait(100 * time.Millisecond), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			r.own.assigned(name, ps)
			r.mu.Lock()
			for _, p := range ps[r.topic] {
				r.tenure[key(p)] = -1
			}
			r.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(c context.Context, cl *kgo.Client, ps map[string][]int32) {
			// Commit what was consumed before giving the partitions up.
			if err := cl.CommitUncommittedOffsets(c); err != nil && c.Err() == nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			r.own.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if len(ps) > 0 {
				t.Errorf("%s lost partitions %v (it was fenced)", name, ps)
			}
			r.own.released(name, ps)
		})}
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	m := &migrationMember{name: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(m.done)
		for {
			fs := cl.PollFetches(c)
			if c.Err() != nil {
				return
			}
			fs.EachError(func(tp string, p int32, err error) { t.Errorf("%s: fetch %s/%d: %v", name, tp, p, err) })
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				r.seen[string(rec.Value)]++
				k := key(rec.Partition)
				if last, ok := r.tenure[k]; ok && rec.Offset <= last {
					t.Errorf("%s consumed %d/%d twice while holding the partition", name, rec.Partition, rec.Offset)
				}
				r.tenure[k] = rec.Offset
			})
			r.mu.Unlock()
			if err := cl.CommitRecords(c, fs.Records()...); err != nil && c.Err() == nil {
				t.Logf("%s: commit: %v", name, err)
			}
		}
	}()
	return m
}

func (r *migrationRun) stop(m *migrationMember) {
	m.cancel()
	<-m.done
	m.cl.Close() // leaves the group
}

// waitCommitted waits until the group's committed offsets reach the
// partitions' ends (records are still being produced: an end observed
// before the commits were).
func (r *migrationRun) waitCommitted(parts int) {
	r.t.Helper()
	adm := kadm.NewClient(r.n.client())
	r.waitFor("committed offsets reaching the log ends", func() bool {
		ends, err := adm.ListEndOffsets(ctx(r.t), r.topic)
		if err != nil {
			return false
		}
		time.Sleep(500 * time.Millisecond)
		offs, err := adm.FetchOffsets(ctx(r.t), r.group)
		if err != nil {
			return false
		}
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, _ := offs.Lookup(r.topic, o.Partition); c.At < o.Offset {
				ok = false
			}
		})
		return ok
	})
}

// groupType is the group's type in ListGroups v5 ("" if not listed).
func (r *migrationRun) groupType() string {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	resp, err := req.RequestWith(ctx(r.t), r.n.client())
	if err != nil {
		r.t.Fatal(err)
	}
	for _, g := range resp.Groups {
		if g.Group == r.group {
			return g.GroupType
		}
	}
	return ""
}

// held returns partition -> holder.
func (r *migrationRun) held() map[int32]string {
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	out := map[int32]string{}
	for p, m := range r.own.by {
		out[p] = m
	}
	return out
}

func (r *migrationRun) waitFor(what string, ok func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s never happened (type %q, held %v)", what, r.groupType(), r.held())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spread reports whether all parts partitions are held and each named
// member holds at least one.
func (r *migrationRun) spread(parts int, names ...string) bool {
	h := r.held()
	if len(h) != parts {
		return false
	}
	for _, name := range names {
		mine := 0
		for _, m := range h {
			if m == name {
				mine++
			}
		}
		if mine == 0 {
			return false
		}
	}
	return true
}

// TestKIP848OnlineMigration runs two classic franz-go members, then a
// KIP-848 member joins the running group (the online upgrade: the group
// becomes a consumer group and the classic members keep consuming
// through JoinGroup/SyncGroup/Heartbeat answered from it), then the
// KIP-848 member leaves (the downgrade back to a classic group). Records
// are produced throughout: every one is consumed, none twice within one
// member's tenure of its partition, and no partition is ever held by two
// members at once.
func TestKIP848OnlineMigration(t *testing.T) {
	props := map[string]string{}
	for k, v := range kip848Props {
		props[k] = v
	}
	props["group.min.session.timeout.ms"] = "1000"
	n := startNode(t, "", props)
	const parts = 6
	r := &migrationRun{t: t, n: n, topic: "migrate", group: "migrating", own: &owners{t: t, by: map[int32]string{}},
		seen: map[string]int{}, tenure: map[string]int64{}}
	createTopic(t, n.client(), r.topic, parts, nil)

	// A producer writes throughout the run.
	prodCtx, stopProducing := context.WithCancel(context.Background())
	produced := 0
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		cl := n.client(kgo.DefaultProduceTopic(r.topic))
		for i := 0; prodCtx.Err() == nil; i++ {
			if err := cl.ProduceSync(ctx(t), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			produced = i + 1
			time.Sleep(2 * time.Millisecond)
		}
	}()

	c1, c2 := r.start("classic1", false), r.start("classic2", false)
	r.waitFor("two classic members holding every partition", func() bool { return r.spread(parts, "classic1", "classic2") })
	if typ := r.groupType(); typ != "classic" {
		t.Fatalf("group type %q before the upgrade, want classic", typ)
	}

	k := r.start("kip848", true)
	r.waitFor("the upgraded group spread over three members", func() bool {
		return r.groupType() == "consumer" && r.spread(parts, "classic1", "classic2", "kip848")
	})
	time.Sleep(time.Second) // consume for a while in the mixed group
	if typ := r.groupType(); typ != "consumer" {
		t.Fatalf("group type %q with a KIP-848 member, want consumer", typ)
	}

	// Membership changes inside the mixed group bump its epoch: the
	// classic members rejoin and keep committing.
	k2 := r.start("kip848b", true)
	r.waitFor("the second KIP-848 member holding partitions", func() bool {
		return r.spread(parts, "classic1", "classic2", "kip848", "kip848b")
	})
	r.stop(k2)
	r.waitFor("the mixed group spread over three members again", func() bool {
		return r.groupType() == "consumer" && r.spread(parts, "classic1", "classic2", "kip848")
	})
	r.waitCommitted(parts)

	r.stop(k)
	r.waitFor("the downgraded group spread over the classic members", func() bool {
		return r.groupType() == "classic" && r.spread(parts, "classic1", "classic2")
	})
	// A heartbeat that is invalid does not convert the classic group.
	bad := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	bad.Group, bad.MemberID, bad.MemberEpoch, bad.RebalanceTimeoutMillis = r.group, "bad-member", 0, 30000
	bad.SubscribedTopicRegex, bad.Topics = kmsg.StringPtr("a["), []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := request[*kmsg.ConsumerGroupHeartbeatResponse](t, n.client(), bad); resp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Errorf("invalid heartbeat on the classic group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	time.Sleep(time.Second)
	if typ := r.groupType(); typ != "classic" {
		t.Errorf("group type %q after an invalid heartbeat, want classic", typ)
	}

	stopProducing()
	<-prodDone
	r.waitFor("every produced record consumed", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := 0; i < produced; i++ {
			if r.seen[fmt.Sprint(i)] == 0 {
				return false
			}
		}
		return true
	})
	r.waitCommitted(parts)
	r.stop(c1)
	r.stop(c2)
	r.wg.Wait()
	dups := 0
	for _, c := range r.seen {
		dups += c - 1
	}
	t.Logf("%d records produced and consumed, %d consumed again after a partition moved", produced, dups)
}
