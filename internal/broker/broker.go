// Package broker holds a node's partitions and topic metadata and implements
// the operations the Kafka handlers call: topic administration, appends with
// durability, reads up to the high watermark, and producer-id allocation.
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Options configure a Broker.
type Options struct {
	Config *config.Broker
	// FS is where data lives. Default vfs.Default (the OS).
	FS vfs.FS
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Broker is one sluice node's data plane.
type Broker struct {
	cfg  *config.Broker
	fs   vfs.FS
	log  *slog.Logger
	now  func() time.Time
	meta *metadata.Store

	mu    sync.RWMutex
	parts map[TP]*Partition

	pidMu sync.Mutex

	closing chan struct{}
	wg      sync.WaitGroup
}

// Limits on administrative requests.
const (
	// MaxTopicNameLen is Kafka's limit (249: a partition directory name must
	// fit in 255 bytes).
	MaxTopicNameLen = 249
	// MaxPartitionsPerTopic bounds CreateTopics / CreatePartitions.
	MaxPartitionsPerTopic = 10000
	// MaxPartitions bounds the partitions of the whole node.
	MaxPartitions = 100000
)

// Open starts a broker on the configured data directory, recovering every
// partition log found in the metadata.
func Open(opts Options) (*Broker, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg := opts.Config
	if err := opts.FS.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	meta, err := metadata.OpenStore(opts.FS, path.Join(cfg.DataDir, "__cluster_metadata"))
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, fs: opts.FS, log: opts.Logger, now: opts.Now, meta: meta, parts: map[TP]*Partition{}, closing: make(chan struct{})}
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", cfg.Listen, err)
	}
	port, _ := strconv.Atoi(portStr)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	self := metadata.Broker{ID: cfg.NodeID, Host: host, Port: int32(port)}
	if err := meta.Update(func(im *metadata.Image) error {
		im.Brokers = map[int32]metadata.Broker{cfg.NodeID: self}
		for _, t := range im.Topics {
			for i := range t.Partitions {
				p := &t.Partitions[i]
				p.Leader, p.Replicas, p.ISR = cfg.NodeID, []int32{cfg.NodeID}, []int32{cfg.NodeID}
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	img := meta.Image()
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for _, mp := range t.Partitions {
			if _, err := b.openPartition(t, mp); err != nil {
				b.Close()
				return nil, err
			}
		}
	}
	b.wg.Add(1)
	go b.retentionLoop()
	return b, nil
}

// Config returns the broker configuration.
func (b *Broker) Config() *config.Broker { return b.cfg }

// NodeID is this node's id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// Image returns the current metadata image (read-only).
func (b *Broker) Image() *metadata.Image { return b.meta.Image() }

// Now is the broker's clock.
func (b *Broker) Now() time.Time { return b.now() }

// Logger is the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

func partitionDir(dataDir string, tp TP) string {
	return path.Join(dataDir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
}

// storageConfig maps a topic's effective config onto the storage config.
func (b *Broker) storageConfig(t *metadata.Topic) storage.Config {
	tc := config.TopicConfig{Set: t.Configs, Broker: b.cfg}
	c := storage.DefaultConfig()
	c.SegmentBytes = tc.Int64("segment.bytes")
	c.SegmentMs = tc.Int64("segment.ms")
	c.IndexIntervalBytes = int(tc.Int64("index.interval.bytes"))
	c.SegmentIndexBytes = int(tc.Int64("segment.index.bytes"))
	c.RetentionMs = tc.Int64("retention.ms")
	c.RetentionBytes = tc.Int64("retention.bytes")
	c.FileDeleteDelayMs = tc.Int64("file.delete.delay.ms")
	c.ProducerIDExpirationMs = b.cfg.Int("producer.id.expiration.ms", 86400000)
	return c
}

func (b *Broker) openPartition(t *metadata.Topic, mp metadata.Partition) (*Partition, error) {
	tp := TP{t.Name, mp.Index}
	l, err := storage.Open(b.fs, partitionDir(b.cfg.DataDir, tp), b.storageConfig(t), b.now())
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", tp.Topic, tp.Partition, err)
	}
	// A single node is its own ISR: everything recovered is committed once
	// it is durable.
	if err := l.Sync(); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.AssignEpoch(mp.LeaderEpoch, l.LogEndOffset()); err != nil {
		l.Close()
		return nil, err
	}
	p := newPartition(tp, l, mp.LeaderEpoch)
	b.mu.Lock()
	b.parts[tp] = p
	b.mu.Unlock()
	return p, nil
}

// Partition returns the local replica of a partition, or the Kafka error
// for why it cannot be served.
func (b *Broker) Partition(topic string, partition int32) (*Partition, error) {
	b.mu.RLock()
	p := b.parts[TP{topic, partition}]
	b.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// TopicConfig returns the effective configuration of a topic.
func (b *Broker) TopicConfig(t *metadata.Topic) config.TopicConfig {
	return config.TopicConfig{Set: t.Configs, Broker: b.cfg}
}

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// ValidateTopicName applies Kafka's topic name rules.
func ValidateTopicName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return kerr.InvalidTopicException
	case len(name) > MaxTopicNameLen:
		return kerr.InvalidTopicException
	case !legalTopic.MatchString(name):
		return kerr.InvalidTopicException
	}
	return nil
}

// CreateTopic creates a topic with the given partitions and configs.
// partitions <= 0 and replicationFactor <= 0 take the broker defaults
// (num.partitions, default.replication.factor). The returned error is a
// *kerr.Error where Kafka has a code for it.
func (b *Broker) CreateTopic(name string, partitions int32, replicationFactor int16, configs map[string]string, validateOnly bool) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if partitions <= 0 {
		if partitions != -1 {
			return kerr.InvalidPartitions
		}
		partitions = int32(b.cfg.Int("num.partitions", 1))
	}
	if replicationFactor <= 0 {
		if replicationFactor != -1 {
			return kerr.InvalidReplicationFactor
		}
		replicationFactor = int16(b.cfg.Int("default.replication.factor", 1))
	}
	if partitions > MaxPartitionsPerTopic {
		return kerr.InvalidPartitions
	}
	img := b.meta.Image()
	if int(replicationFactor) > len(img.Brokers) {
		return kerr.InvalidReplicationFactor
	}
	for k, v := range configs {
		d, ok := config.LookupTopicDef(k)
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, k)
		}
		if err := d.Validate(v); err != nil {
			return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
		}
	}
	if _, exists := img.Topics[name]; exists {
		return kerr.TopicAlreadyExists
	}
	if b.numPartitions()+int(partitions) > MaxPartitions {
		return kerr.PolicyViolation
	}
	if validateOnly {
		return nil
	}
	var created *metadata.Topic
	err := b.meta.Update(func(im *metadata.Image) error {
		if _, exists := im.Topics[name]; exists {
			return kerr.TopicAlreadyExists
		}
		t := &metadata.Topic{Name: name, ID: metadata.NewUUID(), Configs: map[string]string{}}
		for k, v := range configs {
			t.Configs[k] = v
		}
		for i := int32(0); i < partitions; i++ {
			t.Partitions = append(t.Partitions, b.newPartitionMeta(i))
		}
		im.Topics[name] = t
		created = t.Clone()
		return nil
	})
	if err != nil {
		return err
	}
	for _, mp := range created.Partitions {
		if _, err := b.openPartition(created, mp); err != nil {
			return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
		}
	}
	b.log.Info("created topic", "topic", name, "partitions", partitions)
	return nil
}

