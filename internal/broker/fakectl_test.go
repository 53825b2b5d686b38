package broker_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/metadata"
)

// fakeQuorum is an in-memory controller shared by in-process brokers: it
// commits every change at once and lets tests fence brokers and elect leaders
// by hand. It follows the AlterPartition rules of docs/kafka-replication.md
// §2.4.
type fakeQuorum struct {
	mu    sync.Mutex
	img   *metadata.Image
	nodes []*fakeNode
}

type fakeNode struct {
	q        *fakeQuorum
	id       int32
	watchers []func(*metadata.Image)
}

func newFakeQuorum() *fakeQuorum {
	return &fakeQuorum{img: metadata.NewImage()}
}

// node registers a broker and returns its controller handle.
func (q *fakeQuorum) node(self metadata.Broker) *fakeNode {
	n := &fakeNode{q: q, id: self.ID}
	q.mu.Lock()
	q.nodes = append(q.nodes, n)
	q.mu.Unlock()
	q.update(func(im *metadata.Image) error {
		self.Epoch = im.Offset + 1
		im.Brokers[self.ID] = self
		return nil
	})
	return n
}

// update applies fn to a copy and publishes it to every node's watchers.
func (q *fakeQuorum) update(fn func(*metadata.Image) error) error {
	q.mu.Lock()
	next := q.img.Clone()
	if err := fn(next); err != nil {
		q.mu.Unlock()
		return err
	}
	next.Offset++
	q.img = next
	var ws []func(*metadata.Image)
	for _, n := range q.nodes {
		ws = append(ws, n.watchers...)
	}
	q.mu.Unlock()
	for _, w := range ws {
		w(next)
	}
	return nil
}

// fence marks a broker fenced, drops it from ISRs (unless last) and
// re-elects the partitions it led from the ISR.
func (q *fakeQuorum) fence(id int32) {
	q.update(func(im *metadata.Image) error {
		br := im.Brokers[id]
		br.Fenced = true
		im.Brokers[id] = br
		for _, t := range im.Topics {
			for i := range t.Partitions {
				p := &t.Partitions[i]
				if len(p.ISR) > 1 && slices.Contains(p.ISR, id) {
					p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(x int32) bool { return x == id })
					p.PartitionEpoch++
				}
				if p.Leader == id {
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
			}
		}
		return nil
	})
}

// unfence re-registers a broker (a restart) with a new epoch.
func (q *fakeQuorum) unfence(id int32) {
	q.update(func(im *metadata.Image) error {
		br := im.Brokers[id]
		br.Fenced = false
		br.Epoch = im.Offset + 1
		im.Brokers[id] = br
		return nil
	})
}

func (n *fakeNode) Image() *metadata.Image {
	n.q.mu.Lock()
	defer n.q.mu.Unlock()
	return n.q.img
}

func (n *fakeNode) Watch(fn func(*metadata.Image)) {
	n.q.mu.Lock()
	n.watchers = append(n.watchers, fn)
	n.q.mu.Unlock()
}

func (n *fakeNode) BrokerEpoch() int64 { return n.Image().Brokers[n.id].Epoch }

func (n *fakeNode) CreateTopic(_ context.Context, name string, partitions int32, rf int16, _ [][]int32, configs map[string]string, validateOnly bool) error {
	if err := metadata.ValidateConfigs(configs); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	return n.q.update(func(im *metadata.Image) error {
		if _, ok := im.Topics[name]; ok {
			return kerr.TopicAlreadyExists
		}
		ids := im.BrokerIDs()
		if partitions < 1 {
			partitions = 1
		}
		if rf < 1 {
			rf = 1
		}
		if int(rf) > len(ids) {
			return kerr.InvalidReplicationFactor
		}
		t := &metadata.Topic{Name: name, ID: metadata.NewUUID(), Configs: configs}
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

func (n *fakeNode) DeleteTopic(_ context.Context, name string) error {
	return n.q.update(func(im *metadata.Image) error { delete(im.Topics, name); return nil })
}

func (n *fakeNode) CreatePartitions(context.Context, string, int32, [][]int32, bool) error {
	return kerr.InvalidRequest
}

func (n *fakeNode) AlterTopicConfigs(_ context.Context, name string, ops []metadata.ConfigOp, validateOnly bool) error {
	return n.q.update(func(im *metadata.Image) error {
		t := im.Topics[name]
		next, err := metadata.ApplyConfigOps(t.Configs, ops)
		if err != nil {
			return err
		}
		t.Configs = next
		return nil
	})
}

func (n *fakeNode) AllocateProducerID(context.Context) (int64, error) {
	var id int64
	err := n.q.update(func(im *metadata.Image) error { id = im.NextProducerID; im.NextProducerID++; return nil })
	return id, err
}

func (n *fakeNode) AlterPartition(_ context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResponse, error) {
	var resp metadata.AlterPartitionResponse
	err := n.q.update(func(im *metadata.Image) error {
		t := im.Topics[req.Topic]
		if t == nil || int(req.Partition) >= len(t.Partitions) {
			resp.Error = kerr.UnknownTopicOrPartition.Code
			return nil
		}
		p := &t.Partitions[req.Partition]
		switch {
		case req.LeaderEpoch < p.LeaderEpoch:
			resp.Error = kerr.FencedLeaderEpoch.Code
		case req.BrokerID != p.Leader:
			resp.Error = kerr.InvalidRequest.Code
		case req.PartitionEpoch < p.PartitionEpoch:
			resp.Error = kerr.InvalidUpdateVersion.Code
		}
		for _, id := range req.NewISR {
			if br, ok := im.Brokers[id]; resp.Error == 0 && (!ok || !br.Active()) {
				resp.Error = kerr.IneligibleReplica.Code
			}
		}
		if resp.Error == 0 {
			p.ISR = slices.Clone(req.NewISR)
			p.PartitionEpoch++
		}
		resp.Leader, resp.LeaderEpoch, resp.PartitionEpoch, resp.ISR = p.Leader, p.LeaderEpoch, p.PartitionEpoch, slices.Clone(p.ISR)
		return nil
	})
	return resp, err
}

func (n *fakeNode) ControlledShutdown(context.Context) error { return nil }
func (n *fakeNode) Close() error                             { return nil }

// buildBatch encodes one uncompressed record.
func buildBatch(value string) []byte {
	return batchtest.Build(batchtest.Options{}, batchtest.Values(value))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
