package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Event is one entry of the fault timeline.
type Event struct {
	StartMs float64 `json:"startMs"`
	EndMs   float64 `json:"endMs"`
	Kind    string  `json:"kind"`
	Nodes   []int   `json:"nodes,omitempty"`
	Detail  string  `json:"detail,omitempty"`
	Err     string  `json:"err,omitempty"`
}

type nemesis struct {
	c     *cluster
	adm   *kadm.Client
	topic string
	h     *history
	logf  func(string, ...any)

	overlap bool // lanes run at once: a fault heals only what it broke

	mu       sync.Mutex
	timeline []Event
}

func (nm *nemesis) add(e Event) {
	nm.mu.Lock()
	nm.timeline = append(nm.timeline, e)
	nm.mu.Unlock()
	nm.logf("fault %-8s nodes=%v %.1fs-%.1fs %s %s", e.Kind, e.Nodes, e.StartMs/1000, e.EndMs/1000, e.Detail, e.Err)
}

func (nm *nemesis) events() []Event {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	return slices.Clone(nm.timeline)
}

// run executes the schedule until the faults are done or ctx ends (a fault
// already started is always healed). Each lane runs in order, lanes at once.
func (nm *nemesis) run(ctx context.Context, sched []Fault) {
	lanes := map[int][]Fault{}
	for _, f := range sched {
		lanes[f.Lane] = append(lanes[f.Lane], f)
	}
	nm.overlap = len(lanes) > 1
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nm.runLane(ctx, lane)
		}()
	}
	wg.Wait()
}

