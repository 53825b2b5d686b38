package sim

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// rctl is the controller of the real-broker world (real.go): a
// metadata.Controller whose every change commits at once into a new
// metadata.Image, delivered to each live broker's watchers on the
// simulation's goroutine, in commit order, as a KRaft broker follows the
// metadata log. It registers brokers with fresh epochs, fences them (and
// elects new leaders from the ISR in assignment order), unfences them on
// restart (electing leaderless partitions), and commits ISR changes by
// compare-and-set on (leader epoch, partition epoch), refusing fenced
// members (KIP-841) and stale broker epochs (KIP-903).
type rctl struct {
	w     *realWorld
	img   *metadata.Image
	nodes map[int32]*rnode
}

// rnode is one broker incarnation's handle on the controller. Until its
// registration commits (register), its image is the replay: the last one
// the broker applied in its previous life, as a restarting broker reads
// its metadata log back, and its broker epoch is unknown (-1).
type rnode struct {
	c        *rctl
	id       int32
	epoch    int64
	replay   *metadata.Image
	watchers []func(*metadata.Image)
}

func newRctl(w *realWorld) *rctl {
	return &rctl{w: w, img: metadata.NewImage(), nodes: map[int32]*rnode{}}
}

// node returns a fresh, unregistered handle for broker self.ID (a start
// or restart: the old incarnation's watchers are dropped) whose image is
// replay until register.
func (c *rctl) node(id int32, replay *metadata.Image) *rnode {
	if replay == nil {
		replay = metadata.NewImage()
	}
	n := &rnode{c: c, id: id, epoch: -1, replay: replay}
	c.nodes[id] = n
	return n
}

// register commits n's registration: a registered incarnation still
// unfenced is fenced first (KRaft fences the old one), then n is
// registered unfenced with a new broker epoch, and any leaderless
// partition it can lead gets it.
func (c *rctl) register(n *rnode, self metadata.Broker) {
	if old, ok := c.img.Brokers[self.ID]; ok && !old.Fenced {
		c.fence(self.ID)
	}
	c.update(func(im *metadata.Image) error {
		self.Epoch = im.Offset + 1
		self.Fenced = false
		im.Brokers[self.ID] = self
		n.epoch, n.replay = self.Epoch, nil
		c.electLeaderless(im)
		return nil
	})
}

// update applies fn to a copy of the image and delivers the result.
func (c *rctl) update(fn func(*metadata.Image) error) error {
	next := c.img.Clone()
	if err := fn(next); err != nil {
		return err
	}
	next.Offset++
	c.img = next
	c.w.tracef("metadata %d: %s", next.Offset, c.describe(next))
	ids := make([]int32, 0, len(c.nodes))
	for id, n := range c.nodes {
		if n.replay == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !c.w.brokers[id-1].up {
			continue
		}
		for _, fn := range c.nodes[id].watchers {
			fn(next)
		}
	}
	return nil
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

// fence marks a broker fenced (its session expired), takes it out of
// every ISR it is not the last member of and moves its leaderships.
func (c *rctl) fence(id int32) {
	c.update(func(im *metadata.Image) error {
		br := im.Brokers[id]
		br.Fenced = true
		im.Brokers[id] = br
		for _, name := range im.TopicNames() {
			t := im.Topics[name]
			for i := range t.Partitions {
				p := &t.Partitions[i]
				if len(p.ISR) > 1 && slices.Contains(p.ISR, id) {
					p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(x int32) bool { return x == id })
					p.PartitionEpoch++
				}
				if p.Leader == id {
					c.elect(im, p)
				}
			}
		}
		return nil
	})
}

// unfence lets a fenced broker that heartbeats again back in (same broker
// epoch) and elects the leaderless partitions it can lead.
func (c *rctl) unfence(id int32) {
	c.update(func(im *metadata.Image) error {
		br := im.Brokers[id]
		br.Fenced = false
		im.Brokers[id] = br
		c.electLeaderless(im)
		return nil
	})
}

// elect picks the first active ISR member in assignment order (clean
// elections only), or none.
func (c *rctl) elect(im *metadata.Image, p *metadata.Partition) {
	p.Leader = -1
	for _, r := range p.Replicas {
		if slices.Contains(p.ISR, r) && im.Brokers[r].Active() {
			p.Leader = r
			break
		}
	}
	p.LeaderEpoch++
	p.PartitionEpoch++
}

func (c *rctl) electLeaderless(im *metadata.Image) {
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		for i := range t.Partitions {
			if p := &t.Partitions[i]; p.Leader < 0 {
				c.elect(im, p)
				if p.Leader < 0 {
					p.LeaderEpoch-- // nothing changed: no new epoch
					p.PartitionEpoch--
				}
			}
		}
	}
}

