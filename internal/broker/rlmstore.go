package broker

// The remote log metadata store: Kafka's TopicBasedRemoteLogMetadataManager
// on sluice's own replication. Records (remote.EncodeSegment, ...) are
// written to the internal topic __remote_log_metadata, in the partition
// Kafka's RemoteLogMetadataTopicPartitioner picks for the user partition,
// with acks=all: through the local replica when this node leads that
// partition, else as a Produce to its leader over the inter-broker
// listener (Broker.Peer). Every broker rebuilds the state of the
// partitions it hosts (remote.Cache, Kafka's RemoteLogMetadataCache) by
// reading the metadata partitions that hold them up to their high
// watermark: from the local log when it leads the metadata partition, else
// with a Fetch from its leader (Kafka's ConsumerTask reads them with a
// consumer). A read up to the leader's high watermark sees every record
// whose acks=all write was answered, so a new leader that syncs before
// acting continues where the old one stopped.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/replica"
)

// remoteMeta is the broker's remote log metadata store.
type remoteMeta struct {
	b     *Broker
	cache remote.Cache
	// syncMu serializes reads of the metadata partitions; next is, per
	// metadata partition, the offset the next read starts at (syncMu).
	syncMu sync.Mutex
	next   map[int32]int64
	// read holds the metadata partitions read up to their high watermark
	// at least once since the broker started (readMu): the cache holds
	// their partitions' remote logs (isRead).
	readMu sync.Mutex
	read   map[int32]bool
}

func newRemoteMeta(b *Broker) *remoteMeta {
	return &remoteMeta{b: b, next: map[int32]int64{}, read: map[int32]bool{}}
}

// numPartitions is the metadata topic's partition count: the topic's if
// it exists, else the configured one (default 50).
func (m *remoteMeta) numPartitions() int32 {
	if t := m.b.Image().Topics[remote.MetadataTopic]; t != nil && len(t.Partitions) > 0 {
		return int32(len(t.Partitions))
	}
	n, _, _ := m.b.cfg.RemoteLogMetadataTopic()
	return max(n, 1)
}

// ensureTopic creates __remote_log_metadata if it does not exist: the
// configured partitions, replication factor 3 capped by the brokers
// registered, retention.ms remote.log.metadata.topic.retention.ms (-1,
// unlimited; config.Broker.RemoteLogMetadataTopic), as
// Kafka's TopicBasedRemoteLogMetadataManager.createTopic.
func (m *remoteMeta) ensureTopic() error {
	im := m.b.Image()
	if im.Topics[remote.MetadataTopic] != nil {
		return nil
	}
	_, rf, retention := m.b.cfg.RemoteLogMetadataTopic()
	rf = int16(max(min(int(rf), len(im.Brokers)), 1))
	configs := map[string]string{"cleanup.policy": "delete", "retention.bytes": "-1",
		"retention.ms": strconv.FormatInt(retention, 10)}
	err := m.b.CreateTopic(remote.MetadataTopic, m.numPartitions(), rf, configs, false)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", remote.MetadataTopic, err)
	}
	return nil
}

// metaPartition returns the metadata partition of p and its leader.
func (m *remoteMeta) metaPartition(p remote.Partition) (int32, int32, error) {
	t := m.b.Image().Topics[remote.MetadataTopic]
	if t == nil || len(t.Partitions) == 0 {
		return 0, -1, fmt.Errorf("%s: %w", remote.MetadataTopic, kerr.UnknownTopicOrPartition)
	}
	mp := remote.MetadataPartition(p, int32(len(t.Partitions)))
	leader := t.Partitions[mp].Leader
	if leader < 0 {
		return mp, -1, fmt.Errorf("%s-%d: %w", remote.MetadataTopic, mp, kerr.LeaderNotAvailable)
	}
	return mp, leader, nil
}

