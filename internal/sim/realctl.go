package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/metadata"
)

// rctl is the controller of the real-broker world (real.go): the
// production active controller's decisions (controller.Machine: the
// controller port's handlers, session fencing, elections, the FSM) on the
// simulation's goroutine and clock, behind a simulated network. Brokers
// register, heartbeat (asking for a controlled shutdown on SIGTERM) and
// send AlterPartition through it; each follows the committed metadata by
// fetching it, so a broker may apply an image late (or, cut from the
// controller, not at all), as a KRaft broker fetching the metadata log.
// A controller failover makes the controller unreachable for a while and
// then starts a new term (controller.Machine.Failover).
type rctl struct {
	w *realWorld
	m *controller.Machine
	// nodes are the brokers' current incarnations.
	nodes map[int32]*rnode
	// downUntil: no controller answers before it (a failover's election);
	// failover is set while a new term is due.
	downUntil time.Time
	failover  bool
	// incarnations numbers registrations, so each start is a new one.
	incarnations int
}

// rnode is one broker incarnation's handle on the controller. Until its
// registration commits (register), its image is the replay: the last one
// the broker applied in its previous life, as a restarting broker reads
// its metadata log back, and its broker epoch is unknown (-1).
type rnode struct {
	c        *rctl
	id       int32
	epoch    int64
	applied  *metadata.Image // the image the broker applied last
	inc      string
	watchers []func(*metadata.Image)
	// wantDown: SIGTERM asked for a controlled shutdown; nextBeat is when
	// the next heartbeat goes out.
	wantDown bool
	nextBeat time.Time
}

func newRctl(w *realWorld) *rctl {
	cfg := config.Defaults()
	cfg.Props["broker.session.timeout.ms"] = fmt.Sprint(realSessionMs)
	cfg.Props["unclean.leader.election.enable"] = "false"
	return &rctl{w: w, nodes: map[int32]*rnode{}, m: controller.NewMachine(controller.MachineOptions{
		Broker: cfg, Now: w.clk.Now, Seed: w.opts.Seed, Knobs: w.opts.ctlKnobs})}
}

// image is the controller's committed image.
func (c *rctl) image() *metadata.Image { return c.m.Image() }

// reachable reports whether broker id can talk to the controller now.
func (c *rctl) reachable(id int32) bool {
	return c.w.brokers[id-1].up && !c.w.cutFromController[id] && !c.w.clk.Now().Before(c.downUntil)
}

// node returns a fresh, unregistered handle for broker id (a start or
// restart: the old incarnation's watchers are dropped) whose image is
// replay until register.
func (c *rctl) node(id int32, replay *metadata.Image) *rnode {
	if replay == nil {
		replay = metadata.NewImage()
	}
	c.incarnations++
	n := &rnode{c: c, id: id, epoch: -1, applied: replay, inc: fmt.Sprintf("incarnation-%d", c.incarnations)}
	c.nodes[id] = n
	return n
}

// register sends n's BrokerRegistration; the broker then fetches the
// metadata up to its registration, as Node.register waits for it.
func (c *rctl) register(n *rnode, self metadata.Broker) error {
	if !c.reachable(n.id) {
		return errUnreachable
	}
	self.Incarnation = n.inc
	rb := c.w.brokers[n.id-1]
	self.DirectoryID = rb.dir
	ep, err := c.m.Register(self, rb.diskEpoch)
	if err != nil {
		return err
	}
	// The broker records its epoch on its disk (synced), as
	// controller.Node does: its next registration's previous epoch.
	rb.diskEpoch = ep
	n.epoch = ep
	n.nextBeat = c.w.clk.Now()
	c.deliver(n)
	return nil
}

// deliver has n fetch and apply the latest committed image.
func (c *rctl) deliver(n *rnode) {
	im := c.m.Image()
	if n.epoch < 0 || n.applied.Offset >= im.Offset || !c.w.brokers[n.id-1].up || c.w.cutFromController[n.id] {
		return
	}
	n.applied = im
	for _, fn := range n.watchers {
		fn(im)
	}
}

// publish follows a commit: each registered broker fetches it now, or
// (with probability lag) on a later step.
func (c *rctl) publish(lag float64) {
	if c.w.opts.Verbose {
		c.w.tracef("metadata %d:%s", c.m.Image().Offset, c.describe(c.m.Image()))
	}
	for _, id := range c.ids() {
		if !c.w.chance(lag) {
			c.deliver(c.nodes[id])
		}
	}
}

func (c *rctl) ids() []int32 { return slices.Sorted(maps.Keys(c.nodes)) }

// step runs the controller side of one simulation step: a due failover,
// the active controller's periodic work (fencing expired sessions,
// electing leaderless partitions), due heartbeats and late metadata
// fetches.
func (c *rctl) step(lag float64) {
	w := c.w
	now := w.clk.Now()
	if now.Before(c.downUntil) {
		return
	}
	if c.failover {
		c.failover = false
		c.m.Failover()
		w.tracef("controller: new term at offset %d", c.m.Image().Offset)
	}
	before := c.m.Image()
	c.m.Tick()
	if im := c.m.Image(); im.Offset != before.Offset {
		for _, id := range im.BrokerIDs() {
			if im.Brokers[id].Fenced && !before.Brokers[id].Fenced {
				w.stats.Fences++
				w.tracef("controller: broker %d fenced (session expired)", id)
			}
		}
		c.publish(lag)
	}
	for _, id := range c.ids() {
		n := c.nodes[id]
		if n.epoch >= 0 && !now.Before(n.nextBeat) && c.reachable(id) {
			n.nextBeat = now.Add(time.Duration(20+w.rng.IntN(60)) * time.Millisecond)
			c.heartbeat(n, lag)
		}
	}
	for _, id := range c.ids() {
		if w.chance(0.2) {
			c.deliver(c.nodes[id])
		}
	}
}

