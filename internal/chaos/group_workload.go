package chaos

// The group workload (--workload group): the queue workload's producers,
// and instead of its assign-mode readers a consumer group "chaos-group"
// whose members mix KIP-848 consumers (kgo.ServerSideBalancer) and
// classic ones (cooperative-sticky), so the group migrates between the
// two protocols as members come and go. While faults run, the membership
// churns on a seeded schedule: a member leaves (closes its client, which
// leaves the group), crashes (every connection of its client is cut and
// new ones are refused, so it stops without leaving and the coordinator
// fences it when its session expires), or a new member joins. Members
// commit what they consumed after every poll (CommitRecords) and before
// giving up partitions. The group checker (group_checker.go) reads what the members
// saw.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupName is the group the workload's members join.
const groupName = "chaos-group"

// groupProps are the broker settings of the group workload: quick
// rebalances and session timeouts short enough for crashes to be fenced
// within the run.
var groupProps = []string{
	"group.initial.rebalance.delay.ms=500",
	"group.min.session.timeout.ms=2000",
	"group.consumer.session.timeout.ms=8000",
	"group.consumer.min.session.timeout.ms=2000",
	"group.consumer.heartbeat.interval.ms=1000",
	"group.consumer.min.heartbeat.interval.ms=500",
}

// GroupEvent is one membership change or observation of the group
// workload, in time order.
type GroupEvent struct {
	AtMs   float64 `json:"atMs"`
	Member string  `json:"member"`
	// Kind: "join", "leave", "crash", "assigned", "revoked", "lost",
	// "consumed", "committed" (an observation of the group's committed
	// offsets by the harness, Member "admin"), "type" (the group's type
	// changed, Values[0]: classic or consumer).
	Kind       string  `json:"kind"`
	Generation int32   `json:"generation,omitempty"`
	Partitions []int32 `json:"partitions,omitempty"`
	// Offsets: "consumed", the offsets read of Partitions[0]; "committed",
	// the committed offset of each of Partitions.
	Offsets []int64  `json:"offsets,omitempty"`
	Values  []string `json:"values,omitempty"`
}

// groupHistory collects the group workload's events.
type groupHistory struct {
	mu     sync.Mutex
	events []GroupEvent
	stats  GroupStats
}

// GroupStats counts the group workload's membership changes.
type GroupStats struct {
	Joins     int `json:"joins"`
	Leaves    int `json:"leaves"`
	Crashes   int `json:"crashes"`
	KIP848    int `json:"kip848Members"`
	Classic   int `json:"classicMembers"`
	Consumed  int `json:"consumed"`
	Committed int `json:"commitObservations"`
	// TypeChanges counts the group's type changes seen by the harness
	// (ListGroups every second): classic to consumer and back.
	TypeChanges int `json:"typeChanges"`
}

func (g *groupHistory) add(e GroupEvent) {
	g.mu.Lock()
	g.events = append(g.events, e)
	g.mu.Unlock()
}

// gmember is one group member: a client whose connections can be cut.
type gmember struct {
	name   string
	kip848 bool
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	dead  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

// dial wraps the cluster's dialer: a crashed member's dials fail.
func (m *gmember) dial(inner func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		if m.dead.Load() {
			return nil, errors.New("member crashed")
		}
		c, err := inner(ctx, network, host)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		m.conns = append(m.conns, c)
		m.mu.Unlock()
		return c, nil
	}
}

// crash cuts every connection of m and refuses new ones.
func (m *gmember) crash() {
	m.dead.Store(true)
	m.mu.Lock()
	for _, c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
}

// groupWorkload drives the members.
type groupWorkload struct {
	w  *workload
	gh *groupHistory

	mu      sync.Mutex
	members []*gmember
	next    int
	wg      sync.WaitGroup
}

