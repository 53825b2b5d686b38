package handler

// ShareFetch, versions 1-2 (KIP-932 share groups; v2 adds KIP-1206's
// ShareAcquireMode and KIP-1222's IsRenewAck).
//
// A member of a share group fetches records from the partition leaders,
// each record handed to one member at a time under an acquisition lock
// (AcquisitionLockTimeoutMillis, the group's share.record.lock.duration.ms)
// and listed in AcquiredRecords with its delivery count; the partition's
// share state lives in internal/share (docs/share-groups.md, "Share
// partitions"). Membership is not checked here, as in Kafka: the share
// group coordinator assigns partitions, the leaders only lock records.
//
// Share sessions (Kafka's ShareSessionCache, internal/share.Sessions):
// ShareSessionEpoch 0 opens a session for (group, member) holding the
// request's partitions (SHARE_SESSION_LIMIT_REACHED past
// group.share.max.share.sessions; acknowledgements on it are
// INVALID_REQUEST); a positive epoch must be the session's
// (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND), adds the
// request's partitions and drops ForgottenTopicsData, and fetches every
// partition of the session; -1 applies the acknowledgements, closes the
// session and releases the member's locks. A session also closes, and
// its member's locks are released, when the connection that opened it
// closes.
//
// Acknowledgements ride on the request (AcknowledgementBatches: accept,
// release, reject, gap, and renew when IsRenewAck) and are applied before
// records are acquired, their writes running while records are acquired
// (the answer waits for both); each partition's outcome is its
// AcknowledgeErrorCode (INVALID_RECORD_STATE for records the member does
// not hold, INVALID_REQUEST for malformed batches), and an outcome of 0
// means the state is durable in the persister. A renewing request
// (IsRenewAck) acquires nothing (KIP-1222).
//
// Acquisition reads each partition's log from the first available offset
// up to the high watermark (the last stable offset under the group's
// share.isolation.level=read_committed, whose aborted transactional
// batches, like control batches, are archived, never delivered), at most
// MaxBytes in all, split evenly over the partitions (Kafka's
// PartitionMaxBytesStrategy UNIFORM; each partition's first batch always
// whole; MaxBytes 0 acquires nothing) and MaxRecords records
// (batch_optimized: the batch reaching it is taken whole; record_limit:
// exactly), AcquiredRecords runs cut at BatchSize. With fewer than
// MinBytes acquired, the request long-polls up to MaxWaitMs, woken by new
// data, released records or an expiring lock. Errors per partition:
// UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED (READ on the topic),
// NOT_LEADER_OR_FOLLOWER with CurrentLeader and the leader's endpoint in
// NodeEndpoints (KIP-951); the group needs READ
// (GROUP_AUTHORIZATION_FAILED); a member id that is not a Uuid is
// INVALID_REQUEST.

import (
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

// shareAcquireRecordLimit is ShareAcquireMode record_limit (KIP-1206).
const shareAcquireRecordLimit = 1

func (h *Handlers) shareFetch(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(c int16, msg *string) protocol.Reply {
		resp.ErrorCode, resp.ErrorMessage = c, msg
		return protocol.Reply{Resp: resp}
	}
	group, member, err := shareIdentity(req.GroupID, req.MemberID)
	if err != nil {
		return fail(code(err), message(err))
	}
	if !h.allowedGroup(r, group, acl.OpRead) {
		return fail(groupDenied, nil)
	}
	var adds []share.TopicPartition
	acks := map[share.TopicPartition][]share.AckBatch{}
	var ackOrder []share.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := share.TopicPartition{TopicID: t.TopicID, Partition: p.Partition}
			adds = append(adds, tp)
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			if _, ok := acks[tp]; !ok {
				ackOrder = append(ackOrder, tp)
			}
			for _, b := range p.AcknowledgementBatches {
				acks[tp] = append(acks[tp], share.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
			}
		}
	}
	if req.ShareSessionEpoch == share.InitialEpoch && len(acks) > 0 {
		e := "acknowledgements on a share fetch opening a session"
		return fail(kerr.InvalidRequest.Code, &e)
	}
	var forgotten []share.TopicPartition
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			forgotten = append(forgotten, share.TopicPartition{TopicID: f.TopicID, Partition: p})
		}
	}
	if req.ShareSessionEpoch == share.FinalEpoch {
		adds = nil // the closing request's partitions only carry acknowledgements
	}
	res, err := h.share.sessions.Fetch(share.SessionKey{Group: group, Member: member}, req.ShareSessionEpoch, r.Conn, adds, forgotten)
	if err != nil {
		return fail(code(err), message(err))
	}
	h.watchShareConn(r)
	cfg := h.shareConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(min(cfg.part.LockDuration/time.Millisecond, 1<<31-1))
	return protocol.Reply{Await: func() kmsg.Response {
		sf := &shareFetchRun{h: h, r: r, req: req, resp: resp, group: group, member: member, cfg: cfg,
			allowed: map[string]bool{}, idx: map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition{}}
		lookup := h.b.LookupDeadline()
		acking := make([]shareAcking, len(ackOrder))
		for i, tp := range ackOrder {
			part := h.resolveShare(r, tp, lookup, sf.allowed)
			acking[i] = h.shareAckStart(group, member, part, cfg, acks[tp], req.IsRenewAck)
			sf.setLeader(sf.part(tp), part)
		}
		answer := func(rs []shareAckResult) {
			for i, tp := range ackOrder {
				rp := sf.part(tp)
				rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage = rs[i].code, rs[i].msg
			}
		}
		if res.Closed || req.IsRenewAck || h.share.oneGoroutine {
			answer(h.shareAckWaitAll(acking))
			if res.Closed {
				h.releaseShareMember(group, member, res.Parts)
			}
			if res.Closed || req.IsRenewAck {
				return sf.finish()
			}
			sf.fetch(res.Parts, res.Full, lookup)
			return sf.finish()
		}
		// The acknowledgements' writes run while records are acquired
		// (the records they carry are not acquirable until the writes
		// return), as Kafka's KafkaApis runs a share fetch's
		// acknowledge and fetch side by side; the answer waits for both.
		written := make(chan []shareAckResult, 1)
		go func() { written <- h.shareAckWaitAll(acking) }()
		sf.fetch(res.Parts, res.Full, lookup)
		answer(<-written)
		return sf.finish()
	}}
}

