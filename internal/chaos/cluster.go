package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cluster is N sluice processes on loopback, every node a controller voter,
// with a Kafka proxy and a controller proxy in front of each node.
type cluster struct {
	opts  *Options
	nodes []*node // index i is node id i+1
	nw    *network
	kprox []*proxy // Kafka proxy of node i+1
	cprox []*proxy // controller proxy of node i+1
	// route maps a node's real (advertised) Kafka address to its proxy:
	// the harness's clients always dial through the proxies.
	route map[string]string
	// kafkaPlaneProxied is true when the brokers advertise the proxy
	// addresses themselves (advertised.listeners honoured), so that
	// inter-broker replication goes through the proxies too.
	kafkaPlaneProxied bool
	// s3 and s3p are the S3 test server and the proxy in front of it
	// (Options.Tiered), nil otherwise.
	s3   *testproc.S3Server
	s3p  *s3Proxy
	logf func(string, ...any)
}

func (c *cluster) node(id int) *node { return c.nodes[id-1] }

// ids lists the node ids.
func (c *cluster) ids() []int {
	out := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.id
	}
	return out
}

func (c *cluster) pids() map[int]int {
	m := map[int]int{}
	for _, n := range c.nodes {
		if pid := n.pid(); pid != 0 {
			m[pid] = n.id
		}
	}
	return m
}

func newCluster(o *Options, bin, dir string) (*cluster, error) {
	c := &cluster{opts: o, route: map[string]string{}, logf: o.logf}
	c.nw = newNetwork(c.pids, o.logf)
	// Three ports per node, then (with PortBase) two per node for its
	// proxies.
	var ports []int
	proxyAddr := func(int) string { return "127.0.0.1:0" }
	if o.PortBase > 0 {
		for i := range 3 * o.Nodes {
			ports = append(ports, o.PortBase+i)
		}
		proxyAddr = func(i int) string { return "127.0.0.1:" + strconv.Itoa(o.PortBase+3*o.Nodes+i) }
	} else {
		var err error
		if ports, err = testproc.FreePorts(3 * o.Nodes); err != nil {
			return nil, err
		}
	}
	for i := range o.Nodes {
		id := i + 1
		n := &node{id: id, kafkaPort: ports[3*i], ctrlPort: ports[3*i+1], httpPort: ports[3*i+2],
			p: testproc.Process{Bin: bin, LogPath: filepath.Join(dir, "logs", fmt.Sprintf("node%d.log", id))}}
		c.nodes = append(c.nodes, n)
		kp, err := c.nw.newProxy("kafka", id, proxyAddr(2*i), n.kafkaAddr())
		if err != nil {
			c.close()
			return nil, err
		}
		cp, err := c.nw.newProxy("ctrl", id, proxyAddr(2*i+1), "127.0.0.1:"+strconv.Itoa(n.ctrlPort))
		if err != nil {
			c.close()
			return nil, err
		}
		c.kprox = append(c.kprox, kp)
		c.cprox = append(c.cprox, cp)
		c.route[n.kafkaAddr()] = kp.addr()
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	var tiered []string
	if o.Tiered {
		var err error
		if tiered, err = c.startObjectStore(filepath.Join(dir, "logs")); err != nil {
			c.close()
			return nil, err
		}
	}
	var voters []string
	for i := range c.nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, c.cprox[i].addr()))
	}
	for i, n := range c.nodes {
		props := []string{
			"# written by sluice-chaos",
			"replica.lag.time.max.ms=2000",
			"broker.session.timeout.ms=3000",
			"broker.heartbeat.interval.ms=500",
			"default.replication.factor=3",
			fmt.Sprintf("min.insync.replicas=%d", o.MinISR),
			fmt.Sprintf("unclean.leader.election.enable=%v", o.Unclean),
			"auto.create.topics.enable=false",
			"auto.leader.rebalance.enable=true",
			"leader.imbalance.check.interval.seconds=10",
			"num.partitions=" + strconv.Itoa(o.Partitions),
			// Honoured only if the broker supports advertised
			// listeners; the harness checks what is advertised.
			"advertised.listeners=PLAINTEXT://" + c.kprox[i].addr(),
		}
		if o.Workload == WorkloadGroup {
			props = append(props, groupProps...)
		}
		props = append(props, tiered...)
		if o.Workload == WorkloadShare {
			props = append(props, shareProps...)
		}
		cfgPath := filepath.Join(dir, "logs", fmt.Sprintf("node%d.properties", n.id))
		if err := os.WriteFile(cfgPath, []byte(strings.Join(props, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
		n.p.Args = []string{"serve",
			"--node-id", strconv.Itoa(n.id),
			"--listen", n.kafkaAddr(),
			"--controller-listen", "127.0.0.1:" + strconv.Itoa(n.ctrlPort),
			"--voters", strings.Join(voters, ","),
			"--data-dir", filepath.Join(dir, "data", fmt.Sprintf("node%d", n.id)),
			"--http", "127.0.0.1:" + strconv.Itoa(n.httpPort),
			"--config", cfgPath,
		}
	}
	return c, nil
}

// start launches every node and waits for the Kafka ports and for the
// metadata to list every broker.
func (c *cluster) start(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := n.waitReady(30 * time.Second); err != nil {
			return err
		}
	}
	adm, cl, err := c.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := adm.Metadata(mctx)
		cancel()
		if err == nil && len(md.Brokers) == len(c.nodes) {
			proxied := true
			for _, b := range md.Brokers {
				if int(b.Port) != c.kprox[b.NodeID-1].port() {
					proxied = false
				}
			}
			c.kafkaPlaneProxied = proxied
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: metadata does not list %d brokers after 30s (err %v)", len(c.nodes), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dialer routes every dial of a node's Kafka address through its proxy.
func (c *cluster) dialer() func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		if p, ok := c.route[host]; ok {
			host = p
		}
		d := net.Dialer{Timeout: 2 * time.Second}
		return d.DialContext(ctx, network, host)
	}
}

// seeds are the Kafka proxies of every node.
func (c *cluster) seeds() []string {
	var s []string
	for _, p := range c.kprox {
		s = append(s, p.addr())
	}
	return s
}

// clientOpts are the options every harness client shares.
func (c *cluster) clientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.seeds()...),
		kgo.Dialer(c.dialer()),
		kgo.DialTimeout(2 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(3 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RequestTimeoutOverhead(3 * time.Second),
	}
}

