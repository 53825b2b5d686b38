package broker

// The deletion of a deleted topic's remote log (Kafka's
// RemoteLogManager.deleteRemoteLogPartition, with the metadata's
// RemotePartitionDeleteMetadata DELETE_PARTITION_* states): by the
// broker that led the partition when the topic went, or, if it was down
// then, once it comes back and finds the partition's directory.

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
)

// deleteRemoteLog deletes the remote log of p, a tiered partition this
// broker led, if its topic is gone from im (deleted, or recreated under
// the same name): in the background, RemotePartitionDeleteMetadata
// DELETE_PARTITION_MARKED and STARTED, every object under the partition's
// prefix, then DELETE_PARTITION_FINISHED (Kafka's
// RemoteLogManager.deleteRemoteLogPartition on the leader when a topic is
// deleted). A partition moved to other brokers keeps its remote log.
func (b *Broker) deleteRemoteLog(im *metadata.Image, p *Partition) {
	if b.rlm == nil || !p.log.Config().RemoteStorage {
		return
	}
	if t := im.Topics[p.Topic]; t != nil && t.ID == p.topicID {
		return
	}
	metrics.ForgetRemoteTopic(p.Topic)
	tp := p.TP
	b.deleteRemoteLogAsync(remotePartition(p), &tp, false)
}

// deleteStrayRemoteLog deletes the remote log, if it has one, of a
// partition of a topic deleted while this broker was away (its stray
// directory names topic id id, which the metadata no longer has): nobody
// else may have, since the deleted topic's leader was this broker, down
// when the topic went.
func (b *Broker) deleteStrayRemoteLog(topic string, id metadata.UUID, partition int32) {
	if b.rlm == nil {
		return
	}
	b.deleteRemoteLogAsync(remote.Partition{TopicID: id, Topic: topic, Partition: partition}, nil, true)
}

// deleteRemoteLogAsync deletes rp's remote log in the background, once
// tp's copy task (if tp is set and one is running) has ended, retrying a
// few times. With ifAny, a partition with neither metadata nor objects
// is left alone (no records are written for it).
func (b *Broker) deleteRemoteLogAsync(rp remote.Partition, tp *TP, ifAny bool) {
	b.goBackground(func() {
		r := b.rlm
		// The partition's task, if running, ends at its next check of
		// the leadership (the replica is closed): wait for it, or a copy
		// it finishes would leave objects behind.
		for deadline := b.now().Add(r.opTime); tp != nil && r.taskRunning(*tp) && b.now().Before(deadline); {
			select {
			case <-clock.After(b.clock, 10*time.Millisecond):
			case <-b.closing:
				return
			}
		}
		backoff := r.backoff
		for attempt := 0; ; attempt++ {
			none, err := false, error(nil)
			if ifAny {
				none, err = r.noRemoteLog(rp)
			}
			if err == nil && none {
				return
			}
			if err == nil {
				err = r.deletePartition(rp)
			}
			if err == nil {
				b.log.Info("remote log of a deleted partition deleted", "topic", rp.Topic, "partition", rp.Partition)
				// The partition's last task may have counted
				// after the topic went.
				if t := b.Image().Topics[rp.Topic]; t == nil || t.ID != metadata.UUID(rp.TopicID) {
					metrics.ForgetRemoteTopic(rp.Topic)
				}
				return
			}
			if attempt >= 5 || b.ctx.Err() != nil {
				b.log.Warn("deleting the remote log of a deleted partition: giving up, its objects stay", "topic", rp.Topic, "partition", rp.Partition, "err", err)
				return
			}
			select {
			case <-clock.After(b.clock, backoff):
			case <-b.closing:
				return
			}
			backoff = min(2*backoff, r.maxBack)
		}
	})
}

// noRemoteLog reports whether rp has neither remote log metadata nor
// objects.
func (r *rlm) noRemoteLog(rp remote.Partition) (bool, error) {
	ctx, cancel := context.WithTimeout(r.b.ctx, r.opTime)
	defer cancel()
	// Without __remote_log_metadata no segment was ever recorded (sync
	// reads nothing then).
	if err := r.meta.sync(ctx, rp); err != nil {
		return false, err
	}
	if len(r.meta.cache.All(rp)) > 0 {
		return false, nil
	}
	keys, err := r.store.List(ctx, remote.PartitionPrefix(r.prefix, rp))
	return len(keys) == 0, err
}

// taskRunning reports whether tp's task is running.
func (r *rlm) taskRunning(tp TP) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.parts[tp]
	return st != nil && st.running
}

// deletePartition is one attempt at deleting rp's remote log.
func (r *rlm) deletePartition(rp remote.Partition) error {
	ctx, cancel := context.WithTimeout(r.b.ctx, 5*r.opTime)
	defer cancel()
	for _, st := range []remote.PartitionDeleteState{remote.PartitionDeleteMarked, remote.PartitionDeleteStarted} {
		d := remote.PartitionDelete{Partition: rp, BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), State: st}
		if err := r.publish(ctx, rp, remote.EncodePartitionDelete(&d)); err != nil {
			return err
		}
	}
	keys, err := r.store.List(ctx, remote.PartitionPrefix(r.prefix, rp))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := r.store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
	}
	d := remote.PartitionDelete{Partition: rp, BrokerID: r.b.cfg.NodeID, EventTimestamp: r.b.now().UnixMilli(), State: remote.PartitionDeleteFinished}
	if err := r.publish(ctx, rp, remote.EncodePartitionDelete(&d)); err != nil {
		return err
	}
	return r.sync(ctx, rp)
}
