package controller

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// cluster is an in-process test cluster: voters 1..nv, brokers-only after.
type cluster struct {
	t      *testing.T
	voters []config.Voter
	dirs   map[int32]string
	nodes  map[int32]*Node
	props  map[string]string
	snap   uint64
	// raftTimeout is every node's Config.RaftTimeout.
	raftTimeout time.Duration
	// lns stand in for each running node's Kafka listener (the address
	// it registers), accepting and closing connections, so the active
	// controller's probes (liveness.go) find a running node alive; stop
	// closes it, as a process's death closes its sockets. A node keeps
	// its port across restarts.
	lns   map[int32]net.Listener
	ports map[int32]int
}

func freeAddrs(t *testing.T, n int) []string {
	var lns []net.Listener
	var out []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

func testLogger() *slog.Logger {
	if os.Getenv("CONTROLLER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newCluster starts nv voters and nb broker-only nodes and waits until all
// are registered and unfenced.
func newCluster(t *testing.T, nv, nb int, props map[string]string) *cluster {
	t.Helper()
	return newClusterOpts(t, nv, nb, props, 0, 0)
}

// newClusterRaft is newCluster with raft timeout rt (newCluster's is
// 400 ms): for tests that count raft entries, which a leader change on a
// loaded machine would split between controllers.
func newClusterRaft(t *testing.T, nv, nb int, props map[string]string, rt time.Duration) *cluster {
	t.Helper()
	return newClusterOpts(t, nv, nb, props, 0, rt)
}

// newClusterSnap is a 3-voter cluster with a small snapshot threshold.
func newClusterSnap(t *testing.T, threshold uint64) *cluster {
	t.Helper()
	return newClusterOpts(t, 3, 0, nil, threshold, 0)
}

func newClusterOpts(t *testing.T, nv, nb int, props map[string]string, snap uint64, rt time.Duration) *cluster {
	t.Helper()
	if rt == 0 {
		rt = 400 * time.Millisecond
	}
	c := &cluster{raftTimeout: rt, t: t, dirs: map[int32]string{}, nodes: map[int32]*Node{}, lns: map[int32]net.Listener{}, ports: map[int32]int{}, props: map[string]string{
		"broker.session.timeout.ms":    "1500",
		"broker.heartbeat.interval.ms": "250",
	}, snap: snap}
	for k, v := range props {
		c.props[k] = v
	}
	for i, a := range freeAddrs(t, nv) {
		c.voters = append(c.voters, config.Voter{ID: int32(i + 1), Addr: a})
	}
	base := t.TempDir()
	for id := int32(1); id <= int32(nv+nb); id++ {
		c.dirs[id] = filepath.Join(base, "n"+strconv.Itoa(int(id)))
	}
	t.Cleanup(c.closeAll)
	for id := int32(1); id <= int32(nv+nb); id++ {
		c.start(id)
	}
	c.waitReady()
	return c
}

func (c *cluster) start(id int32) *Node {
	c.t.Helper()
	bc := config.Defaults()
	bc.NodeID = id
	for k, v := range c.props {
		bc.Props[k] = v
	}
	listen := ""
	for _, v := range c.voters {
		if v.ID == id {
			listen = v.Addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(c.ports[id]))
	if err != nil {
		c.t.Fatalf("node %d's listener: %v", id, err)
	}
	c.lns[id], c.ports[id] = ln, ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	n, err := Start(Config{
		NodeID: id, Voters: c.voters, ControllerListen: listen, DataDir: c.dirs[id],
		Self:   metadata.Broker{Host: "127.0.0.1", Port: int32(c.ports[id])},
		Broker: bc, Logger: testLogger().With("test", c.t.Name()),
		RaftTimeout: c.raftTimeout, SnapshotThreshold: c.snap,
	})
	if err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	c.nodes[id] = n
	return n
}

func (c *cluster) stop(id int32) {
	if n := c.nodes[id]; n != nil {
		n.Close()
		delete(c.nodes, id)
	}
	if ln := c.lns[id]; ln != nil {
		ln.Close()
		delete(c.lns, id)
	}
}

func (c *cluster) closeAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

func (c *cluster) waitReady() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for id, n := range c.nodes {
		if err := n.WaitReady(ctx); err != nil {
			c.t.Fatalf("node %d not ready: %v", id, err)
		}
	}
}

// active returns the active controller, waiting for one.
func (c *cluster) active() *Node {
	c.t.Helper()
	var got *Node
	waitFor(c.t, 10*time.Second, "an active controller", func() bool {
		for _, n := range c.nodes {
			if n.IsActive() {
				got = n
				return true
			}
		}
		return false
	})
	return got
}

// follower returns a voter that is not the active controller.
func (c *cluster) follower() *Node {
	act := c.active()
	for _, n := range c.nodes {
		if n != act && n.IsVoter() {
			return n
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func (c *cluster) id(n *Node) int32 { return n.cfg.NodeID }

// converged waits until every node has the same image and returns it.
func (c *cluster) converged() *metadata.Image {
	c.t.Helper()
	var im *metadata.Image
	waitFor(c.t, 10*time.Second, "images to converge", func() bool {
		var first []byte
		for _, n := range c.nodes {
			b, _ := json.Marshal(n.Image())
			if first == nil {
				first, im = b, n.Image()
			} else if string(b) != string(first) {
				return false
			}
		}
		return true
	})
	return im
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
