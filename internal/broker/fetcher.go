package broker

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/fetchsession"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
)

// Follower fetching (docs/kafka-replication.md §5): one fetcher per leader
// broker pulls every partition this node follows from it with Fetch v16 (topic
// ids, ReplicaState.ID, CurrentLeaderEpoch, LastFetchedEpoch), feeds the
// answers to each partition's machine and sends the next fetch once the machine
// asks for it (after the previous records are flushed: the durability rule,
// docs/architecture.md).
//
// The fetcher keeps a fetch session with the leader (KIP-227, Kafka's
// FetchSessionHandler in internal/fetchsession): a full fetch first, then
// incremental ones naming only the partitions whose request changed — a
// follower's fetch offset is its acknowledgement, so a moved offset is
// always sent — and forgetting those not fetchable this round (flushing,
// backing off). The leader still reads every partition of the session
// with its cached request, which keeps the follower caught up (ISR) on
// idle partitions, and answers only what changed. A session error makes
// the next fetch a full one; a leader without room for a session answers
// full fetches as before.
const (
	// fetchVersion is the Fetch version followers send (LastFetchedEpoch
	// and DivergingEpoch need v12, topic ids v13).
	fetchVersion = 16
	// flushWait bounds how long the fetcher holds its next request back for
	// partitions whose last records are still being flushed: their next
	// fetch is their acknowledgement, and a long poll sent without them
	// would delay it by up to replica.fetch.wait.max.ms.
	flushWait = 50 * time.Millisecond
)

// fetchSettings are the replica fetcher settings, by Kafka name.
type fetchSettings struct {
	waitMs        int32         // replica.fetch.wait.max.ms (500)
	minBytes      int32         // replica.fetch.min.bytes (1)
	maxBytes      int32         // replica.fetch.max.bytes (1 MiB), per partition
	responseBytes int32         // replica.fetch.response.max.bytes (10 MiB)
	backoff       time.Duration // replica.fetch.backoff.ms (1000; sluice: 500)
}

func (b *Broker) fetchSettings() fetchSettings {
	clamp := func(v, lo, hi int64) int32 { return int32(min(max(v, lo), hi)) }
	return fetchSettings{
		waitMs:        clamp(b.cfg.Int("replica.fetch.wait.max.ms", 500), 0, 30000),
		minBytes:      clamp(b.cfg.Int("replica.fetch.min.bytes", 1), 1, 1<<30),
		maxBytes:      clamp(b.cfg.Int("replica.fetch.max.bytes", 1<<20), 1024, 1<<30),
		responseBytes: clamp(b.cfg.Int("replica.fetch.response.max.bytes", 10<<20), 1024, 1<<30),
		backoff:       time.Duration(clamp(b.cfg.Int("replica.fetch.backoff.ms", 500), 10, 60000)) * time.Millisecond,
	}
}

