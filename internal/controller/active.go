package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// active is the active-controller side of a voter. Decisions go through
// one queue and are made one at a time by the decision loop, which commits
// them in groups (decide.go).
type active struct {
	n *Node
	q decisionQueue

	mu      sync.Mutex
	on      bool
	gen     uint64
	contact map[int32]time.Time // last heartbeat per broker (memory only)
	place   int                 // rotating start of replica placement
	// applied is each broker's metadata offset from its last heartbeat;
	// shutdownAt the offset at which a broker's controlled shutdown was
	// committed. Shutdown is granted once every other active broker has
	// applied it (BrokerHeartbeatManager.calculateNextBrokerState, docs/kafka-replication.md §4.3).
	applied    map[int32]int64
	shutdownAt map[int32]int64
	// suspect are the brokers this term doubts are alive, probing those
	// with a probe in flight (liveness.go).
	suspect map[int32]suspicion
	probing map[int32]bool

	// now and newUUID default to time.Now and metadata.NewUUID; a Machine
	// (machine.go) gives the simulator's clock and a seeded id source.
	now     func() time.Time
	newUUID func() metadata.UUID
	// propose, when set, commits a group's entries instead of raft (a
	// Machine's in-memory log), and submit makes each decision at once on
	// the caller's goroutine instead of queueing it for the decision loop.
	propose func(entries [][]record) ([]int64, int, error)
	// probe dials a suspect broker's listener (liveness.go); nil (a
	// Machine) probes nothing, leaving the session rule alone.
	probe func(ctx context.Context, addr string) error
	// knobs re-introduce fixed bugs (tests only; never set in production).
	knobs Knobs
}

// Knobs re-introduce fixed controller bugs, for the simulator to show it
// catches them (internal/sim). Production never sets them.
type Knobs struct {
	// GrantShutdownEarly grants a controlled shutdown once the broker
	// leads nothing, without waiting until every other active broker has
	// applied the shutdown (BrokerHeartbeatManager's check).
	GrantShutdownEarly bool
	// KeepELRAfterUncleanRegistration leaves a broker in the ELRs when
	// it registers without proof that its disk kept its data (elr.go).
	KeepELRAfterUncleanRegistration bool
}

func (a *active) init(n *Node) {
	a.n = n
	a.q.init()
	a.contact = map[int32]time.Time{}
	a.applied = map[int32]int64{}
	a.shutdownAt = map[int32]int64{}
	a.suspect = map[int32]suspicion{}
	a.probing = map[int32]bool{}
	a.now = time.Now
	a.newUUID = metadata.NewUUID
}

// activateLocked (a.mu held) starts a term of leadership on the committed image: every
// registered broker gets a full session from now (contact from the
// previous term is not known here), no heartbeat's applied offset or
// shutdown offset is carried over, every other broker is a suspect until
// it heartbeats (liveness.go), and decisions are taken from now on.
func (a *active) activateLocked() {
	now := a.now()
	a.contact = map[int32]time.Time{}
	a.suspect = map[int32]suspicion{}
	for id := range a.n.st.Image().Brokers {
		a.contact[id] = now
		a.suspectLocked(id, "a new controller term began without its heartbeat")
	}
	a.applied = map[int32]int64{}
	a.shutdownAt = map[int32]int64{}
	a.on = true
}

// bootstrap writes a new cluster's id and feature levels, once; or, on
// a standalone node migrating an earlier binary's single-node metadata
// (Config.Import), that metadata with its cluster id.
func (a *active) bootstrap(ctx context.Context) {
	if a.n.cfg.Standalone {
		a.updateOwnAddress()
	}
	if a.n.st.Image().ClusterID != "" {
		return
	}
	a.decide(ctx, func(im *metadata.Image, b *batch) error {
		if im.ClusterID == "" {
			if old := a.n.cfg.Import; old != nil && old.ClusterID != "" {
				b.add(importRecord(old))
			} else if id := a.n.cfg.ClusterID; id != "" {
				b.add(record{Type: recClusterID, ClusterID: id})
			} else {
				b.add(record{Type: recClusterID, ClusterID: a.newUUID().String()[:22]})
			}
			// A new cluster starts at the highest feature levels
			// (features.go); an upgraded one keeps what it had.
			for _, name := range slices.Sorted(maps.Keys(metadata.SupportedFeatures())) {
				b.add(record{Type: recFeatureLevel, Feature: &featureLevel{Name: name, Level: metadata.SupportedFeatures()[name].Max}})
			}
		}
		return nil
	})
}

// noteApplied records a broker's reported metadata offset.
func (a *active) noteApplied(id int32, off int64) {
	a.mu.Lock()
	if off > a.applied[id] {
		a.applied[id] = off
	}
	a.mu.Unlock()
}

