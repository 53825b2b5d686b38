package broker

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pipelined follower fetches (docs/replication.md): a follower may fetch
// again before the records of its last fetch are flushed, telling the
// leader how many offsets below its fetch offset are not flushed yet; the
// leader counts only the rest as acknowledged (replica.FetchRequest.
// Unflushed). Two sluice-only tagged fields (KIP-482) carry it, which
// Kafka clients and brokers skip:
const (
	// FetchTagUnflushed is the tag, in a Fetch v12+ request partition of
	// a follower, of its unflushed offsets below the fetch offset, as an
	// unsigned varint. Absent: zero, everything flushed (a follower that
	// does not pipeline).
	FetchTagUnflushed = 0x51cf
	// FetchTagCountsFlushed is the tag of a Fetch v12+ response to a
	// follower saying the leader honours FetchTagUnflushed (a one-byte
	// value, 1). A follower pipelines only to a leader that said so: one
	// that does not know the tag would count the whole fetch offset as
	// acknowledged.
	FetchTagCountsFlushed = 0x51d0
)

// SetUnflushedTag names a follower's unflushed offsets in its request.
func SetUnflushedTag(rp *kmsg.FetchRequestTopicPartition, unflushed int64) {
	if unflushed > 0 {
		rp.UnknownTags.Set(FetchTagUnflushed, binary.AppendUvarint(nil, uint64(unflushed)))
	}
}

// UnflushedTag reads a follower's unflushed offsets from its request: 0
// when absent. A malformed value counts as everything unflushed (the
// fetch offset), so that nothing is acknowledged on it.
func UnflushedTag(rp *kmsg.FetchRequestTopicPartition) int64 {
	var n int64
	rp.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != FetchTagUnflushed {
			return
		}
		if v, k := binary.Uvarint(val); k == len(val) && v <= 1<<62 {
			n = int64(v)
		} else {
			n = max(rp.FetchOffset, 0)
		}
	})
	return n
}

// SetCountsFlushedTag marks a leader's answer to a follower.
func SetCountsFlushedTag(resp *kmsg.FetchResponse) {
	resp.UnknownTags.Set(FetchTagCountsFlushed, []byte{1})
}

// CountsFlushedTag reports whether a leader's answer carries
// FetchTagCountsFlushed.
func CountsFlushedTag(resp *kmsg.FetchResponse) bool {
	ok := false
	resp.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag == FetchTagCountsFlushed && len(val) == 1 && val[0] == 1 {
			ok = true
		}
	})
	return ok
}