type fetcher struct {
	b      *Broker
	leader int32
	addr   string
	cl     PeerClient
	set    fetchSettings

	mu      sync.Mutex
	parts   map[TP]*Partition
	backoff map[TP]time.Time

	// sess and rounds belong to the run goroutine.
	sess   fetchsession.Client
	rounds atomic.Int64
	// countsFlushed is set while the leader's answers say it counts a
	// fetch's Unflushed offsets as not acknowledged (FetchTagCountsFlushed):
	// only then may a partition fetch before its flush (pipelined).
	countsFlushed atomic.Bool

	kick chan struct{}
	// done is closed and ctx cancelled by stop (ctx also by Broker.Close).
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newFetcher(b *Broker, leader int32, addr string) *fetcher {
	f := &fetcher{b: b, leader: leader, addr: addr, set: b.fetchSettings(),
		cl:    b.transport.Dial(addr, "sluice-replica-"+strconv.Itoa(int(b.cfg.NodeID))),
		parts: map[TP]*Partition{}, backoff: map[TP]time.Time{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(b.ctx)
	if !b.steps {
		f.wg.Add(1)
		go f.run()
	}
	return f
}

func (f *fetcher) add(p *Partition) {
	f.mu.Lock()
	f.parts[p.TP] = p
	f.mu.Unlock()
	p.fetcher.Store(f)
	f.poke()
}

func (f *fetcher) remove(tp TP) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.parts[tp]; p != nil {
		p.fetcher.CompareAndSwap(f, nil)
	}
	delete(f.parts, tp)
	delete(f.backoff, tp)
	return len(f.parts) == 0
}

func (f *fetcher) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *fetcher) stop() {
	close(f.done)
	f.cancel()
	f.cl.Close()
	f.wg.Wait()
}

// assignFetcher points p's replication at its current leader. Called with
// applyMu held.
func (b *Broker) assignFetcher(p *Partition, im *metadata.Image) {
	leader := p.Leader()
	br, ok := im.Brokers[leader]
	if p.IsLeader() || leader < 0 || !ok {
		b.unassignFetcher(p)
		return
	}
	addr := b.inter.addr(br)
	b.mu.Lock()
	for id, f := range b.fetchers {
		if id != leader {
			if f.remove(p.TP) {
				delete(b.fetchers, id)
				b.stopFetcher(f)
			}
		}
	}
	f := b.fetchers[leader]
	if f != nil && f.addr != addr {
		delete(b.fetchers, leader)
		b.stopFetcher(f)
		f = nil
	}
	if f == nil {
		f = newFetcher(b, leader, addr)
		b.fetchers[leader] = f
	}
	b.mu.Unlock()
	f.add(p)
}

func (b *Broker) unassignFetcher(p *Partition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, f := range b.fetchers {
		if f.remove(p.TP) {
			delete(b.fetchers, id)
			b.stopFetcher(f)
		}
	}
}

func (f *fetcher) run() {
	defer f.wg.Done()
	var flushSince time.Time
	for {
		select {
		case <-f.done:
			return
		default:
		}
		reqs, parts, flushing, held := f.collect()
		// A pipelined partition (fetching while its last records are
		// flushed) goes at once, without a long poll: the leader may
		// hold more for it, and its acknowledgement must not wait
		// behind a parked fetch.
		pipelined := false
		for _, r := range reqs {
			pipelined = pipelined || r.Unflushed > 0
		}
		if flushing && !pipelined {
			// Give the flushes a moment so their acknowledgements go out
			// with this request; then fetch without a long poll.
			if flushSince.IsZero() {
				flushSince = f.b.now()
			}
			if clock.Since(f.b.clock, flushSince) < flushWait {
				f.wait(flushWait)
				continue
			}
		}
		flushSince = time.Time{}
		// With throttled partitions held back (KIP-73), come back for
		// them once the follower's throttled rate is at its bound.
		var heldFor time.Duration
		if held {
			heldFor = max(f.b.followerQuota.delay(), time.Millisecond)
		}
		if len(reqs) == 0 {
			d := 250 * time.Millisecond
			if held {
				d = min(d, heldFor)
			}
			f.wait(d)
			continue
		}
		maxWait := f.set.waitMs
		if flushing || pipelined {
			maxWait = 0
		}
		if held {
			maxWait = min(maxWait, int32(heldFor.Milliseconds()))
		}
		if err := f.fetchOnce(reqs, parts, maxWait); err != nil {
			if ae := (*protocol.AuthError)(nil); errors.As(err, &ae) {
				// The inter-broker listener's TLS or SASL settings are
				// wrong (or the leader's): say so (rate-limited by the
				// serve logger).
				f.b.log.Warn("follower cannot authenticate to the leader", "leader", f.leader, "addr", f.addr, "err", err)
			}
			select {
			case <-f.done:
				return
			case <-clock.After(f.b.clock, f.set.backoff):
			}
		}
	}
}

// collect asks each partition's machine for its next fetch. flushing
// reports partitions that will want one once their flush completes (a
// pipelined fetch counts as one of those while the leader has not said it
// honours Unflushed), held throttled partitions left out
// (follower.replication.throttled.rate).
func (f *fetcher) collect() (map[TP]replica.FetchRequest, map[TP]*Partition, bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.b.now()
	reqs := map[TP]replica.FetchRequest{}
	parts := map[TP]*Partition{}
	flushing := false
	// Over follower.replication.throttled.rate, throttled partitions
	// are left out (Kafka's ReplicaFetcherThread.shouldFollowerThrottle).
	exceeded := f.b.followerQuota.exceeded()
	skipped := 0
	for tp, p := range f.parts {
		if until, ok := f.backoff[tp]; ok && now.Before(until) {
			continue
		}
		if exceeded && f.b.followerThrottled(p) {
			skipped++
			continue
		}
		if req, ok := p.followerFetchRequest(); ok && req.Leader == f.leader && (req.Unflushed == 0 || f.countsFlushed.Load()) {
			reqs[tp] = req
			parts[tp] = p
		} else if ok := p.awaitingFlush(); ok {
			flushing = true
		}
	}
	if skipped > 0 {
		metrics.ReplicationThrottledSkips.WithLabelValues("follower").Add(float64(skipped))
	}
	return reqs, parts, flushing, skipped > 0
}

// wait waits up to d for a change in one of the fetcher's partitions
// (Partition.wake pokes the fetcher: flushes, role and HW changes all
// do), for a partition added, or for the fetcher to stop.
func (f *fetcher) wait(d time.Duration) {
	timer := f.b.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-f.done:
	case <-f.kick:
	case <-timer.C():
	}
}

