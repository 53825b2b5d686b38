// Package testcluster runs a real multi-process sluice cluster for tests,
// on top of internal/testproc: N `sluice serve` processes on loopback, the
// first ones Raft controller voters, configured through one
// server.properties file.
//
//	func TestMain(m *testing.M) { testproc.Main(m) }
//
//	func TestX(t *testing.T) {
//		c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
//		c.CreateTopic("t", 3, 3, map[string]string{"min.insync.replicas": "2"}, nil)
//		lg := c.StartLoad("t", testcluster.LoadOptions{Partitions: []int32{0, 1, 2}, Rate: 1000})
//		c.Node(2).Kill()
//		...
//		lg.Stop(30 * time.Second)
//		testcluster.CheckAcked(t, "after the kill", lg.Acked(), c.ConsumeAll("t", 3, time.Minute))
//	}
//
// Helpers that fail the test do so on the test that started the cluster.
package testcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// Options configure Start. Zero values pick defaults.
type Options struct {
	// Nodes is the number of nodes (default 3); node i+1 is Nodes()[i].
	Nodes int
	// Voters is how many of the first nodes are controller voters (and
	// get a --controller-listen port); the others are broker-only
	// (default min(Nodes, 3)).
	Voters int
	// Props are the broker settings written to the server.properties
	// every node reads (--config).
	Props map[string]string
	// NodeProps are further settings of single nodes, by node id, added
	// to Props in that node's file (broker.rack, say).
	NodeProps map[int]map[string]string
	// Env is added to every node's environment.
	Env []string
	// StartTimeout bounds how long each node may take to answer
	// ApiVersions (default testproc.DefaultStartTimeout).
	StartTimeout time.Duration
	// NoWait starts every process before waiting for any of them to
	// serve (testproc.Options.NoWait); Proc.Restart then returns without
	// waiting either.
	NoWait bool
	// BrokersTimeout bounds the wait until every node's Metadata lists
	// all the brokers (default 60 s).
	BrokersTimeout time.Duration
	// Binary is the sluice binary every node runs (default: this
	// checkout's, testproc.Build).
	Binary string
}

// Cluster is a set of running (or stopped, or paused) sluice processes.
type Cluster struct {
	t      testing.TB
	nodes  []*testproc.Proc
	mu     sync.Mutex
	paused map[int]bool
}

// Start starts the nodes and returns once every node serves Kafka
// requests and its Metadata lists all the brokers. The processes are
// killed when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Voters == 0 {
		o.Voters = min(o.Nodes, 3)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = testproc.DefaultStartTimeout
	}
	if o.BrokersTimeout == 0 {
		o.BrokersTimeout = 60 * time.Second
	}
	cfgDir := t.TempDir()
	cfgFile := func(id int) string {
		props := maps.Clone(o.Props)
		if props == nil {
			props = map[string]string{}
		}
		maps.Copy(props, o.NodeProps[id])
		var sb strings.Builder
		for _, k := range slices.Sorted(maps.Keys(props)) {
			fmt.Fprintf(&sb, "%s=%s\n", k, props[k])
		}
		path := filepath.Join(cfgDir, fmt.Sprintf("server-%d.properties", id))
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ports, err := testproc.FreePorts(3 * o.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	kafka := func(i int) int { return ports[3*i] }
	ctrl := func(i int) int { return ports[3*i+1] }
	httpP := func(i int) int { return ports[3*i+2] }
	var voters []string
	for i := range o.Voters {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ctrl(i)))
	}
	c := &Cluster{t: t, paused: map[int]bool{}}
	for i := range o.Nodes {
		po := testproc.Options{
			NodeID:       i + 1,
			ListenPort:   kafka(i),
			HTTPPort:     httpP(i),
			DataDir:      t.TempDir(),
			ExtraArgs:    []string{"--voters", strings.Join(voters, ","), "--config", cfgFile(i + 1)},
			Env:          o.Env,
			StartTimeout: o.StartTimeout,
			NoWait:       o.NoWait,
			Binary:       o.Binary,
		}
		if i < o.Voters {
			po.ControllerPort = ctrl(i)
		}
		c.nodes = append(c.nodes, testproc.Start(t, po))
	}
	if o.NoWait {
		for _, p := range c.nodes {
			if err := p.WaitReady(o.StartTimeout); err != nil {
				t.Fatalf("node %d: %v", p.NodeID(), err)
			}
		}
	}
	c.WaitBrokers(o.Nodes, o.BrokersTimeout)
	return c
}

