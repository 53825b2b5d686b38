package group

// The records sluice writes to __consumer_offsets use Kafka's formats, so a
// Kafka tool reading the topic (kafka-console-consumer with the offsets
// formatter, kcat, kadm) understands them:
//
//	OffsetCommitKey v1    (group, topic, partition) -> OffsetCommitValue v3
//	GroupMetadataKey v2   (group)                   -> GroupMetadataValue v3
//
// A null value is a tombstone: the offset, or the group's membership
// metadata, is deleted. Keys of versions 3 to 8 and 16 are KIP-848
// consumer-group records (internal/group/consumer); other versions are
// skipped when loading.

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/group/consumer"
	sharegroup "github.com/sluice-io/sluice/internal/group/share"
)

// OffsetsTopic is the internal topic holding committed offsets and group
// metadata.
const OffsetsTopic = "__consumer_offsets"

// javaStringHash is Java's String.hashCode over the UTF-16 code units of s.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// PartitionFor returns the __consumer_offsets partition that holds group,
// as Kafka computes it: Utils.abs(groupId.hashCode) % numPartitions, where
// Utils.abs maps Integer.MIN_VALUE to 0.
func PartitionFor(group string, numPartitions int32) int32 {
	h := javaStringHash(group)
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % numPartitions
}

// record is one key/value to write; a nil value is a tombstone.
type record struct {
	key, value []byte
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version = 1
	k.Group, k.Topic, k.Partition = group, topic, partition
	return k.AppendTo(nil)
}

func offsetRecord(group string, tp TopicPartition, o Offset) record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = 3
	v.Offset = o.Offset
	v.LeaderEpoch = o.LeaderEpoch
	v.Metadata = o.Metadata
	v.CommitTimestamp = o.CommitTime.UnixMilli()
	return record{key: offsetKey(group, tp.Topic, tp.Partition), value: v.AppendTo(nil)}
}

func offsetTombstone(group string, tp TopicPartition) record {
	return record{key: offsetKey(group, tp.Topic, tp.Partition)}
}

func groupKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version = 2
	k.Group = group
	return k.AppendTo(nil)
}

func groupTombstone(group string) record { return record{key: groupKey(group)} }

// groupRecord encodes g's membership as GroupMetadataValue v3. assignment,
// if not nil, replaces the members' current assignments (the leader's
// SyncGroup is stored before it is applied).
func groupRecord(g *Group, assignment map[string][]byte) record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID, vm.ClientHost = m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		if assignment != nil {
			vm.Assignment = assignment[m.id]
		}
		v.Members = append(v.Members, vm)
	}
	return record{key: groupKey(g.id), value: v.AppendTo(nil)}
}

// encodeBatch builds one uncompressed v2 record batch holding recs, as a
// non-idempotent producer would (the log assigns the offsets).
func encodeBatch(recs []record, now time.Time) []byte {
	return encodeBatchAs(recs, now, -1, -1, 0)
}

// encodeTxnBatch builds the batch of a TxnOffsetCommit: transactional,
// with the transaction's producer id and epoch and no sequence (the
// partition checks the epoch only, as for Kafka's coordinator appends).
func encodeTxnBatch(recs []record, now time.Time, pid int64, epoch int16) []byte {
	return encodeBatchAs(recs, now, pid, epoch, batch.Transactional)
}

func encodeBatchAs(recs []record, now time.Time, pid int64, epoch int16, attrs int16) []byte {
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.key, Value: r.value}
	}
	return batch.Encode(kvs, now.UnixMilli(), batch.Producer{ID: pid, Epoch: epoch, Attrs: attrs})
}

// errBadRecord reports a record of __consumer_offsets that does not parse.
var errBadRecord = errors.New("group: malformed __consumer_offsets record")

// loaded is the state rebuilt from one partition of __consumer_offsets.
type loaded struct {
	offsets map[string]map[TopicPartition]Offset
	groups  map[string]*kmsg.GroupMetadataValue
	// txn holds the offsets of transactional batches whose marker has not
	// been read yet: by producer id, then group.
	txn map[int64]map[string]map[TopicPartition]Offset
	// consumers holds the KIP-848 consumer groups replayed (key
	// versions 3 to 8 and 16).
	consumers *consumer.Manager
	// shares holds the KIP-932 share groups replayed (key versions 9
	// to 15).
	shares *sharegroup.Manager
}

func newLoaded() *loaded {
	return &loaded{offsets: map[string]map[TopicPartition]Offset{}, groups: map[string]*kmsg.GroupMetadataValue{},
		txn: map[int64]map[string]map[TopicPartition]Offset{}, consumers: consumer.NewManager(consumer.Config{}),
		shares: sharegroup.NewManager(sharegroup.Config{})}
}