func (f *fetcher) fetchOnce(reqs map[TP]replica.FetchRequest, parts map[TP]*Partition, maxWait int32) error {
	kreq := kmsg.NewPtrFetchRequest()
	kreq.SetVersion(fetchVersion)
	kreq.ReplicaID = f.b.cfg.NodeID
	kreq.ReplicaState.ID = f.b.cfg.NodeID
	// The broker epoch (KIP-903; -1 before registration): the leader
	// fences a fetch of an older incarnation and names the epoch in the
	// ISR expansion it proposes, which the controller refuses
	// (INELIGIBLE_REPLICA) once the follower registered again. Without
	// it, an expansion decided on an older incarnation's fetch could be
	// committed for the new one (the simulator's soak: a restarted
	// follower joined the ISR below an answered DeleteRecords).
	kreq.ReplicaState.Epoch = f.b.ctrl.BrokerEpoch()
	kreq.MaxWaitMillis = maxWait
	kreq.MinBytes = f.set.minBytes
	kreq.MaxBytes = f.set.responseBytes
	next := make(map[fetchsession.Key]fetchsession.Request, len(reqs))
	names := map[[16]byte]string{}
	for tp, r := range reqs {
		id, ok := f.b.TopicID(tp.Topic)
		if !ok {
			// Not in the applied metadata (being deleted): not this round.
			delete(reqs, tp)
			continue
		}
		names[id] = tp.Topic
		next[fetchsession.Key{TopicID: id, Topic: tp.Topic, Partition: tp.Partition}] = fetchsession.Request{
			FetchOffset: r.FetchOffset, LogStartOffset: r.LogStartOffset, MaxBytes: f.set.maxBytes,
			CurrentLeaderEpoch: r.CurrentLeaderEpoch, LastFetchedEpoch: r.LastFetchedEpoch, Unflushed: r.Unflushed,
		}
	}
	if len(next) == 0 {
		return nil
	}
	plan := f.sess.Build(next)
	kreq.SessionID, kreq.SessionEpoch = plan.SessionID, plan.Epoch
	byTopic := map[[16]byte]int{}
	for _, k := range plan.Send {
		i, ok := byTopic[k.TopicID]
		if !ok {
			i = len(kreq.Topics)
			byTopic[k.TopicID] = i
			t := kmsg.NewFetchRequestTopic()
			t.TopicID = k.TopicID
			kreq.Topics = append(kreq.Topics, t)
		}
		r := next[k]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = k.Partition
		rp.CurrentLeaderEpoch = r.CurrentLeaderEpoch
		rp.FetchOffset = r.FetchOffset
		rp.LastFetchedEpoch = r.LastFetchedEpoch
		rp.LogStartOffset = r.LogStartOffset
		rp.PartitionMaxBytes = r.MaxBytes
		SetUnflushedTag(&rp, r.Unflushed)
		kreq.Topics[i].Partitions = append(kreq.Topics[i].Partitions, rp)
	}
	forgotten := map[[16]byte]int{}
	for _, k := range plan.Forget {
		i, ok := forgotten[k.TopicID]
		if !ok {
			i = len(kreq.ForgottenTopics)
			forgotten[k.TopicID] = i
			t := kmsg.NewFetchRequestForgottenTopic()
			t.TopicID = k.TopicID
			kreq.ForgottenTopics = append(kreq.ForgottenTopics, t)
		}
		kreq.ForgottenTopics[i].Partitions = append(kreq.ForgottenTopics[i].Partitions, k.Partition)
	}
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	f.rounds.Add(1)
	kresp, err := f.request(ctx, kreq)
	if err != nil {
		f.sess.HandleError()
		// The leader may have restarted as a build that does not honour
		// Unflushed: no pipelining until an answer says it does.
		f.countsFlushed.Store(false)
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	f.sess.HandleResponse(resp.ErrorCode, resp.SessionID)
	switch resp.ErrorCode {
	case 0:
		f.countsFlushed.Store(CountsFlushedTag(resp))
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
		// The next fetch is a full one; no need to back off.
		f.b.log.Debug("fetch session reset", "leader", f.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
		return nil
	default:
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	var throttled int64
	defer func() { f.b.followerQuota.record(throttled) }()
	answered := make(map[TP]bool, len(reqs))
	defer func() {
		// Left out of an incremental answer: nothing new for them.
		for tp, req := range reqs {
			if p := parts[tp]; p != nil && !answered[tp] && req.Unflushed > 0 {
				p.nothingFetched(req)
			}
		}
	}()
	for _, rt := range resp.Topics {
		name, ok := names[rt.TopicID]
		if !ok {
			continue
		}
		for _, sp := range rt.Partitions {
			tp := TP{name, sp.Partition}
			req, ok := reqs[tp]
			p := parts[tp]
			if !ok || p == nil {
				continue
			}
			answered[tp] = true
			if len(sp.RecordBatches) > 0 && f.b.followerThrottled(p) {
				throttled += int64(len(sp.RecordBatches))
			}
			f.handle(ctx, p, req, &sp)
		}
	}
	return nil
}

// reusingClient is a PeerClient that can read a response into the buffer
// of the previous one (protocol.Client.RequestReusing).
type reusingClient interface {
	RequestReusing(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// The production transport's clients reuse their fetch buffers.
var _ reusingClient = (*protocol.Client)(nil)

// request sends one fetch of fetchOnce. Its answer is done with when
// fetchOnce returns: handle appends the records of each partition within
// its step (Partition.do returns after the step's processReady, which
// writes the machine's appends), and nothing keeps the response's bytes.
// So the fetcher's connection reads each answer into the buffer of the
// previous one where it can, instead of allocating (and zeroing) one of
// up to replica.fetch.response.max.bytes per round.
func (f *fetcher) request(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	if rc, ok := f.cl.(reusingClient); ok {
		return rc.RequestReusing(ctx, req)
	}
	return f.cl.Request(ctx, req)
}

// handle feeds one partition's answer to its machine.
func (f *fetcher) handle(ctx context.Context, p *Partition, req replica.FetchRequest, sp *kmsg.FetchResponseTopicPartition) {
	res := replica.FetchResult{Error: sp.ErrorCode, HW: sp.HighWatermark, LogStart: sp.LogStartOffset, From: req.FetchOffset,
		TombstoneBound: TombstoneBoundTag(sp)}
	if sp.DivergingEpoch.Epoch >= 0 && sp.DivergingEpoch.EndOffset >= 0 {
		res.Diverging = &replica.DivergingEpoch{Epoch: sp.DivergingEpoch.Epoch, EndOffset: sp.DivergingEpoch.EndOffset}
	}
	switch sp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		// docs/kafka-replication.md §3.5: learn the leader's log end and start,
		// then let the machine truncate or restart the log.
		leo, start, err := f.listOffsets(ctx, p.TP, req.CurrentLeaderEpoch)
		if err != nil {
			f.backoffPartition(p.TP)
			return
		}
		res.LEO, res.LogStart = leo, start
	case kerr.OffsetMovedToTieredStorage.Code:
		// KIP-405: rebuild from the remote log's metadata (remote.go).
		if ok, err := f.rebuildFromRemote(ctx, p, req); !ok {
			if err != nil {
				f.b.log.Warn("follower cannot rebuild from the remote log", "topic", p.Topic, "partition", p.Partition, "err", err)
			}
			f.backoffPartition(p.TP)
		}
		return
	default:
		// Not leader, fenced or unknown epoch: wait for new metadata.
		f.backoffPartition(p.TP)
		return
	}
	var batches []replica.Batch
	data := sp.RecordBatches
	for len(data) > 0 {
		h, b, rest, err := batch.Next(data)
		if err != nil {
			break // a partial batch at the end of a size-limited response
		}
		if batch.CheckCRC(b) != nil {
			f.b.log.Warn("corrupt batch from leader", "topic", p.Topic, "partition", p.Partition, "offset", h.BaseOffset)
			break
		}
		batches = append(batches, machineBatch(b, h))
		data = rest
	}
	if len(batches) > 0 {
		res.To = batches[len(batches)-1].LastOffset() + 1
	}
	p.handleFetchResponse(replica.FetchResponse{Request: req, FetchResult: res, Batches: batches})
}

// followerThrottled reports whether this node's replica of p is throttled
// on the follower side: follower.replication.throttled.replicas names it
// and it is out of the ISR.
func (b *Broker) followerThrottled(p *Partition) bool {
	return b.throttled(b.followerQuota, "follower.replication.throttled.replicas", p, b.cfg.NodeID)
}

func (f *fetcher) backoffPartition(tp TP) {
	f.mu.Lock()
	f.backoff[tp] = f.b.now().Add(f.set.backoff)
	f.mu.Unlock()
}

// listOffsets asks the leader for its latest and earliest offsets, as a
// replica (ReplicaID set: latest is the LEO).
func (f *fetcher) listOffsets(ctx context.Context, tp TP, leaderEpoch int32) (leo, start int64, err error) {
	ps, err := f.replicaListOffsets(ctx, tp, leaderEpoch, 4, -1, -2)
	if err != nil {
		return 0, 0, err
	}
	return ps[0].Offset, ps[1].Offset, nil
}

// replicaListOffsets sends ListOffsets at version for tp's timestamps to
// the leader, as a replica, and returns one answer per timestamp, in
// order, or the first partition error.
func (f *fetcher) replicaListOffsets(ctx context.Context, tp TP, leaderEpoch int32, version int16, timestamps ...int64) ([]kmsg.ListOffsetsResponseTopicPartition, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(version)
	req.ReplicaID = f.b.cfg.NodeID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = tp.Topic
	for _, ts := range timestamps {
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = tp.Partition
		p.CurrentLeaderEpoch = leaderEpoch
		p.Timestamp = ts
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	kresp, err := f.cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(timestamps) {
		return nil, errors.New("malformed ListOffsets response")
	}
	ps := resp.Topics[0].Partitions
	for _, p := range ps {
		if p.ErrorCode != 0 {
			return nil, kerr.ErrorForCode(p.ErrorCode)
		}
	}
	return ps, nil
}

// FetcherStats describes one follower fetcher (one per leader this node
// follows).
type FetcherStats struct {
	Leader     int32
	Partitions int
	// Rounds counts the Fetch requests sent.
	Rounds int64
	// BytesSent and BytesReceived count the Fetch and ListOffsets frames
	// on the fetcher's connection, size prefixes included.
	BytesSent, BytesReceived int64
}

// FetcherStats returns the follower fetchers' counters, by leader id.
func (b *Broker) FetcherStats() []FetcherStats {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []FetcherStats
	for id, f := range b.fetchers {
		f.mu.Lock()
		n := len(f.parts)
		f.mu.Unlock()
		sent, recv := f.cl.Traffic()
		out = append(out, FetcherStats{Leader: id, Partitions: n, Rounds: f.rounds.Load(), BytesSent: sent, BytesReceived: recv})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Leader < out[j].Leader })
	return out
}
