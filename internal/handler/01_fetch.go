package handler

// Fetch, versions 4-12.
//
// Consumers read up to the high watermark (READ_UNCOMMITTED and, with no
// transactions, READ_COMMITTED alike), never beyond it; followers (ReplicaID
// set) read up to the log end, and their fetch offset is their
// acknowledgement (reference §1.3). Only the leader serves fetches. MaxWaitMs/MinBytes
// long-poll: with fewer than MinBytes readable, the request parks (in
// Reply.Await, so later requests on the connection keep flowing) until a
// partition's high watermark or log start moves, or MaxWaitMs passes.
// MaxBytes and PartitionMaxBytes bound the response, except that the first
// batch of the first non-empty partition is always returned whole (KIP-74).
// CurrentLeaderEpoch is fenced (KIP-320: FENCED_LEADER_EPOCH /
// UNKNOWN_LEADER_EPOCH) and LastFetchedEpoch is checked for divergence
// (DivergingEpoch, reference §3.4).
//
// Fetch sessions (KIP-227): sluice answers every fetch as a full fetch and
// never creates a session (SessionID 0 in the response tells the client so;
// it then keeps sending full fetches). An incremental request for an
// unknown session gets FETCH_SESSION_ID_NOT_FOUND, which makes the client
// fall back to a full fetch. This is the behaviour Kafka shows when its
// session cache is full.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
)

// maxFetchWait caps MaxWaitMillis.
const maxFetchWait = 5 * time.Minute

// defaultFetchMaxBytes applies when a request (v<3) has no MaxBytes.
const defaultFetchMaxBytes = 50 << 20

func (h *Handlers) fetch(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.FetchRequest)
	if req.SessionID != 0 || req.SessionEpoch > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return protocol.Reply{Resp: resp}
	}
	resp, bytes, waitOn := h.readFetch(req)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > maxFetchWait {
		wait = maxFetchWait
	}
	if bytes >= int64(req.MinBytes) || wait <= 0 || waitOn == nil {
		return protocol.Reply{Resp: h.countFetch(req, resp)}
	}
	deadline := time.Now().Add(wait)
	return protocol.Reply{Await: func() kmsg.Response {
		for {
			if !waitAny(waitOn, time.Until(deadline)) {
				resp, _, _ = h.readFetch(req)
				return h.countFetch(req, resp)
			}
			resp, bytes, waitOn = h.readFetch(req)
			if bytes >= int64(req.MinBytes) || waitOn == nil || time.Now().After(deadline) {
				return h.countFetch(req, resp)
			}
		}
	}}
}

// countFetch adds a consumer fetch's returned records to the per-topic
// counters (broker.CountFetch) and returns resp. Follower fetches are
// replication, not counted.
func (h *Handlers) countFetch(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) *kmsg.FetchResponse {
	replicaID := req.ReplicaID
	if req.Version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	if replicaID >= 0 {
		return resp
	}
	for _, t := range resp.Topics {
		var bytes, records int64
		for _, p := range t.Partitions {
			bytes += int64(len(p.RecordBatches))
			records += countRecords(p.RecordBatches)
		}
		h.b.CountFetch(t.Topic, bytes, records)
	}
	return resp
}

// countRecords counts the records of the whole v2 batches in data from
// their headers; a trailing partial batch is not counted.
func countRecords(data []byte) int64 {
	var n int64
	for len(data) > 0 {
		h, _, rest, err := batch.Next(data)
		if err != nil {
			break
		}
		n += int64(h.NumRecords)
		data = rest
	}
	return n
}

// waitAny waits until one of chans is closed (true) or d passes (false).
func waitAny(chans []<-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timer.C:
			return false
		}
	}
	woke := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	for _, c := range chans {
		go func(c <-chan struct{}) {
			select {
			case <-c:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}(c)
	}
	select {
	case <-woke:
		return true
	case <-timer.C:
		return false
	}
}

// readFetch builds a response from what is readable now. It returns the
// bytes read and the channels to wait on if that is not enough (nil when a
// partition had an error or diverged: answer at once).
func (h *Handlers) readFetch(req *kmsg.FetchRequest) (*kmsg.FetchResponse, int64, []<-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	budget := int64(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = defaultFetchMaxBytes
	}
	var total int64
	var waitOn []<-chan struct{}
	immediate := false
	first := true
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// Kafka sends an empty record set, never a null one: librdkafka
			// and sarama reject a null MessageSet.
			sp.RecordBatches = []byte{}
			p, err := h.b.Partition(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = code(err)
				st.Partitions = append(st.Partitions, sp)
				immediate = true
				continue
			}
			waitOn = append(waitOn, p.Changed())
			n, stop := h.readPartition(p, req, &rp, &sp, budget-total, first)
			if stop {
				immediate = true
			}
			if n > 0 {
				first = false
				total += n
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if immediate {
		waitOn = nil
	}
	return resp, total, waitOn
}

// readPartition fills one partition of a fetch response through the
// partition's replica machine (which fences epochs, checks divergence and
// range, and records a follower's position). It returns the record bytes
// added and whether the response should not wait (error or divergence).
func (h *Handlers) readPartition(p *broker.Partition, req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, budget int64, first bool) (int64, bool) {
	limit := int64(rp.PartitionMaxBytes)
	if budget < limit {
		limit = budget
	}
	if limit < 0 {
		limit = 0
	}
	replicaID := req.ReplicaID
	if req.Version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	lastFetched := rp.LastFetchedEpoch
	if req.Version < 12 {
		lastFetched = -1
	}
	res, data, err := p.Fetch(replica.FetchRequest{
		ReplicaID: replicaID, BrokerEpoch: -1, CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
		FetchOffset: rp.FetchOffset, LastFetchedEpoch: lastFetched, LogStartOffset: rp.LogStartOffset,
	}, int(limit), first)
	sp.HighWatermark = res.HW
	sp.LastStableOffset = res.HW
	sp.LogStartOffset = res.LogStart
	if err != nil {
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return 0, true
	}
	if res.Error != 0 {
		sp.ErrorCode = res.Error
		if res.Error == kerr.NotLeaderForPartition.Code || res.Error == kerr.FencedLeaderEpoch.Code {
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = p.Leader(), p.LeaderEpoch()
		}
		return 0, true
	}
	if d := res.Diverging; d != nil {
		sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
		return 0, true
	}
	if data != nil {
		sp.RecordBatches = data
	}
	return int64(len(data)), false
}