// apply replays one record found at log offset at, written by producer
// pid in a transactional batch (-1: an ordinary one). Unknown key versions
// are skipped; malformed known ones return errBadRecord.
func (l *loaded) apply(key, value []byte, at, pid int64) error {
	if len(key) < 2 {
		return errBadRecord
	}
	switch version := int16(binary.BigEndian.Uint16(key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return errBadRecord
		}
		tp := TopicPartition{k.Topic, k.Partition}
		if value == nil {
			if pid >= 0 {
				delete(l.txn[pid][k.Group], tp)
				return nil
			}
			// A deletion also drops the group's pending transactional
			// offsets of the partition (Kafka's OffsetMetadataManager).
			delete(l.offsets[k.Group], tp)
			for _, byGroup := range l.txn {
				delete(byGroup[k.Group], tp)
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return errBadRecord
		}
		var m map[TopicPartition]Offset
		if pid >= 0 {
			byGroup := l.txn[pid]
			if byGroup == nil {
				byGroup = map[string]map[TopicPartition]Offset{}
				l.txn[pid] = byGroup
			}
			if m = byGroup[k.Group]; m == nil {
				m = map[TopicPartition]Offset{}
				byGroup[k.Group] = m
			}
		} else if m = l.offsets[k.Group]; m == nil {
			m = map[TopicPartition]Offset{}
			l.offsets[k.Group] = m
		}
		epoch := v.LeaderEpoch
		if v.Version < 3 {
			epoch = -1
		}
		m[tp] = Offset{Offset: v.Offset, LeaderEpoch: epoch, Metadata: v.Metadata,
			CommitTime: time.UnixMilli(v.CommitTimestamp), logOffset: at}
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return errBadRecord
		}
		if value == nil {
			delete(l.groups, k.Group)
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			return errBadRecord
		}
		l.groups[k.Group] = &v
	case consumer.TypeGroupMetadata, consumer.TypePartitionMetadata, consumer.TypeMemberMetadata,
		consumer.TypeTargetAssignmentMetadata, consumer.TypeTargetAssignmentMember,
		consumer.TypeCurrentMemberAssignment, consumer.TypeRegularExpression:
		if err := l.consumers.ReplayEncoded(key, value); err != nil {
			return errBadRecord
		}
	case sharegroup.TypeLegacyPartitionMetadata, sharegroup.TypeMemberMetadata, sharegroup.TypeGroupMetadata,
		sharegroup.TypeTargetAssignmentMetadata, sharegroup.TypeTargetAssignmentMember,
		sharegroup.TypeCurrentMemberAssignment, sharegroup.TypeStatePartitionMetadata:
		if err := l.shares.ReplayEncoded(key, value); err != nil {
			return errBadRecord
		}
	}
	return nil
}

// decodeBatches replays every record of data (whole v2 batches) into l.
// Values are copied: they outlive the read buffer.
func (l *loaded) decodeBatches(data []byte) (next int64, err error) {
	next = -1
	for len(data) > 0 {
		h, b, rest, err := batch.Next(data)
		if err != nil {
			return next, err
		}
		data = rest
		next = h.NextOffset()
		if h.IsControl() {
			// A transaction marker ends producer pid's transaction; other
			// control batches carry nothing for the coordinator.
			if m, err := batch.ParseMarker(b); err == nil {
				l.endTxn(h.ProducerID, m.Commit)
			}
			continue
		}
		pid := int64(-1)
		if h.IsTransactional() {
			pid = h.ProducerID
		}
		var applyErr error
		err = batch.Records(b, func(r batch.Record) bool {
			var value []byte
			if r.Value != nil {
				value = append([]byte{}, r.Value...)
			}
			applyErr = l.apply(append([]byte{}, r.Key...), value, h.BaseOffset+int64(r.OffsetDelta), pid)
			return applyErr == nil
		})
		if err == nil {
			err = applyErr
		}
		if err != nil {
			return next, err
		}
	}
	return next, nil
}

// endTxn replays a transaction marker of producer pid: on commit its
// pending offsets become the committed ones unless a later record (a
// higher log offset) already replaced them, as Kafka's loader keeps the
// newer of the two; on abort they are dropped.
func (l *loaded) endTxn(pid int64, commit bool) {
	byGroup := l.txn[pid]
	delete(l.txn, pid)
	if !commit {
		return
	}
	for group, offs := range byGroup {
		m := l.offsets[group]
		for tp, o := range offs {
			if cur, ok := m[tp]; ok && cur.logOffset > o.logOffset {
				continue
			}
			if m == nil {
				m = map[TopicPartition]Offset{}
				l.offsets[group] = m
			}
			m[tp] = o
		}
	}
}
