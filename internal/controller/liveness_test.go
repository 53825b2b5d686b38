package controller

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
)

// livenessProps are Kafka's default liveness settings with a shorter
// session where a test waits for it to expire.
func livenessProps(sessionMs int) map[string]string {
	return map[string]string{
		"broker.session.timeout.ms":    strconv.Itoa(sessionMs),
		"broker.heartbeat.interval.ms": "500",
	}
}

// crash stops node id the way a SIGKILL does as far as the others can
// tell: its Kafka listener closes, then its connections end, without a
// controlled shutdown or a leadership hand-off.
func (c *cluster) crash(id int32) {
	c.t.Helper()
	if ln := c.lns[id]; ln != nil {
		ln.Close()
		delete(c.lns, id)
	}
	if n := c.nodes[id]; n != nil {
		n.CloseNow()
		delete(c.nodes, id)
	}
}

// fencedWithin waits up to d for broker id to be fenced in n's image and
// returns how long that took; ok is false if it was not.
func fencedWithin(n *Node, id int32, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < d {
		if b, ok := n.Image().Brokers[id]; ok && b.Fenced {
			return time.Since(start), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return d, false
}

// fakeBroker is a broker registered through the controller RPC by the
// test itself, so that the test decides when it heartbeats and when its
// connection ends. Its listener accepts and closes connections (a live
// process's kernel completes the handshake even if the process is paused).
type fakeBroker struct {
	t     *testing.T
	id    int32
	cli   *client
	ln    net.Listener
	epoch int64
}

func newFakeBroker(t *testing.T, c *cluster, id int32) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	var voters []string
	for _, v := range c.voters {
		voters = append(voters, v.Addr)
	}
	f := &fakeBroker{t: t, id: id, ln: ln, cli: &client{voters: voters, idle: map[string][]net.Conn{}}}
	t.Cleanup(func() { f.cli.close(); ln.Close() })
	var resp registerResp
	br := metadata.Broker{ID: id, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port), Incarnation: fmt.Sprintf("fake-%d", id)}
	if _, err := f.cli.call(ctxT(t), opRegister, registerReq{Broker: br}, &resp, 0); err != nil {
		t.Fatalf("register fake broker %d: %v", id, err)
	}
	f.epoch = resp.Epoch
	waitFor(t, 10*time.Second, "the fake broker unfenced", func() bool {
		f.heartbeat()
		b, ok := c.active().Image().Brokers[id]
		return ok && !b.Fenced
	})
	return f
}

// heartbeat sends one heartbeat reporting the metadata as applied.
func (f *fakeBroker) heartbeat() {
	f.t.Helper()
	var resp heartbeatResp
	if _, err := f.cli.call(ctxT(f.t), opHeartbeat, heartbeatReq{ID: f.id, Epoch: f.epoch, Offset: 1 << 40}, &resp, 0); err != nil {
		f.t.Fatalf("fake broker %d heartbeat: %v", f.id, err)
	}
}

// dropConns closes the fake broker's controller connections; its next
// call dials a new one.
func (f *fakeBroker) dropConns() {
	f.cli.mu.Lock()
	defer f.cli.mu.Unlock()
	for _, l := range f.cli.idle {
		for _, conn := range l {
			conn.Close()
		}
	}
	f.cli.idle = map[string][]net.Conn{}
}

// TestCrashedBrokerFencedFast: a broker-only node whose process dies
// (listener closed, connections ended) is fenced well before its 9 s
// session expires, because the active controller sees its heartbeat
// connection end and its listener refuse a connection.
func TestCrashedBrokerFencedFast(t *testing.T) {
	c := newCluster(t, 3, 1, livenessProps(9000))
	act := c.active()
	c.crash(4)
	took, ok := fencedWithin(act, 4, 3*time.Second)
	if !ok {
		t.Fatalf("crashed broker 4 not fenced within 3 s (session 9 s)")
	}
	t.Logf("crashed broker fenced %v after its connections ended", took.Round(time.Millisecond))
}

// TestCrashedControllerFencedFast: when the process that dies is the
// active controller, the new controller does not give it a fresh 9 s
// session: every broker is a suspect when a term starts, and the dead
// one's listener refuses the probe.
func TestCrashedControllerFencedFast(t *testing.T) {
	c := newCluster(t, 3, 0, livenessProps(9000))
	old := c.active()
	oldID := c.id(old)
	c.crash(oldID)
	start := time.Now()
	act := c.active()
	if _, ok := fencedWithin(act, oldID, 4*time.Second); !ok {
		t.Fatalf("crashed controller %d not fenced by the new controller %d within 4 s of its election (session 9 s)", oldID, c.id(act))
	}
	t.Logf("new controller %d elected and the dead one fenced %v after the crash", c.id(act), time.Since(start).Round(time.Millisecond))
	// The survivors saw the leader's raft connections end and its port
	// refuse: at least one of them hurried the election (leaderloss.go).
	var hurried int64
	for _, n := range c.nodes {
		hurried += n.hurried.Load()
	}
	if hurried == 0 {
		t.Error("no surviving voter shortened its election timeouts after the active controller died")
	}
	// The live brokers stay unfenced.
	for id := range c.nodes {
		if b := act.Image().Brokers[id]; b.Fenced {
			t.Errorf("live broker %d fenced", id)
		}
	}
}