// publish writes one record for p with acks=all and returns once it is
// committed; the caller then syncs to see it applied.
func (m *remoteMeta) publish(ctx context.Context, p remote.Partition, value []byte) error {
	mp, leader, err := m.metaPartition(p)
	if err != nil {
		return err
	}
	data := batch.Encode([]batch.KV{{Value: value}}, m.b.now().UnixMilli(), batch.NoProducer)
	deadline, ok := ctx.Deadline()
	switch {
	case m.b.steps:
		deadline = m.b.now().Add(stepOpTime)
	case !ok:
		deadline = m.b.now().Add(30 * time.Second)
	}
	if leader == m.b.cfg.NodeID {
		part, err := m.b.Leader(remote.MetadataTopic, mp)
		if err != nil {
			return err
		}
		h, err := batch.ParseHeader(data)
		if err != nil {
			return err
		}
		ch := part.Produce(data, h, replica.AcksAll, deadline)
		if m.b.steps {
			// Step mode: the pass waits for the followers' fetch steps
			// (rlmstep.go).
			var res replica.ProduceResult
			if !m.b.rlm.stepWait(func() bool {
				select {
				case res = <-ch:
					return true
				default:
					return false
				}
			}) {
				return errStepStopped
			}
			if res.Error != 0 {
				return kerr.ErrorForCode(res.Error)
			}
			return nil
		}
		select {
		case res := <-ch:
			if res.Error != 0 {
				return kerr.ErrorForCode(res.Error)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cl, err := m.b.Peer(leader, "sluice-remote-log-metadata")
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(8)
	req.Acks = -1
	req.TimeoutMillis = int32(min(deadline.Sub(m.b.now()), 30*time.Second).Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = remote.MetadataTopic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = mp, data
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return fmt.Errorf("produce to %s-%d: malformed response", remote.MetadataTopic, mp)
	}
	return kerr.ErrorForCode(pr.Topics[0].Partitions[0].ErrorCode)
}

// sync reads the metadata partitions of ps up to their leaders' high
// watermarks and applies their records to the cache.
func (m *remoteMeta) sync(ctx context.Context, ps ...remote.Partition) error {
	t := m.b.Image().Topics[remote.MetadataTopic]
	if t == nil || len(t.Partitions) == 0 {
		return nil // nothing written yet
	}
	done := map[int32]bool{}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	for _, p := range ps {
		mp := remote.MetadataPartition(p, int32(len(t.Partitions)))
		if done[mp] {
			continue
		}
		done[mp] = true
		if err := m.syncPartition(ctx, t, mp); err != nil {
			return err
		}
	}
	return nil
}

// syncPartition reads metadata partition mp from m.next[mp] to its high
// watermark (syncMu held).
func (m *remoteMeta) syncPartition(ctx context.Context, t *metadata.Topic, mp int32) error {
	for {
		leader := t.Partitions[mp].Leader
		from := m.next[mp]
		var data []byte
		var hw int64
		var err error
		if leader == m.b.cfg.NodeID {
			data, hw, err = m.readLocal(mp, from)
		} else if leader >= 0 {
			data, hw, err = m.fetch(ctx, leader, mp, from)
		} else {
			err = kerr.LeaderNotAvailable
		}
		if err != nil {
			return fmt.Errorf("reading %s-%d: %w", remote.MetadataTopic, mp, err)
		}
		next, err := m.apply(mp, data, from, hw)
		if err != nil {
			return err
		}
		m.next[mp] = next
		if next >= hw || next == from {
			m.readMu.Lock()
			m.read[mp] = true
			m.readMu.Unlock()
			return nil
		}
	}
}

// isRead reports whether the cache holds p's remote log: the metadata
// partition of p was read up to its high watermark since the broker
// started, or there is no metadata topic (nothing was ever copied).
// Kafka's RemotePartitionMetadataStore answers a read of a partition
// whose metadata it has not loaded with ReplicaNotAvailableException
// ("Remote log metadata cache is not initialized").
func (m *remoteMeta) isRead(p remote.Partition) bool {
	t := m.b.Image().Topics[remote.MetadataTopic]
	if t == nil || len(t.Partitions) == 0 {
		return true
	}
	mp := remote.MetadataPartition(p, int32(len(t.Partitions)))
	m.readMu.Lock()
	defer m.readMu.Unlock()
	return m.read[mp]
}

// readLocal reads the leader's own replica of mp from offset from, below
// its high watermark.
func (m *remoteMeta) readLocal(mp int32, from int64) ([]byte, int64, error) {
	part, err := m.b.Leader(remote.MetadataTopic, mp)
	if err != nil {
		return nil, 0, err
	}
	hw := part.HighWatermark()
	if from >= hw {
		return nil, hw, nil
	}
	from = max(from, part.LogStartOffset())
	sl, err := part.Log().Read(from, 1<<20, hw)
	if err != nil {
		return nil, 0, err
	}
	data, err := sl.AppendTo(nil)
	return data, hw, err
}

// fetch reads mp from offset from at its leader (a consumer's Fetch v12,
// read_uncommitted: the records below the high watermark).
func (m *remoteMeta) fetch(ctx context.Context, leader, mp int32, from int64) ([]byte, int64, error) {
	cl, err := m.b.Peer(leader, "sluice-remote-log-metadata")
	if err != nil {
		return nil, 0, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = remote.MetadataTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = mp, from, 1<<20
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return nil, 0, kerr.ErrorForCode(fr.ErrorCode)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return nil, 0, errors.New("malformed fetch response")
	}
	fp := fr.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 {
		return nil, 0, kerr.ErrorForCode(fp.ErrorCode)
	}
	return fp.RecordBatches, fp.HighWatermark, nil
}

// apply applies the records of the batches in data from offset from up
// to hw and returns the offset after the last whole batch read.
func (m *remoteMeta) apply(mp int32, data []byte, from, hw int64) (int64, error) {
	next := from
	for len(data) > 0 {
		h, b, rest, err := batch.Next(data)
		if err != nil {
			break // a partial batch at the end of a fetch
		}
		data = rest
		if h.BaseOffset >= hw {
			break
		}
		if h.NextOffset() <= next {
			continue
		}
		if !h.IsControl() {
			err := batch.Records(b, func(r batch.Record) bool {
				off := h.BaseOffset + int64(r.OffsetDelta)
				if off < next {
					return true
				}
				rec, err := remote.Decode(r.Value)
				if err == nil {
					err = m.cache.Apply(rec)
				}
				if err != nil {
					// Kafka's ConsumerTask logs a record it cannot
					// apply and goes on.
					m.b.log.Warn("remote log metadata record not applied", "partition", remote.MetadataTopic+"-"+strconv.Itoa(int(mp)), "offset", off, "err", err)
				}
				return true
			})
			if err != nil {
				return next, fmt.Errorf("%s at %d: %w", remote.MetadataTopic, h.BaseOffset, err)
			}
		}
		next = h.NextOffset()
	}
	return next, nil
}