// shareFetchRun builds one ShareFetch response.
type shareFetchRun struct {
	h             *Handlers
	r             *protocol.Request
	req           *kmsg.ShareFetchRequest
	resp          *kmsg.ShareFetchResponse
	group, member string
	cfg           shareGroupConfig
	allowed       map[string]bool
	idx           map[share.TopicPartition]*kmsg.ShareFetchResponseTopicPartition
	order         []share.TopicPartition
}

// part returns tp's response partition, adding it.
func (sf *shareFetchRun) part(tp share.TopicPartition) *kmsg.ShareFetchResponseTopicPartition {
	if rp := sf.idx[tp]; rp != nil {
		return rp
	}
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Partition = tp.Partition
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
	sf.idx[tp] = &rp
	sf.order = append(sf.order, tp)
	return &rp
}

// setLeader fills CurrentLeader for a partition this node does not lead.
func (sf *shareFetchRun) setLeader(rp *kmsg.ShareFetchResponseTopicPartition, part sharePart) {
	if part.err == kerr.NotLeaderForPartition.Code || part.err == kerr.FencedLeaderEpoch.Code {
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = part.leader, part.epoch
	}
}

// fetch acquires records of parts for the member, long-polling while
// fewer than MinBytes (at least one record) are acquired. A full fetch
// answers every partition; an incremental one those with records, errors
// or acknowledgement outcomes.
func (sf *shareFetchRun) fetch(parts []share.TopicPartition, full bool, lookup time.Time) {
	h := sf.h
	type target struct {
		part sharePart
		sp   *share.Partition
	}
	var ts []target
	for _, tp := range parts {
		part := h.resolveShare(sf.r, tp, lookup, sf.allowed)
		if full || part.err != 0 {
			rp := sf.part(tp)
			rp.ErrorCode = part.err
			sf.setLeader(rp, part)
		}
		if part.err != 0 {
			continue
		}
		sp, err := h.sharePartition(sf.group, part, &sf.cfg)
		if err != nil {
			rp := sf.part(tp)
			rp.ErrorCode, rp.ErrorMessage = code(err), message(err)
			continue
		}
		ts = append(ts, target{part, sp})
	}
	// A load read the group's configs again (sharePartition).
	sf.resp.AcquisitionLockTimeoutMillis = int32(min(sf.cfg.part.LockDuration/time.Millisecond, 1<<31-1))
	// MaxBytes 0 (a consumer's fetch.max.bytes=0) acquires nothing, as
	// Kafka's share fetch, whose partitions then get 0 bytes each: the
	// request waits MaxWaitMs and answers empty, acknowledgements applied.
	budget := min(int64(sf.req.MaxBytes), defaultFetchMaxBytes)
	noBytes := budget <= 0
	maxRecords := int(sf.req.MaxRecords)
	strict := sf.req.Version >= 2 && sf.req.ShareAcquireMode == shareAcquireRecordLimit
	wait := min(time.Duration(sf.req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := h.b.Now().Add(wait)
	var bytes int64
	records := 0
	for {
		// The channels are taken before the reads they guard.
		var wake []<-chan struct{}
		for _, t := range ts {
			wake = append(wake, t.part.p.Changed(), t.sp.Changed())
		}
		failed := false
		shares := uniformMaxBytes(budget-bytes, len(ts))
		for i := range ts {
			t := &ts[i]
			room := shares[i]
			if noBytes || maxRecords > 0 && records >= maxRecords {
				break
			}
			if room <= 0 {
				continue
			}
			if !t.part.p.IsLeader() {
				rp := sf.part(t.part.tp)
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = t.part.p.Leader(), t.part.p.LeaderEpoch()
				failed = true
				continue
			}
			left := 0
			if maxRecords > 0 {
				left = maxRecords - records
			}
			rd := h.acquireShare(t.sp, t.part.p, sf.member, sf.cfg.readCommitted, sf.cfg.part.MaxInFlight, room, left, strict)
			if rd.err != 0 {
				sf.part(t.part.tp).ErrorCode = rd.err
				failed = true
				continue
			}
			if len(rd.acquired) == 0 {
				continue
			}
			rp := sf.part(t.part.tp)
			rp.Records = append(rp.Records, rd.data...)
			for _, a := range splitRanges(rd.acquired, int64(sf.req.BatchSize)) {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
				rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
				records += int(a.Last - a.First + 1)
			}
			bytes += int64(len(rd.data))
		}
		if failed || records > 0 && bytes >= int64(sf.req.MinBytes) || len(ts) == 0 {
			break
		}
		d := clock.Until(h.b.Clock(), deadline)
		for _, t := range ts {
			if dl, ok := t.sp.NextDeadline(); ok {
				d = min(d, max(clock.Until(h.b.Clock(), dl), time.Millisecond))
			}
		}
		if d <= 0 || !waitAny(h.b.Clock(), wake, d, sf.r.Conn.Gone()) && !h.b.Now().Before(deadline) {
			break
		}
		if connGone(sf.r) {
			break
		}
	}
	if connGone(sf.r) && records > 0 {
		// Nobody will read these records: give them back at once.
		var held []share.TopicPartition
		for _, t := range ts {
			held = append(held, t.part.tp)
		}
		h.releaseShareMember(sf.group, sf.member, held)
	}
}

// uniformMaxBytes splits a ShareFetch's MaxBytes left over its n
// partitions as Kafka's PartitionMaxBytesStrategy UNIFORM does: evenly,
// the remainder to one partition (the first here; Kafka picks one at
// random), and with fewer bytes than partitions one byte to as many
// partitions as there are bytes (again the first ones), the rest none.
// Each partition's read returns its first batch whole.
func uniformMaxBytes(left int64, n int) []int64 {
	out := make([]int64, n)
	if n == 0 || left <= 0 {
		return out
	}
	if left < int64(n) {
		for i := range left {
			out[i] = 1
		}
		return out
	}
	for i := range out {
		out[i] = left / int64(n)
	}
	out[0] += left % int64(n)
	return out
}

// waitAny waits until one of chans is closed (true), d passes or gone is
// closed (false).
func waitAny(clk clock.Clock, chans []<-chan struct{}, d time.Duration, gone <-chan struct{}) bool {
	timer := clk.NewTimer(d)
	defer timer.Stop()
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C())})
	if gone != nil {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(gone)})
	}
	first := len(cases)
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= first
}