func (c *cluster) admin() (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// partState is one partition's leader and ISR as the metadata reports.
type partState struct {
	Leader   int32
	Replicas []int32
	ISR      []int32
}

// partitions returns the topic's partition states (asks the cluster with a
// short timeout).
func (c *cluster) partitions(ctx context.Context, adm *kadm.Client, topic string) (map[int32]partState, error) {
	mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	md, err := adm.Metadata(mctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	out := map[int32]partState{}
	for p, pd := range td.Partitions {
		out[p] = partState{Leader: pd.Leader, Replicas: pd.Replicas, ISR: pd.ISR}
	}
	return out, nil
}

// waitHealthy waits until every partition has a leader and a full ISR.
func (c *cluster) waitHealthy(ctx context.Context, adm *kadm.Client, topic string, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last string
	for {
		ps, err := c.partitions(ctx, adm, topic)
		if err == nil {
			bad := []string{}
			keys := make([]int, 0, len(ps))
			for p := range ps {
				keys = append(keys, int(p))
			}
			sort.Ints(keys)
			for _, p := range keys {
				s := ps[int32(p)]
				if s.Leader < 0 || len(s.ISR) < len(s.Replicas) {
					bad = append(bad, fmt.Sprintf("p%d leader=%d isr=%v", p, s.Leader, s.ISR))
				}
			}
			if len(bad) == 0 && len(ps) > 0 {
				return nil
			}
			last = strings.Join(bad, "; ")
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v: %s", d, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// healAll resumes paused nodes, restarts stopped ones and removes every
// network rule.
func (c *cluster) healAll() []error {
	c.nw.healAll()
	if c.s3p != nil {
		c.s3p.healAll()
	}
	return c.healProcesses()
}

// healProcesses resumes paused nodes and restarts stopped ones.
func (c *cluster) healProcesses() []error {
	var errs []error
	for _, n := range c.nodes {
		if n.isPaused() {
			if err := n.resume(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, n := range c.nodes {
		if !n.running() {
			n.note("heal: restarting")
			if err := n.start(); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := n.waitReady(30 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// close SIGKILLs every node and closes the proxies.
func (c *cluster) close() {
	for _, n := range c.nodes {
		if n.isPaused() {
			_ = n.resume()
		}
		_ = n.kill()
	}
	for _, p := range append(c.kprox, c.cprox...) {
		p.close()
	}
	if c.s3p != nil {
		c.s3p.close()
	}
	if c.s3 != nil {
		c.s3.Stop()
	}
}

// snapshotStatus saves every running node's /api/v1/partitions (each
// replica's LEO, HW, ISR as the node sees them) and /metrics as
// logs/status-<label>-nodeN.json and logs/metrics-<label>-nodeN.txt.
func (c *cluster) snapshotStatus(dir, label string) []string {
	var files []string
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, n := range c.nodes {
		if !n.running() || n.isPaused() {
			continue
		}
		for _, q := range []struct{ path, name string }{
			{"/api/v1/partitions", "status-%s-node%d.json"},
			{"/metrics", "metrics-%s-node%d.txt"},
		} {
			resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d%s", n.httpPort, q.path))
			if err != nil {
				continue
			}
			b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			if err != nil {
				continue
			}
			f := filepath.Join(dir, "logs", fmt.Sprintf(q.name, label, n.id))
			if os.WriteFile(f, b, 0o644) == nil {
				files = append(files, f)
			}
		}
	}
	return files
}