// othersCaughtUp reports whether every active broker other than id has
// applied the metadata up to id's controlled-shutdown offset.
func (a *active) othersCaughtUp(im *metadata.Image, id int32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.shutdownAt[id]
	if !ok {
		at = im.Offset
		a.shutdownAt[id] = at
	}
	for bid, br := range im.Brokers {
		if bid != id && br.Active() && a.applied[bid] < at {
			return false
		}
	}
	return true
}

func (a *active) isActive() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.on
}

// leaderLoop follows raft leadership: it starts an active session on
// gaining it and ends the session on losing it.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	var stop chan struct{}
	end := func() {
		if stop != nil {
			close(stop)
			stop = nil
		}
		n.act.mu.Lock()
		n.act.on = false
		n.act.gen++
		n.act.mu.Unlock()
	}
	for {
		select {
		case <-n.raftDone:
			end()
			return
		case leader := <-n.notifyCh:
			if leader && stop == nil {
				stop = make(chan struct{})
				n.act.mu.Lock()
				gen := n.act.gen
				n.act.mu.Unlock()
				n.wg.Add(1)
				go n.act.run(stop, gen)
			} else if !leader {
				end()
			}
		}
	}
}

// run is one term of leadership: barrier, activation (grace period for every
// broker), then periodic fencing and rebalance checks.
func (a *active) run(stop chan struct{}, gen uint64) {
	defer a.n.wg.Done()
	n := a.n
	// The barrier makes the FSM reflect every earlier term before the
	// first decision; retry while still leader.
	for {
		err := n.raft.Barrier(10 * time.Second).Error()
		if err == nil {
			break
		}
		n.log.Warn("barrier after election", "err", err)
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return
		}
		select {
		case <-stop:
			return
		case <-n.closing:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	a.mu.Lock()
	if a.gen != gen {
		a.mu.Unlock()
		return
	}
	a.activateLocked()
	a.mu.Unlock()
	n.log.Info("active controller", "offset", n.st.Image().Offset)
	a.probeSuspects()
	a.bootstrap(n.baseCtx)
	tick := time.NewTicker(min(a.sessionTimeout()/4, 250*time.Millisecond))
	defer tick.Stop()
	lastRebalance := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-n.closing:
			return
		case <-tick.C:
		}
		a.fenceStale()
		a.probeSuspects()
		if ri := a.rebalanceInterval(); time.Since(lastRebalance) >= ri {
			lastRebalance = time.Now()
			a.decideSplit(n.baseCtx, func(im *metadata.Image, b *batch) error {
				a.electOffline(b, "")
				if n.cfg.Broker.Bool("auto.leader.rebalance.enable", true) {
					a.rebalance(b)
				}
				return nil
			})
		}
	}
}

func (a *active) sessionTimeout() time.Duration {
	return time.Duration(a.n.cfg.Broker.Int("broker.session.timeout.ms", 9000)) * time.Millisecond
}

func (a *active) rebalanceInterval() time.Duration {
	s := a.n.cfg.Broker.Int("leader.imbalance.check.interval.seconds", 300)
	return time.Duration(max(s, 1)) * time.Second
}

// isActiveBroker: registered, unfenced, not shutting down.
func isActiveBroker(im *metadata.Image, id int32) bool {
	b, ok := im.Brokers[id]
	return ok && b.Active()
}

func activeBrokers(im *metadata.Image) []int32 {
	var out []int32
	for _, id := range im.BrokerIDs() {
		if im.Brokers[id].Active() {
			out = append(out, id)
		}
	}
	return out
}

func has(s []int32, x int32) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func without(s []int32, x int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, v := range a {
		if !has(b, v) {
			return false
		}
	}
	return true
}

// unclean reports the topic's effective unclean.leader.election.enable.
func (a *active) unclean(t *metadata.Topic) bool {
	return config.TopicConfig{Set: t.Configs, Broker: a.n.cfg.Broker}.Bool("unclean.leader.election.enable")
}

