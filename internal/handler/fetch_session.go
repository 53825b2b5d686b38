package handler

// Fetch sessions (KIP-227) and topic ids (KIP-516) for 01_fetch.go: which
// partitions a fetch reads, and how its response is assembled and
// recorded in the session (Kafka's FetchManager.newContext and the
// FullFetchContext / IncrementalFetchContext / SessionlessFetchContext /
// SessionErrorContext it returns).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/fetchsession"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// fetchPlan is what a fetch reads and how its response is made. Either
// resp is set (a session error: answer at once) or items and finish.
type fetchPlan struct {
	items []fetchItem
	// finish assembles the response from the read actually sent and
	// records it in the session.
	finish func(fetchRead) *kmsg.FetchResponse
	// throttled, if set, is the response of a fetch throttled by a
	// client quota (Kafka's FetchContext.getThrottledResponse): no
	// partitions, nothing recorded in the session; an incremental
	// fetch's keeps its session id. Nil: an empty sessionless response.
	throttled func() *kmsg.FetchResponse
	resp      *kmsg.FetchResponse
}

// throttledResponse is the response of a fetch throttled by a client
// quota: no partitions, so no records.
func (p fetchPlan) throttledResponse(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	if p.throttled != nil {
		return p.throttled()
	}
	return req.ResponseKind().(*kmsg.FetchResponse)
}

// planFetch opens the fetch's context: sessionless, full (creating a
// session once answered), incremental, or a session error.
func (h *Handlers) planFetch(req *kmsg.FetchRequest) fetchPlan {
	usesIDs := req.Version >= 13
	replicaID, _ := replicaOf(req)
	privileged := replicaID >= 0
	full := req.Version < 7 || req.SessionEpoch == 0 || req.SessionEpoch == -1
	if full {
		if req.Version >= 7 && req.SessionID != 0 {
			h.sessions.Remove(req.SessionID) // a full fetch closes the session it names
		}
		items := h.requestItems(req)
		create := req.Version >= 7 && req.SessionEpoch == 0
		return fetchPlan{items: items, finish: func(rd fetchRead) *kmsg.FetchResponse {
			resp := h.assemble(req, items, rd, nil)
			if create {
				entries := make([]fetchsession.Entry, len(items))
				for i, it := range items {
					entries[i] = fetchsession.Entry{Key: it.key(), Request: it.req, Result: rd.results[i]}
				}
				resp.SessionID = h.sessions.Create(privileged, usesIDs, entries)
			}
			return resp
		}}
	}
	var updates []fetchsession.Entry
	for _, it := range h.requestItems(req) {
		updates = append(updates, fetchsession.Entry{Key: it.key(), Request: it.req})
	}
	var forget []fetchsession.Key
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := fetchsession.Key{Topic: ft.Topic, Partition: p}
			if usesIDs {
				k = fetchsession.Key{TopicID: ft.TopicID, Partition: p}
			}
			forget = append(forget, k)
		}
	}
	tx, errCode := h.sessions.Incremental(req.SessionID, req.SessionEpoch, usesIDs, updates, forget)
	if errCode != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = errCode
		return fetchPlan{resp: resp}
	}
	if tx == nil {
		// Nothing left in the session: it is closed, and the request's
		// own partitions (none, or only forgotten ones) are answered
		// sessionless.
		items := h.requestItems(req)
		return fetchPlan{items: items, finish: func(rd fetchRead) *kmsg.FetchResponse { return h.assemble(req, items, rd, nil) }}
	}
	items := make([]fetchItem, tx.Len())
	for i := range items {
		k, r := tx.Partition(i)
		items[i] = fetchItem{topic: k.Topic, id: k.TopicID, partition: k.Partition, req: r}
		if usesIDs {
			h.resolve(&items[i])
		}
	}
	return fetchPlan{items: items, throttled: func() *kmsg.FetchResponse {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SessionID = tx.ID()
		if !tx.Current() {
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		}
		return resp
	}, finish: func(rd fetchRead) *kmsg.FetchResponse {
		include, ok := tx.Commit(rd.results)
		if !ok {
			// Another request used the session meanwhile (Kafka:
			// "possible duplicate request").
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			resp.SessionID = tx.ID()
			return resp
		}
		resp := h.assemble(req, items, rd, include)
		resp.SessionID = tx.ID()
		return resp
	}}
}

