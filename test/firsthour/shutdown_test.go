package firsthour

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

// clusterProps are short liveness timers so failovers happen in seconds.
var clusterProps = map[string]string{
	"default.replication.factor":       "3",
	"offsets.topic.replication.factor": "3",
	"offsets.topic.num.partitions":     "3",
	"replica.lag.time.max.ms":          "2000",
	"broker.session.timeout.ms":        "3000",
	"broker.heartbeat.interval.ms":     "500",
	"auto.leader.rebalance.enable":     "false",
}

// signalAndWait sends sig to p and returns how long p took to exit; it
// fails the test if p is still running after limit.
func signalAndWait(t *testing.T, p *testproc.Proc, sig syscall.Signal, limit time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	if err := syscall.Kill(p.Pid(), sig); err != nil {
		t.Fatal(err)
	}
	return waitExit(t, p, t0, limit)
}

func waitExit(t *testing.T, p *testproc.Proc, t0 time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for p.Running() {
		if time.Since(t0) > limit {
			t.Fatalf("node %d still running %v after the signal\n%s", p.NodeID(), limit, p.LogTail(40))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(t0)
}

// TestShutdownWithoutQuorum: in a 3-node cluster whose two other nodes are
// SIGKILLed, SIGTERM of the last one gives up the controlled shutdown
// (no quorum can grant it), says so and exits well within 10 s; with the
// two others frozen, a second signal during the shutdown exits at once;
// SIGINT (Ctrl-C) is a controlled shutdown like SIGTERM; and every record
// acknowledged under acks=all before is read back after the restarts.
func TestShutdownWithoutQuorum(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: clusterProps})
	const topic = "shutdown"
	c.CreateTopic(topic, 3, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	c.WaitTopicReady(topic, 3, 30*time.Second)
	lg := c.StartLoad(topic, testcluster.LoadOptions{Partitions: []int32{0, 1, 2}, Rate: 500})
	testcluster.WaitFor(t, 30*time.Second, "500 acks", func() (bool, string) {
		n, _ := lg.AcksSince(time.Time{}, -1)
		return n >= 500, lg.Summary()
	})
	lg.Stop(30 * time.Second)
	acked := lg.Acked()
	t.Logf("acknowledged before the kills: %d", len(acked))

	// 1. No quorum: SIGTERM gives up the controlled shutdown quickly.
	c.Node(2).Kill()
	c.Node(3).Kill()
	took := signalAndWait(t, c.Node(1), syscall.SIGTERM, 10*time.Second)
	t.Logf("SIGTERM with no quorum: exited after %v", took.Round(time.Millisecond))
	log := c.Node(1).LogTail(200)
	if !strings.Contains(log, "controlled shutdown skipped: no controller quorum reachable") {
		t.Errorf("the node did not say why it skipped the controlled shutdown:\n%s", log)
	}
	if err := c.Node(1).ExitErr(); err != nil {
		t.Errorf("exit status: %v", err)
	}

	for _, p := range c.Nodes() {
		p.Restart()
	}
	c.WaitBrokers(3, 60*time.Second)
	c.WaitTopicReady(topic, 3, 60*time.Second)
	testcluster.CheckAcked(t, "after SIGKILL x2, SIGTERM and restart", acked, c.ConsumeAll(topic, 3, time.Minute))

	// 2. A second signal during the shutdown exits at once. Nodes 2 and 3
	// are frozen, so no controller answers and the controlled shutdown
	// would wait for controller.QuorumWait (3 s) before giving up.
	c.Pause(2)
	c.Pause(3)
	p := c.Node(1)
	t0 := time.Now()
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	t1 := time.Now()
	if err := syscall.Kill(p.Pid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	after2nd := waitExit(t, p, t1, 5*time.Second)
	t.Logf("second signal: exited %v after it (%v after the first)", after2nd.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	if after2nd > 1500*time.Millisecond {
		t.Errorf("exited %v after the second signal, want at once", after2nd)
	}
	log = p.LogTail(200)
	if !strings.Contains(log, "second signal: stopping now, without controlled shutdown") || strings.Contains(log, "controlled shutdown granted") {
		t.Errorf("second signal not reported, or a controlled shutdown ran:\n%s", log)
	}
	if !strings.Contains(log, `step="broker (fetchers, partitions, checkpoints)"`) || !strings.Contains(log, `step="controller (at once)"`) {
		t.Errorf("the broker was not closed (flushed), or the controller not closed at once, after the second signal:\n%s", log)
	}
	c.Resume(2)
	c.Resume(3)
	p.Restart()
	c.WaitBrokers(3, 60*time.Second)
	c.WaitTopicReady(topic, 3, 60*time.Second)

	// 3. SIGINT (Ctrl-C) is a controlled shutdown, like SIGTERM.
	took = signalAndWait(t, c.Node(3), syscall.SIGINT, 20*time.Second)
	t.Logf("SIGINT with a quorum: exited after %v", took.Round(time.Millisecond))
	if log := c.Node(3).LogTail(200); !strings.Contains(log, "controlled shutdown granted") {
		t.Errorf("SIGINT did not run a controlled shutdown:\n%s", log)
	}
	c.Node(3).Restart()
	c.WaitBrokers(3, 60*time.Second)
	c.WaitTopicReady(topic, 3, 60*time.Second)
	testcluster.CheckAcked(t, "at the end", acked, c.ConsumeAll(topic, 3, time.Minute))
}