// TestDroppedConnectionLiveListenerKeepsSession: a broker whose heartbeat
// connection ends but whose listener still answers (a process that closed
// its connection after a timeout and then stalled, say) is not fenced
// before its session expires, and is fenced when it does.
func TestDroppedConnectionLiveListenerKeepsSession(t *testing.T) {
	const sessionMs = 3000
	c := newCluster(t, 3, 0, livenessProps(sessionMs))
	f := newFakeBroker(t, c, 9)
	f.heartbeat()
	last := time.Now()
	f.dropConns() // then silence, the listener still open
	act := c.active()
	if _, fenced := fencedWithin(act, 9, time.Duration(sessionMs)*time.Millisecond-time.Since(last)-300*time.Millisecond); fenced {
		t.Fatalf("broker fenced %v after its last heartbeat, before its %d ms session expired, though its listener answers", time.Since(last).Round(time.Millisecond), sessionMs)
	}
	// (A controller change in between starts a new session: allow one.)
	if _, fenced := fencedWithin(c.active(), 9, 2*time.Duration(sessionMs)*time.Millisecond+2*time.Second); !fenced {
		t.Fatalf("silent broker not fenced %v after its last heartbeat (session %d ms)", time.Since(last).Round(time.Millisecond), sessionMs)
	}
}

// TestPausedBrokerKeepsSession: a broker that stops heartbeating with its
// connection still open (SIGSTOP, a GC pause) keeps its session: no
// fencing before broker.session.timeout.ms.
func TestPausedBrokerKeepsSession(t *testing.T) {
	const sessionMs = 3000
	c := newCluster(t, 3, 0, livenessProps(sessionMs))
	f := newFakeBroker(t, c, 9)
	f.heartbeat()
	last := time.Now()
	act := c.active()
	if _, fenced := fencedWithin(act, 9, time.Duration(sessionMs)*time.Millisecond-time.Since(last)-300*time.Millisecond); fenced {
		t.Fatalf("paused broker fenced %v after its last heartbeat, before its %d ms session expired", time.Since(last).Round(time.Millisecond), sessionMs)
	}
	// (A controller change in between starts a new session: allow one.)
	if _, fenced := fencedWithin(c.active(), 9, 2*time.Duration(sessionMs)*time.Millisecond+2*time.Second); !fenced {
		t.Fatalf("paused broker not fenced %v after its last heartbeat (session %d ms)", time.Since(last).Round(time.Millisecond), sessionMs)
	}
}

// TestHeartbeatDuringProbeKeepsBroker: a broker that heartbeats on a new
// connection while the probe that its dropped connection started is
// still out is not fenced, even if that probe then reports a refusal
// (the broker restarted its listener, or the refusal was a race).
func TestHeartbeatDuringProbeKeepsBroker(t *testing.T) {
	c := newCluster(t, 3, 0, livenessProps(9000))
	f := newFakeBroker(t, c, 9)
	act := c.active()
	started := make(chan struct{}, 16)
	release := make(chan struct{})
	act.act.mu.Lock()
	act.act.probe = func(ctx context.Context, addr string) error {
		started <- struct{}{}
		<-release
		return fmt.Errorf("dial %s: %w", addr, syscall.ECONNREFUSED)
	}
	act.act.mu.Unlock()
	f.heartbeat()
	f.dropConns()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("no probe after the heartbeat connection ended")
	}
	f.heartbeat() // a new connection
	close(release)
	if took, fenced := fencedWithin(act, 9, time.Second); fenced {
		t.Fatalf("broker fenced %v after a probe that it outlived with a heartbeat", took)
	}
	// The same refusal with no heartbeat in between does fence it.
	f.dropConns()
	if _, fenced := fencedWithin(act, 9, 3*time.Second); !fenced {
		t.Fatal("a refused probe with no heartbeat since the connection ended did not fence the broker")
	}
}

// TestControllerFailoverFencesNoLiveBroker: a controller change with
// every broker alive fences nobody (each is a suspect at the start of
// the term, and each listener answers the probe).
func TestControllerFailoverFencesNoLiveBroker(t *testing.T) {
	c := newCluster(t, 3, 1, livenessProps(9000))
	old := c.active()
	if err := old.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	var act *Node
	waitFor(t, 10*time.Second, "a new active controller", func() bool {
		for _, n := range c.nodes {
			if n != old && n.IsActive() {
				act = n
				return true
			}
		}
		return false
	})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for id, b := range act.Image().Brokers {
			if b.Fenced {
				t.Fatalf("live broker %d fenced after the controller change", id)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The old leader's raft connections ended, but its port answers: no
	// voter hurried an election.
	for id, n := range c.nodes {
		if h := n.hurried.Load(); h != 0 {
			t.Errorf("voter %d shortened its election timeouts %d times though the old leader is alive", id, h)
		}
	}
}