// key is the item's session key (the session normalizes it: by id for
// v13+, by name before).
func (it *fetchItem) key() fetchsession.Key {
	return fetchsession.Key{TopicID: it.id, Topic: it.topic, Partition: it.partition}
}

// requestItems lists the partitions a request names, in order.
func (h *Handlers) requestItems(req *kmsg.FetchRequest) []fetchItem {
	var items []fetchItem
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			it := fetchItem{topic: rt.Topic, partition: rp.Partition, req: fetchsession.Request{
				FetchOffset: rp.FetchOffset, LogStartOffset: rp.LogStartOffset, MaxBytes: rp.PartitionMaxBytes,
				CurrentLeaderEpoch: rp.CurrentLeaderEpoch, LastFetchedEpoch: rp.LastFetchedEpoch,
			}}
			if id, _ := replicaOf(req); id >= 0 && req.Version >= 12 {
				it.req.Unflushed = broker.UnflushedTag(&rp)
			}
			if req.Version >= 13 {
				it.topic, it.id = "", rt.TopicID
				h.resolve(&it)
			}
			items = append(items, it)
		}
	}
	return items
}

// resolve names an item's topic from its id through the metadata this
// node applied (broker.TopicName), or marks it UNKNOWN_TOPIC_ID.
func (h *Handlers) resolve(it *fetchItem) {
	name, ok := h.b.TopicName(metadata.UUID(it.id))
	if !ok {
		it.topic, it.err = "", kerr.UnknownTopicID.Code
		return
	}
	it.topic, it.err = name, 0
}

// assemble builds the response from a read: every item, or those include
// marks. Consecutive items of one topic share a response topic.
func (h *Handlers) assemble(req *kmsg.FetchRequest, items []fetchItem, rd fetchRead, include []bool) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for i := range items {
		if include != nil && !include[i] {
			continue
		}
		it := &items[i]
		n := len(resp.Topics)
		if n == 0 || resp.Topics[n-1].TopicID != it.id || resp.Topics[n-1].Topic != it.topic {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = it.topic, it.id
			resp.Topics = append(resp.Topics, st)
			n++
		}
		sp := rd.parts[i]
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, sp)
	}
	return resp
}

// addEndpoints lists the endpoints, on the listener the request came in
// on, of the leaders named in CurrentLeader of NOT_LEADER_OR_FOLLOWER and
// FENCED_LEADER_EPOCH partitions (NodeEndpoints, v16, KIP-951), so the
// client can go there without a metadata request.
func (h *Handlers) addEndpoints(r *protocol.Request, resp *kmsg.FetchResponse) {
	if resp.Version < 16 {
		return
	}
	var leaders []int32
	for _, t := range resp.Topics {
		for _, sp := range t.Partitions {
			if l := sp.CurrentLeader.LeaderID; l >= 0 && (sp.ErrorCode == kerr.NotLeaderForPartition.Code || sp.ErrorCode == kerr.FencedLeaderEpoch.Code) {
				leaders = append(leaders, l)
			}
		}
	}
	if len(leaders) == 0 {
		return
	}
	brokers := h.b.Image().Brokers
	seen := map[int32]bool{}
	for _, id := range leaders {
		br, ok := brokers[id]
		if seen[id] || !ok {
			continue
		}
		seen[id] = true
		host, port, ok := endpoint(r, br)
		if !ok {
			continue
		}
		e := kmsg.NewFetchResponseBroker()
		e.NodeID, e.Host, e.Port = br.ID, host, port
		if br.Rack != "" {
			rack := br.Rack
			e.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, e)
	}
}
