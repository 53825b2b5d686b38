package handler

// Fetch, versions 4-16.
//
// READ_UNCOMMITTED consumers read up to the high watermark, READ_COMMITTED ones
// up to the last stable offset (KIP-98: the first offset of the oldest
// transaction not yet decided and replicated), with the aborted transactions
// that overlap the records returned (AbortedTransactions, from the aborted
// index; an empty list when there are none, null under READ_UNCOMMITTED);
// LastStableOffset is the partition's. Followers (ReplicaID set,
// ReplicaState.ID from v15) read up to the log end, and their fetch offset is
// their acknowledgement (docs/kafka-replication.md §1.3). Only the leader
// serves followers and consumers without client metadata (before v11); a
// follower serves a v11+ consumer up to its own high watermark (KIP-392),
// and under replica.selector.class=RackAwareReplicaSelector the leader
// answers a consumer of another rack (the request's Rack, client.rack)
// with PreferredReadReplica, an in-sync replica in its rack, and no
// records. MaxWaitMs/MinBytes long-poll: with fewer than MinBytes
// readable, the request parks (in Reply.Await, so later requests on the
// connection keep flowing) until a partition's high watermark or log start
// moves, or MaxWaitMs passes. MaxBytes and PartitionMaxBytes bound the
// response, except that the first batch of the first non-empty partition is
// always returned whole (KIP-74). CurrentLeaderEpoch is fenced (KIP-320:
// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and LastFetchedEpoch is checked
// for divergence (DivergingEpoch, docs/kafka-replication.md §3.4). From v15 the
// follower's broker epoch (ReplicaState.Epoch, KIP-903) is fenced too.
//
// Fetch sessions (KIP-227, fetch_session.go and internal/fetchsession):
// SessionEpoch 0 is a full fetch that creates a session when the cache
// (max.incremental.fetch.session.cache.slots) has or can make room — the
// response's SessionID names it, 0 if none; SessionEpoch -1 is a
// sessionless full fetch. Either closes the session the request names. A
// positive SessionEpoch is an incremental fetch: the request names only
// partitions added or changed and ForgottenTopics, every partition of the
// session is read, and the response carries only those with records,
// errors, a divergence, or a high watermark, last stable offset or log
// start other than last sent. Errors: FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR.
//
// Tiered storage (KIP-405, fetch_remote.go): a consumer's offset below
// the local log start is read from the remote log on the broker's reader
// pool, the response waiting up to remote.fetch.max.wait.ms; a follower's
// gets OFFSET_MOVED_TO_TIERED_STORAGE (broker/remote.go).
//
// Topic ids (KIP-516, v13+): topics are named by TopicID, resolved through
// the metadata this node has applied; an id that does not resolve (a
// deleted topic, even if one was recreated under its name) is
// UNKNOWN_TOPIC_ID for each of its partitions, and responses carry the id.
// v16 adds the leader's endpoint (NodeEndpoints) beside CurrentLeader on
// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH (KIP-951). v17's
// ReplicaDirectoryId and v18's replica high watermark are KRaft-voter
// fields (KIP-853, KIP-1166) that sluice does not serve: Fetch stops at v16.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/fetchsession"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
)

// maxFetchWait caps MaxWaitMillis.
const maxFetchWait = 5 * time.Minute

// defaultFetchMaxBytes applies when a request (v<3) has no MaxBytes.
const defaultFetchMaxBytes = 50 << 20

// fetchMaxVersion is the highest Fetch version served.
const fetchMaxVersion = 16

func (h *Handlers) fetch(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.FetchRequest)
	plan := h.planFetch(req)
	if plan.resp != nil {
		if d := h.fetchThrottle(r, req, 0); d > 0 {
			plan.resp.ThrottleMillis = throttleMillis(d)
		}
		return protocol.Reply{Resp: plan.resp}
	}
	h.authorizeFetch(r, req, plan.items)
	h.capFetchToQuota(r, req)
	splice := h.splice && r.Conn.Spliceable()
	read := h.readFetch(req, plan.items, h.b.LookupDeadline(), splice)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > maxFetchWait {
		wait = maxFetchWait
	}
	if len(read.remote) > 0 {
		// Remote reads wait for the object store: not on the
		// connection's reader (fetch_remote.go).
		return protocol.Reply{Await: func() kmsg.Response { return h.sendFetch(r, req, plan, read) }}
	}
	if read.bytes >= int64(req.MinBytes) || wait <= 0 || read.waitOn == nil {
		return protocol.Reply{Resp: h.sendFetch(r, req, plan, read)}
	}
	deadline := h.b.Now().Add(wait)
	return protocol.Reply{Await: func() kmsg.Response {
		w := h.b.NewWatcher(read.watch)
		defer w.Close()
		for {
			d := clock.Until(h.b.Clock(), deadline)
			// Throttled partitions held back (KIP-73) are read again
			// once the leader's throttled rate is back at its bound.
			held := false
			if read.held > 0 {
				if q := max(h.b.LeaderQuotaDelay(), time.Millisecond); q < d {
					d, held = q, true
				}
			}
			if !w.Wait(read.waitOn, d, r.Conn.Gone()) && (!held || connGone(r)) {
				// Only the read whose response is sent is committed to
				// the session (plan.finish).
				read = h.readFetch(req, plan.items, time.Time{}, splice)
				return h.sendFetch(r, req, plan, read)
			}
			read = h.readFetch(req, plan.items, time.Time{}, splice)
			if read.bytes >= int64(req.MinBytes) || read.waitOn == nil || h.b.Now().After(deadline) {
				return h.sendFetch(r, req, plan, read)
			}
		}
	}}
}