// startMember starts a member: KIP-848 or classic.
func (g *groupWorkload) startMember(ctx context.Context, kip848 bool) {
	w := g.w
	g.mu.Lock()
	name := fmt.Sprintf("m%d", g.next)
	g.next++
	g.mu.Unlock()
	m := &gmember{name: name, kip848: kip848, done: make(chan struct{})}
	gen := func(cl *kgo.Client) int32 { _, gen := cl.GroupMetadata(); return gen }
	parts := func(ps map[string][]int32) []int32 { return ps[w.topic] }
	opts := append(w.c.clientOpts(),
		kgo.Dialer(m.dial(w.c.dialer())),
		kgo.ConsumerGroup(groupName), kgo.ConsumeTopics(w.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(8*time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			g.gh.add(GroupEvent{AtMs: w.h.since(), Member: name, Kind: "assigned", Generation: gen(cl), Partitions: parts(ps)})
		}),
		kgo.OnPartitionsRevoked(func(c context.Context, cl *kgo.Client, ps map[string][]int32) {
			if !m.dead.Load() {
				_ = cl.CommitUncommittedOffsets(c)
			}
			g.gh.add(GroupEvent{AtMs: w.h.since(), Member: name, Kind: "revoked", Generation: gen(cl), Partitions: parts(ps)})
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			g.gh.add(GroupEvent{AtMs: w.h.since(), Member: name, Kind: "lost", Generation: gen(cl), Partitions: parts(ps)})
		}),
	)
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		w.h.pollErr(err)
		return
	}
	m.cl = cl
	mctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	g.mu.Lock()
	g.members = append(g.members, m)
	g.mu.Unlock()
	g.gh.mu.Lock()
	g.gh.stats.Joins++
	if kip848 {
		g.gh.stats.KIP848++
	} else {
		g.gh.stats.Classic++
	}
	g.gh.mu.Unlock()
	g.gh.add(GroupEvent{AtMs: w.h.since(), Member: name, Kind: "join", Values: []string{map[bool]string{true: "kip848", false: "classic"}[kip848]}})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(m.done)
		for mctx.Err() == nil && !m.dead.Load() {
			pctx, pcancel := context.WithTimeout(mctx, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			if m.dead.Load() {
				return
			}
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					w.h.pollErr(err)
				}
			})
			at := w.h.since()
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				if len(p.Records) == 0 {
					return
				}
				e := GroupEvent{AtMs: at, Member: name, Kind: "consumed", Generation: gen(cl), Partitions: []int32{p.Partition}}
				for _, r := range p.Records {
					e.Offsets = append(e.Offsets, r.Offset)
					e.Values = append(e.Values, string(r.Value))
				}
				g.gh.add(e)
			})
			if rs := fs.Records(); len(rs) > 0 {
				cctx, ccancel := context.WithTimeout(mctx, 5*time.Second)
				_ = cl.CommitRecords(cctx, rs...)
				ccancel()
			}
		}
	}()
}

// stopMember stops m: a leave (the client closes, leaving the group) or
// a crash (its connections are cut first, so nothing more reaches the
// broker).
func (g *groupWorkload) stopMember(m *gmember, crash bool) {
	kind := "leave"
	if crash {
		kind = "crash"
		m.crash()
	}
	g.gh.add(GroupEvent{AtMs: g.w.h.since(), Member: m.name, Kind: kind})
	m.cancel()
	<-m.done
	go m.cl.Close() // a crashed member's close cannot reach the broker
	g.gh.mu.Lock()
	if crash {
		g.gh.stats.Crashes++
	} else {
		g.gh.stats.Leaves++
	}
	g.gh.mu.Unlock()
}

// run starts the initial members (alternately KIP-848 and classic) and
// churns the membership until ctx ends or the workload stops. The churn
// runs in phases of 20 s that favour one protocol: new members use it and
// members of the other are the ones to go, so the group keeps converting
// between a classic group and a consumer group.
func (g *groupWorkload) run(ctx context.Context, initial int, done *sync.WaitGroup) {
	for i := range initial {
		g.startMember(ctx, i%2 == 0)
	}
	done.Add(1)
	go func() {
		defer done.Done()
		rng := rand.New(rand.NewPCG(g.w.o.Seed, 4242))
		start := time.Now()
		for !g.w.stop.Load() && ctx.Err() == nil {
			sleepCtx(ctx, time.Duration(3000+rng.IntN(4000))*time.Millisecond)
			if g.w.stop.Load() || ctx.Err() != nil {
				return
			}
			kip848 := int(time.Since(start)/(20*time.Second))%2 == 1
			g.mu.Lock()
			n := len(g.members)
			g.mu.Unlock()
			switch r := rng.IntN(3); {
			case n > 1 && r == 0, n > initial+1:
				g.stopOne(rng, !kip848, false)
				g.startMember(ctx, kip848)
			case n > 1 && r == 1:
				g.stopOne(rng, !kip848, true)
				g.startMember(ctx, kip848)
			default:
				g.startMember(ctx, kip848)
			}
		}
	}()
}

