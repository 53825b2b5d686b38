package testcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// PartitionMeta is one partition as a node's Metadata reports it (ISR
// sorted).
type PartitionMeta struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Err         int16
}

// String formats the partition for test logs.
func (m PartitionMeta) String() string {
	return fmt.Sprintf("leader=%d epoch=%d replicas=%v isr=%v err=%d", m.Leader, m.LeaderEpoch, m.Replicas, m.ISR, m.Err)
}

// PartitionsFrom asks one node (by Kafka address, without retries) for a
// topic's partitions; a topic-level error is returned as an error.
func PartitionsFrom(ctx context.Context, addr, topic string) (map[int32]PartitionMeta, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]PartitionMeta{}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("topic %s: error code %d", topic, t.ErrorCode)
		}
		for _, p := range t.Partitions {
			isr := slices.Clone(p.ISR)
			slices.Sort(isr)
			out[p.Partition] = PartitionMeta{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: isr, Err: p.ErrorCode}
		}
	}
	return out, nil
}

// Meta asks the nodes that are Up, in order, for the topic's partitions
// and returns the first answer.
func (c *Cluster) Meta(topic string) (map[int32]PartitionMeta, error) {
	var lastErr error
	for _, p := range c.upNodes() {
		m, err := nodePartitions(p, topic)
		if err == nil {
			return m, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no node answered Metadata: %v", lastErr)
}

// MetaAll asks every node that is Up for the topic's partitions (node id
// -> partition -> metadata); it fails if any of them does not answer.
func (c *Cluster) MetaAll(topic string) (map[int32]map[int32]PartitionMeta, error) {
	out := map[int32]map[int32]PartitionMeta{}
	for _, p := range c.upNodes() {
		m, err := nodePartitions(p, topic)
		if err != nil {
			return nil, fmt.Errorf("node %d: %v", p.NodeID(), err)
		}
		out[int32(p.NodeID())] = m
	}
	return out, nil
}

// nodePartitions is PartitionsFrom the node, waiting at most 2 s.
func nodePartitions(p *testproc.Proc, topic string) (map[int32]PartitionMeta, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return PartitionsFrom(ctx, p.Addr(), topic)
}

// CreateTopic creates a topic with CreateTopics (partitions and
// replication factor rf, or the manual assignment, partition i on
// assign[i], if assign is non-nil) and the given configs, and waits (up to
// 30 s) until WaitTopicReady holds. Right after startup it retries
// INVALID_REPLICATION_FACTOR: Metadata lists registered brokers even while
// they are still fenced, so placement may briefly see fewer active brokers.
func (c *Cluster) CreateTopic(topic string, partitions int32, rf int16, configs map[string]string, assign [][]int32) {
	c.t.Helper()
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	if assign != nil {
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		for i, a := range assign {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition = int32(i)
			ra.Replicas = a
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
	}
	for k, v := range configs {
		cf := kmsg.NewCreateTopicsRequestTopicConfig()
		cf.Name = k
		cf.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cf)
	}
	req.Topics = append(req.Topics, rt)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			c.t.Fatalf("CreateTopics %s: %v", topic, err)
		}
		ec := resp.Topics[0].ErrorCode
		if ec == 0 {
			break
		}
		if ec == kerr.InvalidReplicationFactor.Code && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = *m
		}
		c.t.Fatalf("CreateTopics %s: %v (%s)", topic, kerr.ErrorForCode(ec), msg)
	}
	n := int(partitions)
	if assign != nil {
		n = len(assign)
	}
	c.WaitTopicReady(topic, n, 30*time.Second)
}

// WaitTopicReady waits until every node that is Up reports the topic with
// n partitions (if n < 1: any number but at least one), each with a leader
// and every replica in the ISR.
func (c *Cluster) WaitTopicReady(topic string, n int, timeout time.Duration) {
	c.t.Helper()
	WaitFor(c.t, timeout, "topic "+topic+" ready on every node", func() (bool, string) {
		all, err := c.MetaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		for id, m := range all {
			if len(m) == 0 || (n > 0 && len(m) != n) {
				return false, fmt.Sprintf("node %d: %d partitions", id, len(m))
			}
			for p, pm := range m {
				if pm.Err != 0 || pm.Leader < 0 || len(pm.ISR) != len(pm.Replicas) {
					return false, fmt.Sprintf("node %d: partition %d: %v", id, p, pm)
				}
			}
		}
		return true, ""
	})
}