// sendFetch records the throttled partitions' bytes of the read being
// sent (KafkaApis records them against the leader's replication quota once
// the response is built) and responds. A consumer over its
// consumer_byte_rate or request_percentage quota gets an empty response
// with the throttle time instead (KIP-219; quota.go): the records stay
// for a later fetch, and nothing is recorded in its fetch session.
func (h *Handlers) sendFetch(r *protocol.Request, req *kmsg.FetchRequest, plan fetchPlan, read fetchRead) kmsg.Response {
	if len(read.remote) > 0 {
		h.readRemote(r, &read)
	}
	if read.throttled > 0 || read.held > 0 {
		h.b.RecordLeaderThrottled(read.throttled, read.held)
	}
	if d := h.fetchThrottle(r, req, read.bytes); d > 0 {
		resp := plan.throttledResponse(req)
		resp.ThrottleMillis = throttleMillis(d)
		return resp
	}
	return h.respond(r, req, plan.finish(read), read.holes)
}

// connGone reports whether r's connection went away.
func connGone(r *protocol.Request) bool {
	select {
	case <-r.Conn.Gone():
		return true
	default:
		return false
	}
}

// authorizeFetch marks the items r's principal may not read
// TOPIC_AUTHORIZATION_FAILED (KafkaApis.handleFetchRequest): a follower
// (replica id >= 0) needs CLUSTER_ACTION on the cluster for every
// partition, a consumer READ on each topic.
func (h *Handlers) authorizeFetch(r *protocol.Request, req *kmsg.FetchRequest, items []fetchItem) {
	if h.auth == nil {
		return
	}
	if id, _ := replicaOf(req); id >= 0 {
		if !h.allowedCluster(r, acl.OpClusterAction) {
			for i := range items {
				items[i].err = kerr.TopicAuthorizationFailed.Code
			}
		}
		return
	}
	decided := map[string]bool{}
	for i := range items {
		it := &items[i]
		if it.err != 0 {
			continue
		}
		ok, seen := decided[it.topic]
		if !seen {
			ok = h.allowedTopic(r, it.topic, acl.OpRead)
			decided[it.topic] = ok
		}
		if !ok {
			it.err = kerr.TopicAuthorizationFailed.Code
		}
	}
}