func (b *Broker) newPartitionMeta(i int32) metadata.Partition {
	id := b.cfg.NodeID
	return metadata.Partition{Index: i, Leader: id, Replicas: []int32{id}, ISR: []int32{id}}
}

func (b *Broker) numPartitions() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.parts)
}

// DeleteTopic deletes a topic and its data.
func (b *Broker) DeleteTopic(name string) error {
	var deleted *metadata.Topic
	err := b.meta.Update(func(im *metadata.Image) error {
		t, ok := im.Topics[name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		deleted = t
		delete(im.Topics, name)
		return nil
	})
	if err != nil {
		return err
	}
	for _, mp := range deleted.Partitions {
		tp := TP{name, mp.Index}
		b.mu.Lock()
		p := b.parts[tp]
		delete(b.parts, tp)
		b.mu.Unlock()
		if p != nil {
			p.wake()
			if err := p.log.Delete(); err != nil {
				b.log.Warn("deleting partition data", "topic", name, "partition", mp.Index, "err", err)
			}
		}
	}
	b.log.Info("deleted topic", "topic", name)
	return nil
}

// CreatePartitions grows a topic to count partitions.
func (b *Broker) CreatePartitions(name string, count int32, validateOnly bool) error {
	img := b.meta.Image()
	t, ok := img.Topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	cur := int32(len(t.Partitions))
	if count <= cur || count > MaxPartitionsPerTopic {
		return kerr.InvalidPartitions
	}
	if validateOnly {
		return nil
	}
	var grown *metadata.Topic
	err := b.meta.Update(func(im *metadata.Image) error {
		t, ok := im.Topics[name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		if int32(len(t.Partitions)) != cur {
			return kerr.InvalidPartitions
		}
		for i := cur; i < count; i++ {
			t.Partitions = append(t.Partitions, b.newPartitionMeta(i))
		}
		grown = t.Clone()
		return nil
	})
	if err != nil {
		return err
	}
	for _, mp := range grown.Partitions[cur:] {
		if _, err := b.openPartition(grown, mp); err != nil {
			return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
		}
	}
	return nil
}

// ConfigOp is one change to a topic config (IncrementalAlterConfigs).
type ConfigOp struct {
	Name  string
	Op    int8 // 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
	Value string
}

// AlterTopicConfigs changes a topic's configs. With replace set (legacy
// AlterConfigs) the ops' SET values replace every explicitly set config.
func (b *Broker) AlterTopicConfigs(name string, ops []ConfigOp, replace, validateOnly bool) error {
	img := b.meta.Image()
	t, ok := img.Topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	next := map[string]string{}
	if !replace {
		for k, v := range t.Configs {
			next[k] = v
		}
	}
	for _, op := range ops {
		d, ok := config.LookupTopicDef(op.Name)
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
		}
		switch op.Op {
		case 0:
			if err := d.Validate(op.Value); err != nil {
				return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
			}
			next[op.Name] = op.Value
		case 1:
			delete(next, op.Name)
		case 2, 3:
			if d.Type != config.TypeList {
				return fmt.Errorf("%w: %s is not a list", kerr.InvalidConfig, op.Name)
			}
			next[op.Name] = applyListOp(next[op.Name], op)
		default:
			return kerr.InvalidRequest
		}
	}
	if validateOnly {
		return nil
	}
	var updated *metadata.Topic
	err := b.meta.Update(func(im *metadata.Image) error {
		t, ok := im.Topics[name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		t.Configs = next
		updated = t.Clone()
		return nil
	})
	if err != nil {
		return err
	}
	sc := b.storageConfig(updated)
	for _, mp := range updated.Partitions {
		if p, err := b.Partition(name, mp.Index); err == nil {
			p.log.SetConfig(sc)
		}
	}
	return nil
}

func applyListOp(cur string, op ConfigOp) string {
	var items []string
	if cur != "" {
		items = splitComma(cur)
	}
	add := splitComma(op.Value)
	if op.Op == 2 {
		for _, a := range add {
			if !contains(items, a) {
				items = append(items, a)
			}
		}
	} else {
		var kept []string
		for _, it := range items {
			if !contains(add, it) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	out := ""
	for i, it := range items {
		if i > 0 {
			out += ","
		}
		out += it
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// AllocateProducerID hands out a new producer id, durably (InitProducerId).
func (b *Broker) AllocateProducerID() (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	var id int64
	err := b.meta.Update(func(im *metadata.Image) error {
		id = im.NextProducerID
		im.NextProducerID++
		return nil
	})
	return id, err
}

// retentionLoop applies retention.ms / retention.bytes every
// log.retention.check.interval.ms.
func (b *Broker) retentionLoop() {
	defer b.wg.Done()
	every := time.Duration(b.cfg.Int("log.retention.check.interval.ms", 300000)) * time.Millisecond
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.closing:
			return
		case <-t.C:
		}
		b.mu.RLock()
		parts := make([]*Partition, 0, len(b.parts))
		for _, p := range b.parts {
			parts = append(parts, p)
		}
		b.mu.RUnlock()
		for _, p := range parts {
			if n, err := p.log.ApplyRetention(b.now(), p.HighWatermark()); err != nil {
				b.log.Warn("retention", "topic", p.Topic, "partition", p.Partition, "err", err)
			} else if n > 0 {
				p.wake()
			}
		}
	}
}

// Close flushes and closes every partition.
func (b *Broker) Close() error {
	select {
	case <-b.closing:
		return nil
	default:
	}
	close(b.closing)
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for tp, p := range b.parts {
		if err := p.log.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(b.parts, tp)
	}
	return errors.Join(errs...)
}