// electLeader is PartitionChangeBuilder.electLeader (docs/kafka-replication.md §4.1) for a
// target ISR: keep a valid leader; else the first replica in assignment
// order that is in the ISR and active; else, if the ISR is empty, the
// first active replica of the ELR (elr.go), whose ISR becomes itself;
// else, if the topic allows unclean election, the last known leader if
// it is active, then the first active replica (ISR := {it}, recovering);
// else no leader.
func (a *active) electLeader(im *metadata.Image, t *metadata.Topic, p *metadata.Partition, isr []int32) (int32, []int32, bool) {
	valid := func(id int32) bool { return has(isr, id) && isActiveBroker(im, id) }
	if p.Leader != noLeader && valid(p.Leader) {
		return p.Leader, isr, p.Recovering
	}
	for _, r := range p.Replicas {
		if valid(r) {
			return r, isr, p.Recovering
		}
	}
	if len(isr) == 0 {
		elr := targetELR(im, a.n.cfg.Broker, t, p, isr)
		for _, r := range p.Replicas {
			if has(elr, r) && isActiveBroker(im, r) {
				return r, []int32{r}, p.Recovering
			}
		}
	}
	if a.unclean(t) {
		if lk := p.LastKnownELR; elrEnabled(im) && len(lk) == 1 && p.HasReplica(lk[0]) && isActiveBroker(im, lk[0]) {
			return lk[0], []int32{lk[0]}, true
		}
		for _, r := range p.Replicas {
			if isActiveBroker(im, r) {
				return r, []int32{r}, true
			}
		}
	}
	return noLeader, isr, p.Recovering
}

// change adds a PartitionChange if the state differs. Like every
// PartitionChangeBuilder.build, it completes a reassignment in progress
// once the new ISR holds every target replica (reassign.go).
func (b *batch) change(t *metadata.Topic, p *metadata.Partition, leader int32, isr []int32, recovering bool) {
	var asg *assignment
	if p.Reassigning() {
		leader, isr, asg = completeReassignment(b.tx.im, p, leader, isr)
	}
	b.changeAssign(t, p, leader, isr, recovering, asg)
}

// changeAssign adds a PartitionChange if the state differs, with a new
// replica set if asg is not nil.
func (b *batch) changeAssign(t *metadata.Topic, p *metadata.Partition, leader int32, isr []int32, recovering bool, asg *assignment) {
	if asg != nil && slices.Equal(asg.Replicas, p.Replicas) && slices.Equal(asg.Adding, p.AddingReplicas) && slices.Equal(asg.Removing, p.RemovingReplicas) {
		asg = nil
	}
	// An election that starts a recovery is unclean: it clears the ELR.
	elr, lastKnown := elrState(b.tx.im, b.cfg, t, p, leader, isr, recovering && !p.Recovering)
	if asg == nil && leader == p.Leader && recovering == p.Recovering && sameSet(isr, p.ISR) &&
		sameSet(elr, p.ELR) && slices.Equal(lastKnown, p.LastKnownELR) {
		return
	}
	b.add(record{Type: recPartitionChange, Name: t.Name, Part: &partChange{Index: p.Index, Leader: leader, ISR: isr, Recovering: recovering, Assign: asg,
		ELR: elr, LastKnownELR: lastKnown}})
}

// forEachPartition visits partitions in a deterministic order on the
// batch's scratch image.
func (b *batch) forEachPartition(fn func(t *metadata.Topic, p *metadata.Partition)) {
	for _, name := range b.tx.im.TopicNames() {
		t := b.tx.im.Topics[name]
		for i := range t.Partitions {
			fn(t, &t.Partitions[i])
		}
	}
}

// removeBroker takes a fenced or shutting-down broker out of every ISR
// and re-elects the leaders of its partitions without it. With ELR on
// (elr.go) the last member leaves too, into the ELR; without it the ISR
// keeps its last member (docs/kafka-replication.md §4.1).
func (a *active) removeBroker(b *batch, id int32) {
	im := b.tx.im
	b.forEachPartition(func(t *metadata.Topic, p *metadata.Partition) {
		if !p.HasReplica(id) || (!has(p.ISR, id) && p.Leader != id) {
			return
		}
		isr := without(p.ISR, id)
		if len(isr) == 0 && !elrEnabled(im) {
			isr = p.ISR
		}
		leader, isr, rec := a.electLeader(im, t, p, isr)
		b.change(t, p, leader, isr, rec)
	})
}

// electOffline retries leaderless partitions (of one topic, or all).
func (a *active) electOffline(b *batch, topic string) {
	im := b.tx.im
	b.forEachPartition(func(t *metadata.Topic, p *metadata.Partition) {
		if p.Leader != noLeader || (topic != "" && t.Name != topic) {
			return
		}
		if leader, isr, rec := a.electLeader(im, t, p, p.ISR); leader != noLeader {
			b.change(t, p, leader, isr, rec)
		}
	})
}

// rebalance moves leadership to the preferred replica (replicas[0]) where
// it is in the ISR and active.
func (a *active) rebalance(b *batch) {
	im := b.tx.im
	b.forEachPartition(func(t *metadata.Topic, p *metadata.Partition) {
		if len(p.Replicas) == 0 || p.Leader == p.Replicas[0] {
			return
		}
		pref := p.Replicas[0]
		if has(p.ISR, pref) && isActiveBroker(im, pref) {
			b.change(t, p, pref, p.ISR, p.Recovering)
		}
	})
}