// Nodes are the processes; node id i+1 is at index i.
func (c *Cluster) Nodes() []*testproc.Proc { return c.nodes }

// Node returns the process with the given node id.
func (c *Cluster) Node(id int32) *testproc.Proc {
	c.t.Helper()
	if id < 1 || int(id) > len(c.nodes) {
		c.t.Fatalf("testcluster: no node %d", id)
	}
	return c.nodes[id-1]
}

// Pause SIGSTOPs a node; Up reports it down (so Addrs(true), the Metadata
// helpers and new clients skip it) until Resume.
func (c *Cluster) Pause(id int32) {
	c.t.Helper()
	c.Node(id).Pause()
	c.mu.Lock()
	c.paused[int(id)] = true
	c.mu.Unlock()
}

// Resume continues a node stopped by Pause.
func (c *Cluster) Resume(id int32) {
	c.t.Helper()
	c.Node(id).Resume()
	c.mu.Lock()
	delete(c.paused, int(id))
	c.mu.Unlock()
}

// Up reports whether a node is running and not paused.
func (c *Cluster) Up(p *testproc.Proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return p.Running() && !c.paused[p.NodeID()]
}

// upNodes are the nodes that are Up, in node id order.
func (c *Cluster) upNodes() []*testproc.Proc {
	var out []*testproc.Proc
	for _, p := range c.nodes {
		if c.Up(p) {
			out = append(out, p)
		}
	}
	return out
}

// Addrs are the Kafka addresses of the nodes: all of them, or only those
// that are Up.
func (c *Cluster) Addrs(upOnly bool) []string {
	nodes := c.nodes
	if upOnly {
		nodes = c.upNodes()
	}
	var out []string
	for _, p := range nodes {
		out = append(out, p.Addr())
	}
	return out
}

// Client returns a franz-go client seeded with every node that is Up
// (opts may override the seeds); it is closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs(true)...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over a new Client.
func (c *Cluster) Admin() *kadm.Client { return kadm.NewClient(c.Client()) }

// WaitBrokers waits until the Metadata of every node that is Up lists n
// brokers.
func (c *Cluster) WaitBrokers(n int, timeout time.Duration) {
	c.t.Helper()
	WaitFor(c.t, timeout, fmt.Sprintf("%d brokers registered (in every node's Metadata)", n), func() (bool, string) {
		var states []string
		ok := true
		for _, p := range c.upNodes() {
			ids, err := brokersFrom(p.Addr())
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", p.NodeID(), err)
			}
			states = append(states, fmt.Sprintf("node %d sees %v", p.NodeID(), ids))
			ok = ok && len(ids) == n
		}
		return ok, strings.Join(states, "; ")
	})
}

// brokersFrom returns the broker ids in one node's Metadata response.
func brokersFrom(addr string) ([]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// WaitFor polls cond every 100 ms until it holds, returning how long that
// took, or fails the test after timeout with desc and the last state cond
// reported.
func WaitFor(t testing.TB, timeout time.Duration, desc string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return WaitForEvery(t, 100*time.Millisecond, timeout, desc, cond)
}

// WaitForEvery is WaitFor polling every interval.
func WaitForEvery(t testing.TB, interval, timeout time.Duration, desc string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, desc, state)
		}
		time.Sleep(interval)
	}
}

// Adopt makes a Cluster of processes started by the test itself (a node
// started without --voters, say), node id i+1 at index i; Add appends
// more.
func Adopt(t testing.TB, nodes ...*testproc.Proc) *Cluster {
	c := &Cluster{t: t, paused: map[int]bool{}}
	for _, p := range nodes {
		c.Add(p)
	}
	return c
}

// Add appends a process the test started; its node id must be the next.
func (c *Cluster) Add(p *testproc.Proc) {
	c.t.Helper()
	if p.NodeID() != len(c.nodes)+1 {
		c.t.Fatalf("testcluster: adding node %d as node %d", p.NodeID(), len(c.nodes)+1)
	}
	c.nodes = append(c.nodes, p)
}