// replicaOf returns the fetching replica's id (-1: a consumer) and broker
// epoch (-1: unknown; v15+ only).
func replicaOf(req *kmsg.FetchRequest) (int32, int64) {
	if req.Version >= 15 {
		return req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	return req.ReplicaID, -1
}

// countFetch adds a consumer fetch's returned records to the per-topic
// counters (broker.CountFetch). Follower fetches are replication, not
// counted. A spliced partition counts the offsets it spans (its records,
// unless compaction left gaps).
func (h *Handlers) countFetch(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, holes []fetchHole) {
	if id, _ := replicaOf(req); id >= 0 {
		return
	}
	for _, t := range resp.Topics {
		var bytes, records int64
		for _, p := range t.Partitions {
			if ho := findHole(holes, p.RecordBatches); ho != nil {
				bytes += ho.slice.Size
				records += ho.records
				continue
			}
			bytes += int64(len(p.RecordBatches))
			records += countRecords(p.RecordBatches)
		}
		name := t.Topic
		if name == "" {
			name, _ = h.b.TopicName(metadata.UUID(t.TopicID))
		}
		if name != "" {
			h.b.CountFetch(name, bytes, records)
		}
	}
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

// fetchItem is one partition to read: its topic (name resolved, and id
// for v13+), and the request parameters (from the request or, for an
// incremental fetch, the session).
type fetchItem struct {
	topic     string
	id        [16]byte
	partition int32
	req       fetchsession.Request
	// err is set when the topic id did not resolve (UNKNOWN_TOPIC_ID).
	err int16
}

// fetchRead is one read of every item.
type fetchRead struct {
	parts   []kmsg.FetchResponseTopicPartition
	results []fetchsession.Result
	bytes   int64
	// waitOn are the channels to wait on if bytes is not enough, taken
	// before each partition was read, and watch their partitions; nil
	// when a partition had an error or diverged: answer at once.
	waitOn []<-chan struct{}
	watch  []*broker.Partition
	// holes are the partitions whose records are spliced (fetch_splice.go).
	holes []fetchHole
	// throttled is the record bytes of replication-throttled partitions
	// (KIP-73); held counts those sent no records because the leader's
	// throttled rate was exceeded.
	throttled int64
	held      int
	// remote are the partitions to read from the remote log
	// (fetch_remote.go).
	remote []remoteFetch
}

// readFetch reads every item as it is now.
// lookup bounds the wait for lagging metadata (Broker.LookupDeadline; zero
// on the re-reads of a long poll: no wait). splice allows zero-copy reads
// (fetch_splice.go): off on a TLS connection, whose bytes must pass
// through the encryption, so they are copied.
func (h *Handlers) readFetch(req *kmsg.FetchRequest, items []fetchItem, lookup time.Time, splice bool) fetchRead {
	budget := int64(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = defaultFetchMaxBytes
	}
	rd := fetchRead{parts: make([]kmsg.FetchResponseTopicPartition, len(items)), results: make([]fetchsession.Result, len(items))}
	immediate := false
	first := true
	// Leader replication throttle (KIP-73, ReplicaManager.readFromLog's
	// shouldLeaderThrottle): over leader.replication.throttled.rate, a
	// follower's throttled partitions are read for their position only.
	replicaID, _ := replicaOf(req)
	exceeded := 0 // 1: no, 2: yes; asked once per read
	for i := range items {
		it := &items[i]
		sp := &rd.parts[i]
		*sp = kmsg.NewFetchResponseTopicPartition()
		sp.Partition = it.partition
		// Kafka sends an empty record set, never a null one: librdkafka
		// and sarama reject a null MessageSet.
		sp.RecordBatches = []byte{}
		if it.err != 0 {
			sp.ErrorCode = it.err
			immediate = true
		} else if p, err := h.b.PartitionBy(it.topic, it.partition, lookup); err != nil {
			sp.ErrorCode = code(err)
			if sp.ErrorCode == kerr.NotLeaderForPartition.Code {
				h.currentLeader(it.topic, sp)
			}
			immediate = true
		} else {
			rd.waitOn = append(rd.waitOn, p.Changed())
			rd.watch = append(rd.watch, p)
			holes := &rd.holes
			if !splice {
				holes = nil
			}
			room, firstHere := budget-rd.bytes, first
			throttled := replicaID >= 0 && h.b.LeaderThrottled(p, replicaID)
			if throttled {
				if exceeded == 0 {
					exceeded = 1
					if h.b.LeaderQuotaExceeded() {
						exceeded = 2
					}
				}
				if exceeded == 2 {
					room, firstHere = 0, false
					rd.held++
				}
			}
			nremote := len(rd.remote)
			n, stop := h.readPartition(p, req, &it.req, sp, room, firstHere, holes, &rd.remote)
			if len(rd.remote) > nremote {
				rd.remote[nremote].i = i
			}
			if throttled {
				rd.throttled += n
			}
			if stop {
				immediate = true
			}
			if n > 0 {
				first = false
				rd.bytes += n
			}
		}
		rd.results[i] = fetchsession.Result{Error: sp.ErrorCode, HighWatermark: sp.HighWatermark,
			LastStableOffset: sp.LastStableOffset, LogStartOffset: sp.LogStartOffset,
			Records: len(sp.RecordBatches) > 0, Diverging: sp.DivergingEpoch.Epoch >= 0,
			PreferredReadReplica: sp.PreferredReadReplica >= 0, TombstoneBound: broker.TombstoneBoundTag(sp)}
	}
	if immediate {
		rd.waitOn, rd.watch = nil, nil
	}
	// The remote reads share what the local ones left of the budget, in
	// request order; only the first of them, and only if no local
	// partition returned records, returns its first batch whole (KIP-74).
	left := budget - rd.bytes
	for k := range rd.remote {
		rf := &rd.remote[k]
		rf.limit = max(min(rf.limit, left), 0)
		rf.first = rf.first && first && k == 0
		left -= rf.limit
	}
	return rd
}

// preferredReadReplica is the replica the leader sends a consumer in rack
// to (KIP-392; Kafka's RackAwareReplicaSelector under
// replica.selector.class), or -1 to serve it here: with no selector, no
// client rack, on a follower, when this broker is in the client's rack,
// or when no in-sync follower there holds the fetch offset. Among those
// that do, the most caught up: the highest log end offset, then the
// shortest time since caught up.
func (h *Handlers) preferredReadReplica(p *broker.Partition, rack string, offset int64) int32 {
	if !h.rackAware || rack == "" || !p.IsLeader() {
		return -1
	}
	im := h.b.Image()
	if im.Brokers[h.b.NodeID()].Rack == rack {
		return -1
	}
	best := replica.ReadReplica{ID: -1}
	for _, c := range p.ReadReplicas(offset) {
		if br, ok := im.Brokers[c.ID]; !ok || br.Rack != rack || !br.Active() {
			continue
		}
		if best.ID < 0 || c.LEO > best.LEO || c.LEO == best.LEO && c.SinceCaughtUp < best.SinceCaughtUp {
			best = c
		}
	}
	return best.ID
}

// currentLeader fills CurrentLeader from the metadata for a partition this
// node has no replica of.
func (h *Handlers) currentLeader(topic string, sp *kmsg.FetchResponseTopicPartition) {
	t := h.b.Image().Topics[topic]
	if t == nil || sp.Partition < 0 || int(sp.Partition) >= len(t.Partitions) {
		return
	}
	mp := t.Partitions[sp.Partition]
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = mp.Leader, mp.LeaderEpoch
}

// readPartition fills one partition of a fetch response through the
// partition's replica machine (which fences epochs, checks divergence and
// range, and records a follower's position). It returns the record bytes
// added and whether the response should not wait (error or divergence).
// A large read is spliced into holes, or copied if holes is nil.
// A consumer's offset in the remote log is added to remote, with the
// bytes it may take, to be read after (fetch_remote.go).
func (h *Handlers) readPartition(p *broker.Partition, req *kmsg.FetchRequest, rp *fetchsession.Request, sp *kmsg.FetchResponseTopicPartition, budget int64, first bool, holes *[]fetchHole, remote *[]remoteFetch) (int64, bool) {
	limit := int64(rp.MaxBytes)
	if budget < limit {
		limit = budget
	}
	if limit < 0 {
		limit = 0
	}
	replicaID, brokerEpoch := replicaOf(req)
	readCommitted := replicaID < 0 && req.IsolationLevel == 1
	lastFetched := rp.LastFetchedEpoch
	if req.Version < 12 {
		lastFetched = -1
	}
	// KIP-392: a consumer with client metadata (v11+) may read from any
	// replica, and the leader may send it to one in its rack.
	clientMetadata := replicaID < 0 && req.Version >= 11
	preferred := int32(-1)
	if clientMetadata {
		if preferred = h.preferredReadReplica(p, req.Rack, rp.FetchOffset); preferred >= 0 {
			limit = 0
		}
	}
	res, slice, err := p.Fetch(replica.FetchRequest{
		ReplicaID: replicaID, BrokerEpoch: brokerEpoch, CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
		FetchOffset: rp.FetchOffset, Unflushed: rp.Unflushed, LastFetchedEpoch: lastFetched, LogStartOffset: rp.LogStartOffset,
		ReadCommitted: readCommitted, AnyReplica: clientMetadata,
	}, int(limit), first)
	sp.HighWatermark = res.HW
	sp.LastStableOffset = res.HW
	if replicaID < 0 && req.Version >= 4 {
		sp.LastStableOffset = res.LSO
	}
	sp.LogStartOffset = res.LogStart
	if errors.Is(err, storage.ErrOffsetTiered) {
		*remote = append(*remote, remoteFetch{p: p, offset: rp.FetchOffset, maxOffset: res.To, limit: limit,
			first: first, readCommitted: readCommitted})
		return 0, true
	}
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
	if preferred >= 0 {
		// No records: the consumer reads from the preferred replica,
		// at once (ReplicaManager answers without waiting).
		sp.PreferredReadReplica = preferred
		return 0, true
	}
	if replicaID >= 0 && req.Version >= 12 {
		broker.SetTombstoneBoundTag(sp, res.TombstoneBound)
	}
	if slice.Size == 0 {
		return 0, false
	}
	if readCommitted {
		sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		for _, a := range p.Log().AbortedTxns(rp.FetchOffset, slice.NextOffset) {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			sp.AbortedTransactions = append(sp.AbortedTransactions, at)
		}
	}
	if holes != nil && slice.Size >= spliceMin {
		ho := fetchHole{marker: newMarker(), slice: slice, records: slice.NextOffset - rp.FetchOffset}
		sp.RecordBatches = append([]byte(nil), ho.marker[:]...)
		*holes = append(*holes, ho)
		return slice.Size, false
	}
	data, err := slice.AppendTo(nil)
	if err != nil {
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return 0, true
	}
	sp.RecordBatches = data
	return int64(len(data)), false
}