// stopOne stops a random member, one of kind kip848 if there is one.
func (g *groupWorkload) stopOne(rng *rand.Rand, kip848, crash bool) {
	g.mu.Lock()
	var of []int
	for i, m := range g.members {
		if m.kip848 == kip848 {
			of = append(of, i)
		}
	}
	i := rng.IntN(len(g.members))
	if len(of) > 0 {
		i = of[rng.IntN(len(of))]
	}
	m := g.members[i]
	g.members = append(g.members[:i], g.members[i+1:]...)
	g.mu.Unlock()
	g.stopMember(m, crash)
}

// watchCommits records the group's committed offsets every second.
func (g *groupWorkload) watchCommits(ctx context.Context, adm *kadm.Client, done *sync.WaitGroup) {
	done.Add(1)
	go func() {
		defer done.Done()
		last := ""
		for ctx.Err() == nil && !g.w.stop.Load() {
			g.observeCommits(ctx, adm)
			if typ := g.groupType(ctx, adm); typ != "" && typ != last {
				g.gh.add(GroupEvent{AtMs: g.w.h.since(), Member: "admin", Kind: "type", Values: []string{typ}})
				if last != "" {
					g.gh.mu.Lock()
					g.gh.stats.TypeChanges++
					g.gh.mu.Unlock()
				}
				last = typ
			}
			sleepCtx(ctx, time.Second)
		}
	}()
}

// groupType is the group's type (ListGroups v5), "" if unknown.
func (g *groupWorkload) groupType(ctx context.Context, adm *kadm.Client) string {
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	groups, err := adm.ListGroups(lctx)
	if err != nil {
		return ""
	}
	return groups[groupName].GroupType
}

// observeCommits records one observation of the committed offsets.
func (g *groupWorkload) observeCommits(ctx context.Context, adm *kadm.Client) map[int32]int64 {
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(fctx, groupName)
	if err != nil {
		return nil
	}
	e := GroupEvent{AtMs: g.w.h.since(), Member: "admin", Kind: "committed"}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic != g.w.topic || o.Err != nil {
			return
		}
		e.Partitions = append(e.Partitions, o.Partition)
		e.Offsets = append(e.Offsets, o.At)
		out[o.Partition] = o.At
	})
	g.gh.add(e)
	g.gh.mu.Lock()
	g.gh.stats.Committed++
	g.gh.mu.Unlock()
	return out
}

// drain keeps the remaining members consuming until the committed
// offsets reach ends (the high watermarks) or timeout, then stops them.
func (g *groupWorkload) drain(ctx context.Context, adm *kadm.Client, ends map[int32]int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last map[int32]int64
	for {
		last = g.observeCommits(ctx, adm)
		caught := last != nil
		for p, end := range ends {
			if last[p] < end {
				caught = false
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, time.Second)
	}
	g.mu.Lock()
	ms := g.members
	g.members = nil
	g.mu.Unlock()
	for _, m := range ms {
		g.stopMember(m, false)
	}
	waitTimeout(&g.wg, 15*time.Second)
	var lag []string
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		if last[p] < ends[p] {
			lag = append(lag, fmt.Sprintf("partition %d at %d of %d", p, last[p], ends[p]))
		}
	}
	if len(lag) > 0 {
		return fmt.Errorf("the group's committed offsets are below the high watermarks %v after the run: %v", timeout, lag)
	}
	return nil
}

// writeJSONL writes one JSON line per event.
func writeJSONL[E any](path string, events []E) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
