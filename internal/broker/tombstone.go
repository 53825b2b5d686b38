package broker

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchTagTombstoneBound is the tag of a sluice-only tagged field (KIP-482)
// in a Fetch v12+ response partition sent to a follower: the leader's
// tombstone bound (replica.Replica.TombstoneBound) as an unsigned varint.
// A follower's cleaner removes tombstones only below it; Kafka clients and
// brokers skip a tag they do not know, and a follower that receives none
// keeps its tombstones (docs/compaction.md, "Tombstones and lagging
// replicas").
const FetchTagTombstoneBound = 0x51ce

// SetTombstoneBoundTag adds the tombstone bound to a follower's answer.
func SetTombstoneBoundTag(sp *kmsg.FetchResponseTopicPartition, bound int64) {
	sp.UnknownTags.Set(FetchTagTombstoneBound, binary.AppendUvarint(nil, uint64(max(bound, 0))))
}

// TombstoneBoundTag reads the tombstone bound of a leader's answer: 0 when
// absent or malformed (then nothing may be removed).
func TombstoneBoundTag(sp *kmsg.FetchResponseTopicPartition) int64 {
	var bound int64
	sp.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != FetchTagTombstoneBound {
			return
		}
		if v, n := binary.Uvarint(val); n == len(val) && v <= 1<<62 {
			bound = int64(v)
		}
	})
	return bound
}