func (n *rnode) Image() *metadata.Image {
	if n.replay != nil {
		return n.replay
	}
	return n.c.img
}

func (n *rnode) Watch(fn func(*metadata.Image)) { n.watchers = append(n.watchers, fn) }

func (n *rnode) BrokerEpoch() int64 { return n.epoch }

// CreateTopic creates a topic with replicas assigned round-robin from the
// lowest broker id, every replica in the ISR, the first one leading.
func (n *rnode) CreateTopic(_ context.Context, name string, partitions int32, rf int16, _ [][]int32, configs map[string]string, validateOnly bool) error {
	if validateOnly {
		return nil
	}
	return n.c.update(func(im *metadata.Image) error {
		if _, ok := im.Topics[name]; ok {
			return kerr.TopicAlreadyExists
		}
		ids := im.BrokerIDs()
		if int(rf) > len(ids) || rf < 1 || partitions < 1 {
			return kerr.InvalidReplicationFactor
		}
		t := &metadata.Topic{Name: name, ID: metadata.UUID{byte(len(im.Topics) + 1)}, Configs: configs}
		for i := int32(0); i < partitions; i++ {
			var reps []int32
			for j := 0; j < int(rf); j++ {
				reps = append(reps, ids[(int(i)+j)%len(ids)])
			}
			t.Partitions = append(t.Partitions, metadata.Partition{Index: i, Leader: reps[0], Replicas: reps, ISR: slices.Clone(reps)})
		}
		im.Topics[name] = t
		return nil
	})
}

// AlterPartition commits an ISR change by compare-and-set (reference §2.4).
func (n *rnode) AlterPartition(_ context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResponse, error) {
	if !n.c.w.brokers[n.id-1].up || n.c.w.cutFromController[n.id] {
		return metadata.AlterPartitionResponse{}, errUnreachable
	}
	var resp metadata.AlterPartitionResponse
	err := n.c.update(func(im *metadata.Image) error {
		t := im.Topics[req.Topic]
		if t == nil || int(req.Partition) >= len(t.Partitions) {
			resp.Error = kerr.UnknownTopicOrPartition.Code
			return nil
		}
		p := &t.Partitions[req.Partition]
		switch {
		case im.Brokers[req.BrokerID].Epoch != req.BrokerEpoch:
			resp.Error = kerr.StaleBrokerEpoch.Code
		case req.LeaderEpoch < p.LeaderEpoch:
			resp.Error = kerr.FencedLeaderEpoch.Code
		case req.BrokerID != p.Leader:
			resp.Error = kerr.InvalidRequest.Code
		case req.PartitionEpoch != p.PartitionEpoch:
			resp.Error = kerr.InvalidUpdateVersion.Code
		}
		for i, id := range req.NewISR {
			br, ok := im.Brokers[id]
			switch {
			case resp.Error != 0:
			case !ok || !br.Active():
				resp.Error = kerr.IneligibleReplica.Code
			case i < len(req.ISRBrokerEpochs) && req.ISRBrokerEpochs[i] >= 0 && req.ISRBrokerEpochs[i] != br.Epoch:
				resp.Error = kerr.IneligibleReplica.Code
			}
		}
		if resp.Error == 0 {
			p.ISR = slices.Clone(req.NewISR)
			slices.Sort(p.ISR)
			p.PartitionEpoch++
			n.c.w.stats.ISRChanges++
		}
		resp.Leader, resp.LeaderEpoch, resp.PartitionEpoch, resp.ISR = p.Leader, p.LeaderEpoch, p.PartitionEpoch, slices.Clone(p.ISR)
		return nil
	})
	n.c.w.tracef("AlterPartition %s-%d from %d (epochs %d/%d) ISR %v %v: error %d", req.Topic, req.Partition, req.BrokerID,
		req.LeaderEpoch, req.PartitionEpoch, req.NewISR, req.ISRBrokerEpochs, resp.Error)
	return resp, err
}

// The administrative calls the simulated workload does not make.

func (n *rnode) DeleteTopic(context.Context, string) error { return kerr.InvalidRequest }
func (n *rnode) CreatePartitions(context.Context, string, int32, bool) error {
	return kerr.InvalidRequest
}
func (n *rnode) AlterTopicConfigs(context.Context, string, []metadata.ConfigOp, bool) error {
	return kerr.InvalidRequest
}
func (n *rnode) AllocateProducerID(context.Context) (int64, error) { return 0, kerr.InvalidRequest }
func (n *rnode) ControlledShutdown(context.Context) error          { return nil }
func (n *rnode) Close() error                                      { return nil }