// startFailover makes the controller unreachable for up to 300 ms, after
// which a new term starts.
func (c *rctl) startFailover() {
	c.downUntil = c.w.clk.Now().Add(time.Duration(50+c.w.rng.IntN(250)) * time.Millisecond)
	c.failover = true
	c.w.stats.CtlFailovers++
	c.w.tracef("controller failover: unreachable until %d", c.downUntil.Sub(c.w.start).Milliseconds())
}

// heartbeat sends n's BrokerHeartbeat with the offset it applied.
func (c *rctl) heartbeat(n *rnode, lag float64) {
	w := c.w
	before := c.m.Image().Offset
	r, err := c.m.Heartbeat(n.id, n.epoch, n.applied.Offset, n.wantDown)
	if c.m.Image().Offset != before {
		w.tracef("heartbeat of broker %d (applied %d, want down %v): fenced %v shutting down %v", n.id, n.applied.Offset, n.wantDown, r.Fenced, r.ShuttingDown)
		c.publish(lag)
	}
	switch {
	case errors.Is(err, kerr.StaleBrokerEpoch), errors.Is(err, kerr.BrokerIDNotRegistered):
		// Replaced (a fencing can't do that; a registration can): a
		// broker registers again.
		w.tracef("broker %d heartbeat: %v; registering again", n.id, err)
		n.epoch = -1
		w.brokers[n.id-1].regAt = w.clk.Now()
		w.brokers[n.id-1].pendingReg = n
	case err != nil:
		w.fail("broker %d heartbeat: %v", n.id, err)
	case r.ShouldShutDown && n.wantDown:
		c.deliver(n)
		if n.applied.Offset < r.CatchUp {
			return // not caught up yet (cut off): the next heartbeat
		}
		w.shutdownGranted(w.brokers[n.id-1], !r.Fenced)
	}
}

// describe renders every partition's leader, epochs and ISR.
func (c *rctl) describe(im *metadata.Image) string {
	var out []byte
	for _, name := range im.TopicNames() {
		for _, p := range im.Topics[name].Partitions {
			out = append(out, []byte(fmtPart(name, p))...)
		}
	}
	return string(out)
}

// Image is the image the broker applied last.
func (n *rnode) Image() *metadata.Image { return n.applied }

// Watch adds a watcher of the images the broker applies.
func (n *rnode) Watch(fn func(*metadata.Image)) { n.watchers = append(n.watchers, fn) }

// BrokerEpoch is the incarnation's broker epoch, -1 until registered.
func (n *rnode) BrokerEpoch() int64 { return n.epoch }

// CreateTopic creates a topic with the controller's placement; the
// creating broker applies it at once.
func (n *rnode) CreateTopic(_ context.Context, name string, partitions int32, rf int16, _ [][]int32, configs map[string]string, validateOnly bool) error {
	if validateOnly {
		return nil
	}
	if !n.c.reachable(n.id) {
		return errUnreachable
	}
	if err := n.c.m.CreateTopic(name, partitions, rf, configs); err != nil {
		return err
	}
	n.c.publish(0)
	return nil
}

// AlterPartition commits an ISR change by compare-and-set (docs/kafka-replication.md §2.4);
// one in twenty commits loses its answer on the way back.
func (n *rnode) AlterPartition(_ context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResponse, error) {
	c := n.c
	if !c.reachable(n.id) {
		return metadata.AlterPartitionResponse{}, errUnreachable
	}
	before := c.m.Image().Offset
	resp, err := c.m.AlterPartition(req)
	if err != nil {
		c.w.fail("AlterPartition: %v", err)
		return resp, err
	}
	c.w.tracef("AlterPartition %s-%d from %d (epochs %d/%d) ISR %v %v: error %d", req.Topic, req.Partition, req.BrokerID,
		req.LeaderEpoch, req.PartitionEpoch, req.NewISR, req.ISRBrokerEpochs, resp.Error)
	if c.m.Image().Offset != before {
		c.w.stats.ISRChanges++
		c.publish(0.3)
		if !c.w.settling && c.w.chance(0.05) {
			c.w.tracef("AlterPartition answer lost")
			return metadata.AlterPartitionResponse{}, errUnreachable
		}
	}
	return resp, nil
}

// The administrative calls the simulated workload does not make.

// DeleteTopic is not simulated.
func (n *rnode) DeleteTopic(context.Context, string) error { return kerr.InvalidRequest }

// CreatePartitions is not simulated.
func (n *rnode) CreatePartitions(context.Context, string, int32, [][]int32, bool) error {
	return kerr.InvalidRequest
}

// AlterTopicConfigs is not simulated.
func (n *rnode) AlterTopicConfigs(context.Context, string, []metadata.ConfigOp, bool) error {
	return kerr.InvalidRequest
}

// AllocateProducerID hands out the next producer id (realcoord.go).
func (n *rnode) AllocateProducerID(context.Context) (int64, error) { return n.c.w.allocatePID(n.id) }

// ControlledShutdown is driven by the simulation's heartbeats instead
// (rctl.heartbeat).
func (n *rnode) ControlledShutdown(context.Context) error { return nil }

// Close does nothing.
func (n *rnode) Close() error { return nil }