// splitRanges cuts acquired runs into pieces of at most n records (n <= 0:
// uncut): ShareFetch's BatchSize.
func splitRanges(rs []share.AcquiredRange, n int64) []share.AcquiredRange {
	if n <= 0 {
		return rs
	}
	var out []share.AcquiredRange
	for _, r := range rs {
		for f := r.First; f <= r.Last; f += n {
			out = append(out, share.AcquiredRange{First: f, Last: min(f+n-1, r.Last), DeliveryCount: r.DeliveryCount})
		}
	}
	return out
}

// finish assembles the response's topics in the order partitions were
// added, with the endpoints of the leaders it names.
func (sf *shareFetchRun) finish() kmsg.Response {
	byTopic := map[[16]byte]int{}
	var leaders []int32
	for _, tp := range sf.order {
		i, ok := byTopic[tp.TopicID]
		if !ok {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.TopicID
			sf.resp.Topics = append(sf.resp.Topics, t)
			i = len(sf.resp.Topics) - 1
			byTopic[tp.TopicID] = i
		}
		rp := sf.idx[tp]
		if rp.ErrorCode == kerr.NotLeaderForPartition.Code || rp.AcknowledgeErrorCode == kerr.NotLeaderForPartition.Code {
			leaders = append(leaders, rp.CurrentLeader.LeaderID)
		}
		if rp.Records == nil {
			rp.Records = []byte{}
		}
		sf.resp.Topics[i].Partitions = append(sf.resp.Topics[i].Partitions, *rp)
	}
	for _, e := range sf.h.shareEndpoints(sf.r, leaders) {
		ne := kmsg.NewShareFetchResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = e.id, e.host, e.port, e.rack
		sf.resp.NodeEndpoints = append(sf.resp.NodeEndpoints, ne)
	}
	return sf.resp
}
