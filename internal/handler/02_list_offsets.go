package handler

// ListOffsets, versions 1-10.
//
// Timestamp -1 (latest) is the high watermark for consumers (the last
// stable offset under READ_COMMITTED, KIP-98; the LEO for a
// replica), -2 (earliest) the log start offset, -3 (max timestamp, v7) the
// first record holding the largest timestamp in the local log; any other
// value finds the first record whose timestamp is at or above it, below
// the high watermark, or -1/-1 if there is none. CurrentLeaderEpoch (v4+)
// is fenced as in Fetch.
//
// Tiered storage (KIP-405; docs/tiered-storage.md, "Reads"): -2 is the
// log start of the whole log, remote part included; -4 (earliest local,
// v8) the local log start; -5 (latest tiered, v9, KIP-1005) the highest
// offset in the remote log, -1 with epoch -1 when nothing is there or the
// topic has no remote storage (Kafka's UnifiedLog.fetchOffsetByTimestamp).
// A timestamp lookup on a partition whose log start is below its local
// log start searches the remote log first (its time and offset indexes,
// remote.Reader.OffsetForTimestamp), then the local one; the response is
// built in Reply.Await then, off the connection's reader, bounded by the
// request's TimeoutMs (v10, KIP-1075), else
// remote.list.offsets.request.timeout.ms: a lookup not done by then
// answers REQUEST_TIMED_OUT (Kafka's DelayedRemoteListOffsets expiring),
// a failed one UNKNOWN_SERVER_ERROR. v11's -6 (earliest pending upload)
// is not served.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) listOffsets(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	if h.needsRemoteLookup(req) {
		lookup := h.b.LookupDeadline()
		return protocol.Reply{Await: func() kmsg.Response { return h.answerListOffsets(r, req, lookup) }}
	}
	return protocol.Reply{Resp: h.answerListOffsets(r, req, h.b.LookupDeadline())}
}

// answerListOffsets builds the response to req.
func (h *Handlers) answerListOffsets(r *protocol.Request, req *kmsg.ListOffsetsRequest, lookup time.Time) kmsg.Response {
	timeout := time.Duration(h.b.Config().Int("remote.list.offsets.request.timeout.ms", 30000)) * time.Millisecond
	if req.Version >= 10 && req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	rctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
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
				h.listOffset(rctx, p, req.Version, req.ReplicaID, req.IsolationLevel == 1, &rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (h *Handlers) listOffset(rctx context.Context, p *broker.Partition, version int16, replicaID int32, readCommitted bool, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
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
	case -4:
		sp.Offset = log.LocalLogStartOffset()
		sp.LeaderEpoch = epochOf(sp.Offset)
	case -5:
		sp.Offset, sp.LeaderEpoch = -1, -1
		if rr := h.b.RemoteReader(); rr != nil && p.RemoteStorage() {
			if sp.Offset = rr.HighestOffset(p.RemotePartition()); sp.Offset >= 0 {
				sp.LeaderEpoch = epochOf(sp.Offset)
			}
		}
	default:
		var off, ts int64
		var ok, remoteErr bool
		var err error
		switch {
		case rp.Timestamp == -3:
			off, ts, ok, err = log.MaxTimestamp()
		case tiered(h, p):
			off, ts, ok, err = h.remoteOffsetForTimestamp(rctx, p, rp.Timestamp)
			remoteErr = err != nil
			if err == nil && !ok {
				off, ts, ok, err = log.OffsetForTimestamp(rp.Timestamp)
			}
		default:
			off, ts, ok, err = log.OffsetForTimestamp(rp.Timestamp)
		}
		switch {
		case remoteErr && errors.Is(err, context.DeadlineExceeded):
			sp.ErrorCode = kerr.RequestTimedOut.Code
		case remoteErr:
			h.b.Logger().Warn("remote log timestamp lookup failed", "topic", p.Topic, "partition", p.TP.Partition, "err", err)
			sp.ErrorCode = kerr.UnknownServerError.Code
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

// tiered reports whether p's log starts in the remote log (a timestamp
// lookup searches it first).
func tiered(h *Handlers, p *broker.Partition) bool {
	return h.b.RemoteReader() != nil && p.RemoteStorage() && p.Log().LogStartOffset() < p.Log().LocalLogStartOffset()
}

// needsRemoteLookup reports whether req has a timestamp lookup on a
// partition led here whose log starts in the remote log.
func (h *Handlers) needsRemoteLookup(req *kmsg.ListOffsetsRequest) bool {
	if h.b.RemoteReader() == nil {
		return false
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if rp.Timestamp < 0 {
				continue
			}
			if p, err := h.b.Leader(rt.Topic, rp.Partition); err == nil && tiered(h, p) {
				return true
			}
		}
	}
	return false
}

// remoteOffsetForTimestamp searches p's remote log for the first record
// at or after the log start with a timestamp at least ts (Kafka's
// RemoteLogManager.findOffsetByTimestamp), within ctx.
func (h *Handlers) remoteOffsetForTimestamp(ctx context.Context, p *broker.Partition, ts int64) (int64, int64, bool, error) {
	log := p.Log()
	return h.b.RemoteReader().OffsetForTimestamp(ctx, p.RemotePartition(), log.EpochEntries(), ts, log.LogStartOffset())
}
