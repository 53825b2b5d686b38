package handler

// ListOffsets, versions 1-7.
//
// Timestamp -1 (latest) is the high watermark for consumers (the last
// stable offset under READ_COMMITTED, KIP-98; the LEO for a
// replica), -2 (earliest) the log start offset, -3 (max timestamp, v7) the
// first record holding the largest timestamp; any other value finds the
// first record whose timestamp is at or above it, below the high watermark,
// or -1/-1 if there is none. CurrentLeaderEpoch (v4+) is fenced as in Fetch.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) listOffsets(r *protocol.Request) protocol.Reply {
	lookup := h.b.LookupDeadline()
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		// DESCRIBE on the topic (KafkaApis.handleListOffsetRequest).
		describable := h.allowedTopic(r, rt.Topic, acl.OpDescribe)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if !describable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := h.b.LeaderBy(rt.Topic, rp.Partition, lookup)
			if err != nil {
				sp.ErrorCode = code(err)
			} else {
				h.listOffset(p, req.Version, req.ReplicaID, req.IsolationLevel == 1, &rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}

func (h *Handlers) listOffset(p *broker.Partition, version int16, replicaID int32, readCommitted bool, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
	le := p.LeaderEpoch()
	if rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch != le {
		if rp.CurrentLeaderEpoch < le {
			sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		} else {
			sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		}
		return
	}
	log := p.Log()
	limit := p.HighWatermark()
	switch {
	case replicaID >= 0:
		limit = log.LogEndOffset()
	case readCommitted:
		// READ_COMMITTED sees up to the last stable offset (KIP-98).
		limit = p.LastStableOffset()
	}
	epochOf := func(off int64) int32 {
		return epoch.New(log.EpochEntries()).EpochFor(off)
	}
	sp.Timestamp = -1
	switch rp.Timestamp {
	case -1:
		if replicaID < 0 && version >= 5 && p.EpochStart() > limit {
			// A new leader whose HW has not caught up to its epoch start
			// would report an offset that goes backwards (KIP-207).
			sp.ErrorCode = kerr.OffsetNotAvailable.Code
			return
		}
		sp.Offset = limit
		sp.LeaderEpoch = epochOf(limit - 1)
	case -2:
		sp.Offset = log.LogStartOffset()
		sp.LeaderEpoch = epochOf(sp.Offset)
	default:
		var off, ts int64
		var ok bool
		var err error
		if rp.Timestamp == -3 {
			off, ts, ok, err = log.MaxTimestamp()
		} else {
			off, ts, ok, err = log.OffsetForTimestamp(rp.Timestamp)
		}
		switch {
		case err != nil:
			sp.ErrorCode = kerr.KafkaStorageError.Code
		case !ok || off >= limit:
			sp.Offset = -1
		default:
			sp.Offset, sp.Timestamp = off, ts
			sp.LeaderEpoch = epochOf(off)
		}
	}
	if rp.MaxNumOffsets > 0 && sp.ErrorCode == 0 {
		sp.OldStyleOffsets = []int64{sp.Offset}
	}
}