// fenceStale fences, one per decision, every unfenced broker whose last
// heartbeat is older than the session timeout.
func (a *active) fenceStale() {
	sess := a.sessionTimeout()
	im := a.n.st.Image()
	var stale []int32
	now := a.now()
	a.mu.Lock()
	for _, id := range im.BrokerIDs() {
		if im.Brokers[id].Fenced {
			continue
		}
		last, seen := a.contact[id]
		if !seen {
			a.contact[id] = now
		} else if now.Sub(last) > sess {
			stale = append(stale, id)
		}
	}
	a.mu.Unlock()
	for _, id := range stale {
		a.decideSplit(a.n.baseCtx, func(im *metadata.Image, b *batch) error {
			br, ok := im.Brokers[id]
			a.mu.Lock()
			last := a.contact[id]
			a.mu.Unlock()
			if !ok || br.Fenced || a.now().Sub(last) <= sess {
				return nil
			}
			a.n.log.Info("fencing broker: session expired", "broker", id, "epoch", br.Epoch)
			b.addLast(record{Type: recFence, ID: id, Epoch: br.Epoch})
			a.removeBroker(b, id)
			return nil
		})
	}
}

// touch records a heartbeat (or registration) of broker id: its session
// restarts and it is no longer a suspect.
func (a *active) touch(id int32) {
	a.mu.Lock()
	a.contact[id] = a.now()
	delete(a.suspect, id)
	a.mu.Unlock()
}

// placement assigns rf replicas to each of count partitions over the
// active brokers, round-robin from a rotating start; leader = first
// replica. counts are the replicas each broker holds; a broker holding
// limit (max.broker.partitions) is skipped, as KIP-578 asks placement to
// respect the limit where it can, and a partition that cannot get rf
// brokers below the limit refuses the whole request. counts is updated.
func (a *active) placement(im *metadata.Image, first, count int32, rf int, counts map[int32]int, limit int) ([]metadata.Partition, error) {
	brokers := activeBrokers(im)
	if rf <= 0 || rf > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d with %d active brokers", kerr.InvalidReplicationFactor, rf, len(brokers))
	}
	a.mu.Lock()
	start := a.place
	a.place += int(count)
	a.mu.Unlock()
	before := maps.Clone(counts)
	out := make([]metadata.Partition, 0, count)
	for i := int32(0); i < count; i++ {
		reps := make([]int32, 0, rf)
		for j := 0; j < len(brokers) && len(reps) < rf; j++ {
			b := brokers[(start+int(i)+j)%len(brokers)]
			if counts[b] < limit {
				reps = append(reps, b)
			}
		}
		if len(reps) < rf {
			var held []string
			for _, b := range brokers {
				held = append(held, fmt.Sprintf("%d: %d", b, before[b]))
			}
			return nil, fmt.Errorf("%w: %d partitions of replication factor %d do not fit under max.broker.partitions=%d (replicas held by the active brokers: %s)",
				kerr.PolicyViolation, count, rf, limit, strings.Join(held, ", "))
		}
		for _, b := range reps {
			counts[b]++
		}
		out = append(out, metadata.Partition{Index: first + i, Leader: reps[0], Replicas: reps, ISR: append([]int32(nil), reps...)})
	}
	return out, nil
}

// manualPlacement validates an explicit assignment (CreateTopics).
func manualPlacement(im *metadata.Image, assignment [][]int32) ([]metadata.Partition, error) {
	var out []metadata.Partition
	for i, reps := range assignment {
		if len(reps) == 0 || len(reps) != len(assignment[0]) {
			return nil, fmt.Errorf("%w: partition %d has %d replicas", kerr.InvalidReplicaAssignment, i, len(reps))
		}
		var isr []int32
		for j, r := range reps {
			if _, ok := im.Brokers[r]; !ok {
				return nil, fmt.Errorf("%w: broker %d is not registered", kerr.InvalidReplicaAssignment, r)
			}
			if has(reps[:j], r) {
				return nil, fmt.Errorf("%w: duplicate replica %d", kerr.InvalidReplicaAssignment, r)
			}
			if isActiveBroker(im, r) {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: every replica of partition %d is fenced", kerr.InvalidReplicaAssignment, i)
		}
		out = append(out, metadata.Partition{Index: int32(i), Leader: isr[0], Replicas: append([]int32(nil), reps...), ISR: isr})
	}
	return out, nil
}