func (nm *nemesis) runLane(ctx context.Context, sched []Fault) {
	for _, f := range sched {
		if d := time.Until(nm.h.t0.Add(durMs(f.AtMs))); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			return
		}
		nm.apply(ctx, f)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// resolve picks the fault's node: the partition's current leader for
// "leader" faults, else (or if unknown) f.Node.
func (nm *nemesis) resolve(ctx context.Context, f Fault) (int, string) {
	if f.Target != "leader" {
		return f.Node, fmt.Sprintf("node %d", f.Node)
	}
	ps, err := nm.c.partitions(ctx, nm.adm, nm.topic)
	if err == nil {
		if s, ok := ps[int32(f.Partition)]; ok && s.Leader > 0 && int(s.Leader) <= len(nm.c.nodes) {
			return int(s.Leader), fmt.Sprintf("leader of p%d", f.Partition)
		}
	}
	return f.Node, fmt.Sprintf("node %d (leader of p%d unknown)", f.Node, f.Partition)
}

func errStr(errs ...error) string {
	var s []string
	for _, e := range errs {
		if e != nil {
			s = append(s, e.Error())
		}
	}
	return strings.Join(s, "; ")
}

func (nm *nemesis) apply(ctx context.Context, f Fault) {
	// A fault must not start on a node that is still down from a
	// previous one that failed to heal. Without overlap nothing else is
	// broken at this point; with it, only the fault's own lane is healed
	// (the other lane's node may be down or cut off on purpose).
	var errs []error
	switch {
	case !nm.overlap:
		errs = nm.c.healAll()
	case !netFault(f.Kind):
		errs = nm.c.healProcesses()
	}
	if len(errs) > 0 {
		nm.logf("heal before fault: %v", errs)
	}
	d := durMs(f.DurMs)
	switch f.Kind {
	case FaultKill:
		id, why := nm.resolve(ctx, f)
		n := nm.c.node(id)
		e := Event{StartMs: nm.h.since(), Kind: FaultKill, Nodes: []int{id}, Detail: why + ", SIGKILL then restart"}
		n.note("fault: SIGKILL")
		err1 := n.kill()
		sleepCtx(context.Background(), d)
		n.note("fault: restart after SIGKILL")
		err2 := n.start()
		var err3 error
		if err2 == nil {
			err3 = n.waitReady(30 * time.Second)
		}
		e.EndMs, e.Err = nm.h.since(), errStr(err1, err2, err3)
		nm.add(e)
	case FaultPause:
		id, why := nm.resolve(ctx, f)
		n := nm.c.node(id)
		e := Event{StartMs: nm.h.since(), Kind: FaultPause, Nodes: []int{id}, Detail: why + ", SIGSTOP then SIGCONT"}
		err1 := n.pause()
		sleepCtx(context.Background(), d)
		err2 := n.resume()
		n.note("fault: resumed after SIGSTOP")
		e.EndMs, e.Err = nm.h.since(), errStr(err1, err2)
		nm.add(e)
	case FaultIsolate:
		id, why := nm.resolve(ctx, f)
		nm.cutFor(d, Event{Kind: FaultIsolate, Nodes: []int{id}, Detail: why + ", all controller (and client Kafka) links cut both ways"},
			nm.c.nw.isolation(id))
	case FaultOneWay:
		id, why := nm.resolve(ctx, f)
		var pairs [][2]int
		dir := "outbound: everything it sends (requests and responses, to nodes and clients) is lost"
		if f.Partition%2 == 1 {
			dir = "inbound: everything sent to it is lost"
		}
		for _, other := range append(nm.c.ids(), srcClient, srcUnknown) {
			if other == id {
				continue
			}
			if f.Partition%2 == 0 {
				pairs = append(pairs, [2]int{id, other})
			} else {
				pairs = append(pairs, [2]int{other, id})
			}
		}
		nm.cutFor(d, Event{Kind: FaultOneWay, Nodes: []int{id}, Detail: why + ", one-way " + dir}, pairs)
	case FaultSplit:
		id, why := nm.resolve(ctx, f)
		minority := splitMinority(id, len(nm.c.nodes))
		var pairs [][2]int
		for _, a := range minority {
			for _, b := range nm.c.ids() {
				if !slices.Contains(minority, b) {
					pairs = append(pairs, [2]int{a, b}, [2]int{b, a})
				}
			}
		}
		nm.cutFor(d, Event{Kind: FaultSplit, Nodes: minority,
			Detail: fmt.Sprintf("%s: minority %v cut from the majority both ways; clients reach every node", why, minority)}, pairs)
	case FaultDelayTxn:
		nm.delayTxn(ctx, f)
	case FaultObjStore:
		nm.objStore(f)
	case FaultSlowDisk:
		id, why := nm.resolve(ctx, f)
		n := nm.c.node(id)
		delay := slowDiskDelay(f)
		e := Event{StartMs: nm.h.since(), Kind: FaultSlowDisk, Nodes: []int{id}, Detail: fmt.Sprintf("%s, every write and fsync sleeps %v", why, delay)}
		n.note("fault: slow disk %v", delay)
		err1 := n.disk(fmt.Sprintf("mode=slow&delay=%dms", delay.Milliseconds()))
		sleepCtx(context.Background(), d)
		err2 := n.disk("mode=ok")
		n.note("fault: disk back to normal")
		e.EndMs, e.Err = nm.h.since(), errStr(err1, err2)
		nm.add(e)
	case FaultDiskFail:
		id, why := nm.resolve(ctx, f)
		n := nm.c.node(id)
		e := Event{StartMs: nm.h.since(), Kind: FaultDiskFail, Nodes: []int{id}, Detail: why + ", writes and fsyncs fail with EIO"}
		n.note("fault: failing disk")
		n.expectExit("disk")
		err1 := n.disk("mode=fail")
		t0 := time.Now()
		halted := false
		select {
		case <-n.doneCh():
			halted = true
			e.Detail += fmt.Sprintf("; broker halted after %v (%v)", time.Since(t0).Round(time.Millisecond), n.exitErr())
		case <-time.After(10 * time.Second):
			e.Detail += "; broker still running after 10s (no write reached the disk?)"
		}
		sleepCtx(context.Background(), d)
		var err2, err3 error
		if halted {
			n.note("fault: restart after disk failure")
			if err2 = n.start(); err2 == nil {
				err3 = n.waitReady(30 * time.Second)
			}
		} else {
			err2 = n.disk("mode=ok")
			n.clearExpectedExit("disk")
		}
		e.EndMs, e.Err = nm.h.since(), errStr(err1, err2, err3)
		nm.add(e)
	case FaultTerm:
		for _, n := range nm.c.nodes {
			e := Event{StartMs: nm.h.since(), Kind: FaultTerm, Nodes: []int{n.id}, Detail: "SIGTERM (controlled shutdown), restart, wait for full ISRs"}
			n.note("fault: SIGTERM")
			t0 := time.Now()
			err1 := n.term(40 * time.Second)
			stopTook := time.Since(t0)
			err2 := n.start()
			var err3, err4 error
			if err2 == nil {
				err3 = n.waitReady(30 * time.Second)
			}
			if err3 == nil && err2 == nil {
				// Let the restarted node's ISR changes reach the
				// metadata before checking that every ISR is full.
				time.Sleep(time.Second)
				err4 = nm.c.waitHealthy(context.Background(), nm.adm, nm.topic, 30*time.Second)
			}
			e.Detail += fmt.Sprintf(" (shutdown took %v)", stopTook.Round(time.Millisecond))
			e.EndMs, e.Err = nm.h.since(), errStr(err1, err2, err3, err4)
			nm.add(e)
		}
	case FaultJepsen2013:
		nm.jepsen2013(ctx, f)
	}
}

// cutFor installs the one-way drops pairs for d, then removes every
// network rule, and records e (its nodes' logs get the fault's start and
// end).
func (nm *nemesis) cutFor(d time.Duration, e Event, pairs [][2]int) {
	e.StartMs = nm.h.since()
	for _, id := range e.Nodes {
		nm.c.node(id).note("fault: %s: %s", e.Kind, e.Detail)
	}
	nm.c.nw.dropMany(pairs)
	sleepCtx(context.Background(), d)
	nm.c.nw.healAll()
	for _, id := range e.Nodes {
		nm.c.node(id).note("fault: %s healed", e.Kind)
	}
	e.EndMs = nm.h.since()
	nm.add(e)
}

// jepsen2013 is the 2013 Kafka sequence on partition f.Partition (see
// FaultJepsen2013). With min.insync.replicas=1 and unclean election on it
// loses acknowledged writes on a correct Kafka implementation; with
// min.insync.replicas=2 the leader must refuse them instead.
func (nm *nemesis) jepsen2013(ctx context.Context, f Fault) {
	bg := context.Background()
	ps, err := nm.c.partitions(bg, nm.adm, nm.topic)
	s, ok := ps[int32(f.Partition)]
	if err != nil || !ok || s.Leader <= 0 {
		nm.add(Event{StartMs: nm.h.since(), EndMs: nm.h.since(), Kind: FaultJepsen2013, Err: fmt.Sprintf("p%d: no leader known (%v)", f.Partition, err)})
		return
	}
	leader := int(s.Leader)
	var followers []int
	for _, r := range s.Replicas {
		if int(r) != leader {
			followers = append(followers, int(r))
		}
	}
	var notes []string
	pauseEv := Event{StartMs: nm.h.since(), Kind: FaultPause, Nodes: followers, Detail: fmt.Sprintf("jepsen2013 p%d: pause both followers of leader %d", f.Partition, leader)}
	var errs []error
	for _, id := range followers {
		nm.c.node(id).note("jepsen2013: SIGSTOP (follower of p%d)", f.Partition)
		errs = append(errs, nm.c.node(id).pause())
	}
	// Wait for the leader to shrink the ISR to itself (lag time 2 s),
	// then let acknowledged writes accumulate on the leader alone.
	shrunk := time.Now()
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := nm.c.partitions(bg, nm.adm, nm.topic)
		if err == nil && len(ps[int32(f.Partition)].ISR) == 1 {
			notes = append(notes, fmt.Sprintf("ISR shrank to %v after %v", ps[int32(f.Partition)].ISR, time.Since(shrunk).Round(100*time.Millisecond)))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if time.Now().After(deadline) {
		notes = append(notes, "ISR did not shrink to the leader within 12s")
	}
	sleepCtx(bg, 4*time.Second)
	killEv := Event{StartMs: nm.h.since(), Kind: FaultKill, Nodes: []int{leader}, Detail: fmt.Sprintf("jepsen2013 p%d: SIGKILL the leader", f.Partition)}
	nm.c.node(leader).note("jepsen2013: SIGKILL (leader of p%d)", f.Partition)
	errs = append(errs, nm.c.node(leader).kill())
	sleepCtx(bg, time.Second)
	for _, id := range followers {
		errs = append(errs, nm.c.node(id).resume())
		nm.c.node(id).note("jepsen2013: resumed")
	}
	pauseEv.EndMs = nm.h.since()
	pauseEv.Err = errStr(errs...)
	nm.add(pauseEv)
	// Wait for a new (unclean) leader.
	deadline = time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := nm.c.partitions(bg, nm.adm, nm.topic)
		if s, ok := ps[int32(f.Partition)]; err == nil && ok && s.Leader > 0 && int(s.Leader) != leader {
			notes = append(notes, fmt.Sprintf("new leader %d isr=%v", s.Leader, s.ISR))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	sleepCtx(bg, 3*time.Second)
	n := nm.c.node(leader)
	n.note("jepsen2013: restart old leader")
	err1 := n.start()
	var err2 error
	if err1 == nil {
		err2 = n.waitReady(30 * time.Second)
	}
	killEv.EndMs, killEv.Err = nm.h.since(), errStr(err1, err2)
	killEv.Detail += "; " + strings.Join(notes, "; ")
	nm.add(killEv)
}

// objStore makes the object store slow, failing or black-holed for the
// fault's duration (FaultObjStore), through the proxy the brokers reach it
// by. A run without tiered storage has no proxy: the fault is recorded as
// not applied.
func (nm *nemesis) objStore(f Fault) {
	mode, delay := objStoreMode(f)
	e := Event{StartMs: nm.h.since(), Kind: FaultObjStore, Detail: "object store " + s3ModeNames[mode]}
	if mode == s3Slow {
		e.Detail += fmt.Sprintf(", every request waits %v", delay)
	}
	p := nm.c.s3p
	if p == nil {
		e.EndMs, e.Err = nm.h.since(), "no object store (the run is not tiered)"
		nm.add(e)
		return
	}
	before := p.requests.Load()
	p.set(mode, delay)
	sleepCtx(context.Background(), durMs(f.DurMs))
	p.healAll()
	e.Detail += fmt.Sprintf(" (%d requests meanwhile)", p.requests.Load()-before)
	e.EndMs = nm.h.since()
	nm.add(e)
}
