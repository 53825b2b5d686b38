package diskfault

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestDiskFaults drives one RF 3, min.insync.replicas=2 partition through
// three disk faults under a steady idempotent acks=all load:
//
//	(a) slow leader disk (every write and fsync sleeps 100 ms) for 3 s:
//	    producing goes on without errors, the leader stays;
//	(b) failing follower disk: the follower halts with exit status 1, the
//	    ISR shrinks, acks=all goes on with two replicas; restarted on its
//	    data directory it rejoins the ISR;
//	(c) failing leader disk: the leader halts, another replica is elected,
//	    producing resumes.
//
// Then every acknowledged record is read back at its acknowledged offset,
// exactly once. Durations are measured and logged, never asserted (the
// bounds below only keep a broken build from hanging).
func TestDiskFaults(t *testing.T) {
	start := time.Now()
	c := startCluster(t)
	for _, p := range c.Nodes() {
		if st := disk(t, p, ""); st.Mode != "ok" {
			t.Fatalf("node %d starts with disk mode %+v", p.NodeID(), st)
		}
	}
	const topic = "diskfault"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	t.Logf("cluster up and topic ready after %v", time.Since(start).Round(time.Millisecond))

	lg := c.StartLoad(topic, testcluster.LoadOptions{Rate: 500, Tick: 10 * time.Millisecond, MaxInFlight: 1000})
	defer lg.Abort()
	waitFor(t, 30*time.Second, "300 acks before any fault", func() (bool, string) {
		n, _ := lg.AcksSince(time.Time{}, -1)
		return n >= 300, lg.Summary()
	})

	// (a) Slow leader disk.
	m, _, _ := c.meta(topic)
	leader := c.Node(m.Leader)
	t.Logf("(a) partition 0: %v; node %d's disk slow (100ms per write and fsync) for 3s", m, m.Leader)
	slowAt := time.Now()
	if st := disk(t, leader, "mode=slow&delay=100ms"); st.Mode != "slow" || st.DelayMs != 100 {
		t.Fatalf("slow: %+v", st)
	}
	time.Sleep(3 * time.Second)
	waitFor(t, 30*time.Second, "an acknowledgement while the leader's disk is slow", func() (bool, string) {
		n, _ := lg.AcksSince(slowAt, -1)
		return n > 0, lg.Summary()
	})
	slowAcks, _ := lg.AcksSince(slowAt, -1)
	slowFor := time.Since(slowAt)
	st := disk(t, leader, "")
	if st.Fired == 0 {
		t.Errorf("slow mode never fired on the leader: %+v", st)
	}
	disk(t, leader, "mode=ok")
	if !leader.Running() {
		t.Fatalf("node %d stopped with a slow disk", m.Leader)
	}
	if n, _, err := lg.Failures(); n > 0 {
		t.Fatalf("(a) %d records failed with a slow leader disk, e.g. %v", n, err)
	}
	after, _, _ := c.meta(topic)
	t.Logf("(a) %d acks in %v of slow disk (%d slowed writes/fsyncs); no errors; after: %v",
		slowAcks, slowFor.Round(time.Millisecond), st.Fired, after)
	if after.Leader != m.Leader {
		t.Logf("(a) note: leadership moved from %d to %d during the slow disk", m.Leader, after.Leader)
	}

	// (b) Failing follower disk.
	m, _, _ = c.meta(topic)
	var fid int32 = -1
	for _, r := range m.Replicas {
		if r != m.Leader {
			fid = r
			break
		}
	}
	follower := c.Node(fid)
	t.Logf("(b) partition 0: %v; node %d's (a follower) disk fails", m, fid)
	failAt := time.Now()
	disk(t, follower, "mode=fail")
	halt := waitHalted(t, follower, 20*time.Second)
	shrink := waitFor(t, 30*time.Second, fmt.Sprintf("node %d out of the ISR", fid), func() (bool, string) {
		m, ok, st := c.meta(topic)
		return ok && !slices.Contains(m.ISR, fid) && len(m.ISR) >= 2, st
	})
	shrunk, _, _ := c.meta(topic)
	waitFor(t, 30*time.Second, "200 acks with the follower down", func() (bool, string) {
		n, _ := lg.AcksSince(failAt.Add(halt+shrink), -1)
		return n >= 200, lg.Summary()
	})
	t.Logf("(b) node %d halted (exit status 1) %v after mode=fail; ISR %v -> %v %v after the halt; acks=all continues",
		fid, halt.Round(time.Millisecond), m.ISR, shrunk.ISR, shrink.Round(time.Millisecond))
	follower.Restart()
	rejoin := waitFor(t, 30*time.Second, fmt.Sprintf("node %d back in the ISR", fid), func() (bool, string) {
		m, ok, st := c.meta(topic)
		return ok && slices.Contains(m.ISR, fid), st
	})
	if st := disk(t, follower, ""); st.Mode != "ok" {
		t.Errorf("restarted node %d's disk mode: %+v", fid, st)
	}
	rejoined, _, _ := c.meta(topic)
	t.Logf("(b) node %d restarted on its data directory; back in the ISR %v %v after it was serving again",
		fid, rejoined.ISR, rejoin.Round(time.Millisecond))

	// (c) Failing leader disk.
	m, _, _ = c.meta(topic)
	leader = c.Node(m.Leader)
	t.Logf("(c) partition 0: %v; node %d's (the leader) disk fails", m, m.Leader)
	failAt = time.Now()
	disk(t, leader, "mode=fail")
	halt = waitHalted(t, leader, 20*time.Second)
	var elected testcluster.PartitionMeta
	elect := waitFor(t, 30*time.Second, "a new leader", func() (bool, string) {
		nm, ok, st := c.meta(topic)
		elected = nm
		return ok && nm.Leader > 0 && nm.Leader != m.Leader && nm.LeaderEpoch > m.LeaderEpoch, st
	})
	haltedAt := failAt.Add(halt)
	var firstAck time.Time
	waitFor(t, 30*time.Second, "acks from the new leader", func() (bool, string) {
		n, first := lg.AcksSince(haltedAt, -1)
		firstAck = first
		return n >= 200, lg.Summary()
	})
	t.Logf("(c) node %d halted (exit status 1) %v after mode=fail; new leader visible %v after the halt: %v; first ack %v after the halt",
		m.Leader, halt.Round(time.Millisecond), elect.Round(time.Millisecond), elected, firstAck.Sub(haltedAt).Round(time.Millisecond))

	lg.Stop(30 * time.Second)
	if n, _, err := lg.Failures(); n > 0 {
		t.Fatalf("%d records failed with an idempotent, infinitely retrying acks=all producer, e.g. %v", n, err)
	}
	acked := lg.Acked()
	read := c.ConsumeAll(topic, 1, 30*time.Second)
	testcluster.CheckAcked(t, "after the disk faults", acked, read)
	for v := range read {
		if _, ok := acked[v]; !ok {
			t.Errorf("value %s in the log was never acknowledged", v)
		}
	}
	t.Logf("verified %d acknowledged records, each once at its acknowledged offset (%s); whole test %v",
		len(acked), lg.Summary(), time.Since(start).Round(time.Millisecond))
}
