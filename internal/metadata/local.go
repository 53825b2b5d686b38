package metadata

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Local is the single-node controller of earlier releases: the node's
// metadata a Store on local disk, every partition with this node as its
// only replica, leader and ISR. A node now runs the Raft controller as a
// quorum of itself instead (internal/node, standalone.go), which imports
// a Local store on upgrade (ReadStore); in-process unit tests of the
// broker and the handlers still run on Local (broker.Options.Controller's
// default).
type Local struct {
	store *Store
	cfg   *config.Broker
	self  Broker

	mu       sync.Mutex
	watchers []func(*Image)
}

// OpenLocal opens the single-node metadata in dir and registers self as the
// only broker. A new cluster takes newClusterID ("" for a random one).
func OpenLocal(fsys vfs.FS, dir string, cfg *config.Broker, self Broker, newClusterID string) (*Local, error) {
	st, err := OpenStore(fsys, dir, newClusterID)
	if err != nil {
		return nil, err
	}
	l := &Local{store: st, cfg: cfg, self: self}
	st.Subscribe(func(im *Image) {
		l.mu.Lock()
		ws := append([]func(*Image){}, l.watchers...)
		l.mu.Unlock()
		for _, w := range ws {
			w(im)
		}
	})
	err = st.Update(func(im *Image) error {
		self.Epoch = im.Offset + 1
		im.Brokers = map[int32]Broker{self.ID: self}
		for _, t := range im.Topics {
			for i := range t.Partitions {
				p := &t.Partitions[i]
				p.Leader, p.Replicas, p.ISR = self.ID, []int32{self.ID}, []int32{self.ID}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.self = st.Image().Brokers[self.ID]
	return l, nil
}

// Image implements Controller.
func (l *Local) Image() *Image { return l.store.Image() }

// Watch implements Controller.
func (l *Local) Watch(fn func(*Image)) {
	l.mu.Lock()
	l.watchers = append(l.watchers, fn)
	l.mu.Unlock()
}

// BrokerEpoch implements Controller.
func (l *Local) BrokerEpoch() int64 { return l.self.Epoch }

func (l *Local) partitionMeta(i int32) Partition {
	id := l.self.ID
	return Partition{Index: i, Leader: id, Replicas: []int32{id}, ISR: []int32{id}}
}

// checkLimits applies the per-request bound and KIP-578's limits to n new
// partitions on this node (every replica is here: the node holds as many
// replicas as the cluster has partitions).
func (l *Local) checkLimits(im *Image, n int) error {
	if n > MaxPartitionsPerRequest {
		return ErrTooManyPartitionsPerRequest(int64(n))
	}
	lim := LimitsOf(l.cfg)
	cur := NumPartitions(im)
	if err := lim.CheckTotal(cur, n); err != nil {
		return err
	}
	if cur+n > lim.MaxBrokerPartitions {
		return ErrBrokerFull(l.self.ID, cur, n, lim.MaxBrokerPartitions)
	}
	return nil
}

// CreateTopic implements Controller.
func (l *Local) CreateTopic(_ context.Context, name string, partitions int32, rf int16, assignment [][]int32, configs map[string]string, validateOnly bool) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if assignment != nil {
		partitions, rf = int32(len(assignment)), int16(len(assignment[0]))
		for _, a := range assignment {
			if len(a) != 1 || a[0] != l.self.ID {
				return kerr.InvalidReplicaAssignment
			}
		}
	}
	if partitions == -1 {
		partitions = int32(l.cfg.Int("num.partitions", 1))
	}
	if rf == -1 {
		rf = int16(l.cfg.Int("default.replication.factor", 1))
	}
	if partitions > MaxPartitionsPerRequest {
		return ErrTooManyPartitionsPerRequest(int64(partitions))
	}
	if partitions <= 0 {
		return kerr.InvalidPartitions
	}
	if rf <= 0 || rf > 1 {
		return kerr.InvalidReplicationFactor
	}
	if err := ValidateConfigs(configs); err != nil {
		return err
	}
	im := l.store.Image()
	if _, ok := im.Topics[name]; ok {
		return kerr.TopicAlreadyExists
	}
	if err := l.checkLimits(im, int(partitions)); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	return l.store.Update(func(im *Image) error {
		if _, ok := im.Topics[name]; ok {
			return kerr.TopicAlreadyExists
		}
		if err := l.checkLimits(im, int(partitions)); err != nil {
			return err
		}
		t := &Topic{Name: name, ID: NewUUID(), Configs: map[string]string{}}
		for k, v := range configs {
			t.Configs[k] = v
		}
		for i := int32(0); i < partitions; i++ {
			t.Partitions = append(t.Partitions, l.partitionMeta(i))
		}
		im.Topics[name] = t
		return nil
	})
}

// DeleteTopic implements Controller.
func (l *Local) DeleteTopic(_ context.Context, name string) error {
	return l.store.Update(func(im *Image) error {
		if _, ok := im.Topics[name]; !ok {
			return kerr.UnknownTopicOrPartition
		}
		delete(im.Topics, name)
		return nil
	})
}

// CreatePartitions implements Controller. An explicit assignment is
// validated as the Raft controller does (AssignedPartitions): here its
// only broker is this node.
func (l *Local) CreatePartitions(_ context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	im := l.store.Image()
	t, ok := im.Topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	cur := int32(len(t.Partitions))
	if count <= cur || count > MaxPartitionsPerTopic {
		return kerr.InvalidPartitions
	}
	if assignment != nil {
		if _, err := AssignedPartitions(im, t, count, assignment); err != nil {
			return err
		}
	}
	if err := l.checkLimits(im, int(count-cur)); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	return l.store.Update(func(im *Image) error {
		t, ok := im.Topics[name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		if int32(len(t.Partitions)) != cur {
			return kerr.InvalidPartitions
		}
		if err := l.checkLimits(im, int(count-cur)); err != nil {
			return err
		}
		if assignment != nil {
			parts, err := AssignedPartitions(im, t, count, assignment)
			if err != nil {
				return err
			}
			t.Partitions = append(t.Partitions, parts...)
			return nil
		}
		for i := cur; i < count; i++ {
			t.Partitions = append(t.Partitions, l.partitionMeta(i))
		}
		return nil
	})
}

// AlterTopicConfigs implements Controller.
func (l *Local) AlterTopicConfigs(_ context.Context, name string, ops []ConfigOp, validateOnly bool) error {
	t, ok := l.store.Image().Topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	next, err := ApplyConfigOps(t.Configs, ops)
	if err != nil || validateOnly {
		return err
	}
	return l.store.Update(func(im *Image) error {
		t, ok := im.Topics[name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		t.Configs = next
		return nil
	})
}

// AllocateProducerID implements Controller.
func (l *Local) AllocateProducerID(context.Context) (int64, error) {
	var id int64
	err := l.store.Update(func(im *Image) error {
		id = im.NextProducerID
		im.NextProducerID++
		return nil
	})
	return id, err
}

// AlterPartition implements Controller. A single node's ISR is always
// itself, so any proposal is answered with the current state.
func (l *Local) AlterPartition(_ context.Context, req AlterPartitionRequest) (AlterPartitionResponse, error) {
	t, ok := l.store.Image().Topics[req.Topic]
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return AlterPartitionResponse{Error: kerr.UnknownTopicOrPartition.Code}, nil
	}
	p := t.Partitions[req.Partition]
	return AlterPartitionResponse{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR}, nil
}

// ControlledShutdown implements Controller: a single node has nowhere to
// move leadership, so shutdown is granted at once.
func (l *Local) ControlledShutdown(context.Context) error { return nil }

// Close implements Controller.
func (l *Local) Close() error { return nil }
