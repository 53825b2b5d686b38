package handler

// What ShareFetch (78) and ShareAcknowledge (79) share: the share
// partitions this node leads (internal/share, Kafka's
// SharePartitionManager), the share-session cache, the group's share
// configs, and the reads of the log that acquisitions are made from.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	sharegroup "github.com/sluice-io/sluice/internal/group/share"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/storage"
)

// sharePartState is the share-partition side of the handlers.
type sharePartState struct {
	mgr      *share.Manager
	sessions *share.Sessions
	// watch replaces watchShareConn's goroutine (Options.WatchShareConn).
	watch func(c *protocol.Conn, release func())
	// stopSweep ends the expiry sweep's goroutine (sweepShareExpiry).
	stopSweep chan struct{}
	// dlq copies records to the groups' dead-letter topics (KIP-1191,
	// share_deadletter.go).
	dlq *deadLetterWriter
	// oneGoroutine: a request's work stays on its goroutine, for the
	// simulator, which parks it at each Persister call (set with watch):
	// acknowledgements are made durable before acquiring, one partition
	// after the other.
	oneGoroutine bool
}

// registerShareAPIs installs ShareFetch and ShareAcknowledge with the
// share partitions kept through p (share.MemPersister when nil).
func (h *Handlers) registerShareAPIs(reg *protocol.Registry, p share.Persister) {
	if p == nil {
		p = share.NewMemPersister()
	}
	h.share = sharePartState{mgr: share.NewManager(p),
		sessions: share.NewSessions(int(h.b.Config().Int("group.share.max.share.sessions", share.DefaultMaxSessions))),
		dlq:      newDeadLetterWriter(h)}
	reg.Register(protocol.Handler{Key: 78, MinVersion: 1, MaxVersion: 2, Serve: h.shareFetch})
	reg.Register(protocol.Handler{Key: 79, MinVersion: 1, MaxVersion: 2, Serve: h.shareAcknowledge})
}

// ShareDeadLetters returns the counters of the share groups' dead-letter
// writer (KIP-1191).
func (h *Handlers) ShareDeadLetters() DeadLetterStats { return h.share.dlq.stats() }

// ShareSessions returns the number of open share sessions.
func (h *Handlers) ShareSessions() int { return h.share.sessions.Len() }

// SharePartitions returns the share-partition manager.
func (h *Handlers) SharePartitions() *share.Manager { return h.share.mgr }

// shareGroupConfig is a share group's effective settings.
type shareGroupConfig struct {
	part          share.Config
	readCommitted bool
	reset         string
}

// shareConfig reads group's share.* configs, defaulted by the broker's
// group.share.* settings (GroupConfigManager / ShareGroupConfig): the
// lock duration is kept within group.share.min/max.record.lock.duration.ms.
func (h *Handlers) shareConfig(group string) shareGroupConfig {
	cfg := h.b.Config()
	set := h.b.Image().GroupConfigs[group]
	get := func(name, brokerName, def string) string {
		if v, ok := set[name]; ok {
			return v
		}
		if brokerName != "" {
			if v, _, ok := cfg.Lookup(brokerName); ok && v != "" {
				return v
			}
		}
		return def
	}
	num := func(name, brokerName string, def int64) int64 {
		n, err := strconv.ParseInt(strings.TrimSpace(get(name, brokerName, "")), 10, 64)
		if err != nil {
			return def
		}
		return n
	}
	lock := num("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", 30000)
	lock = max(lock, cfg.Int("group.share.min.record.lock.duration.ms", 15000))
	lock = min(lock, cfg.Int("group.share.max.record.lock.duration.ms", 60000))
	limit := num("share.delivery.count.limit", "group.share.delivery.count.limit", share.DefaultDeliveryLimit)
	// A dead-letter topic (KIP-1191) takes effect from share.version 2.
	var dlq share.DeadLetterSink
	if strings.TrimSpace(set[config.DLQTopicNameConfig]) != "" && h.b.Image().ShareVersion() >= metadata.ShareVersionDLQ && h.share.dlq != nil {
		dlq = h.share.dlq
	}
	return shareGroupConfig{
		part: share.Config{LockDuration: time.Duration(lock) * time.Millisecond, DeliveryLimit: int16(min(max(limit, 1), 1<<15-1)),
			MaxInFlight: int(cfg.Int("group.share.partition.max.record.locks", share.DefaultMaxInFlight)), DeadLetters: dlq},
		readCommitted: get("share.isolation.level", "", "read_uncommitted") == "read_committed",
		reset:         get("share.auto.offset.reset", "", "latest"),
	}
}

// shareLoadSyncTimeout bounds the metadata read barrier before a share
// partition is loaded.
const shareLoadSyncTimeout = 5 * time.Second

// resetOffset is where group's share partition without state starts
// (share.auto.offset.reset): latest is the high watermark, earliest the
// log start, by_duration:<ISO-8601 duration> the first offset whose
// timestamp is at most that long ago (KIP-1106), else the high watermark.
// It runs within a load, after sharePartition's metadata read barrier.
func (h *Handlers) resetOffset(p *broker.Partition, group string) func() (int64, error) {
	return func() (int64, error) {
		reset := h.shareConfig(group).reset
		switch {
		case reset == "earliest":
			return p.LogStartOffset(), nil
		case strings.HasPrefix(reset, "by_duration:"):
			d, err := parseISODuration(strings.TrimPrefix(reset, "by_duration:"))
			if err != nil {
				return p.HighWatermark(), nil
			}
			off, _, ok, err := p.Log().OffsetForTimestamp(h.b.Now().Add(-d).UnixMilli())
			if err != nil {
				return 0, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
			}
			if ok {
				return min(off, p.HighWatermark()), nil
			}
		}
		return p.HighWatermark(), nil
	}
}

// parseISODuration parses the PnDTnHnMn.nS durations of Java's
// Duration.parse that by_duration takes.
func parseISODuration(s string) (time.Duration, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(s, "P") {
		return 0, fmt.Errorf("duration %q", s)
	}
	s = s[1:]
	var d time.Duration
	inTime := false
	for s != "" {
		if s[0] == 'T' {
			inTime, s = true, s[1:]
			continue
		}
		i := strings.IndexAny(s, "DHMS")
		if i <= 0 {
			return 0, fmt.Errorf("duration %q", s)
		}
		v, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("duration %q", s)
		}
		unit := map[byte]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[s[i]]
		if s[i] != 'D' && !inTime {
			return 0, fmt.Errorf("duration %q", s)
		}
		d += time.Duration(v * float64(unit))
		s = s[i+1:]
	}
	return d, nil
}

// shareIdentity checks a share request's group and member ids: a group id
// and a member id that is a Kafka Uuid, else INVALID_REQUEST.
func shareIdentity(group, member *string) (string, string, error) {
	if group == nil || *group == "" {
		return "", "", fmt.Errorf("%w: no group id", kerr.InvalidRequest)
	}
	if member == nil || !validUUID(*member) {
		return "", "", fmt.Errorf("%w: the member id is not a Uuid", kerr.InvalidRequest)
	}
	return *group, *member, nil
}

// validUUID reports whether s is a member id ShareFetch and
// ShareAcknowledge accept: the same rule as ShareGroupHeartbeat's.
func validUUID(s string) bool { return sharegroup.ValidMemberID(s) }

// sharePart is one partition a share request names, resolved.
type sharePart struct {
	tp    share.TopicPartition
	topic string
	// err is the partition's error code (0: p is this node's, led here).
	err    int16
	p      *broker.Partition
	leader int32
	epoch  int32
}

// resolveShare resolves tp for r: UNKNOWN_TOPIC_ID for an id that names
// no topic, TOPIC_AUTHORIZATION_FAILED without READ on it,
// NOT_LEADER_OR_FOLLOWER (with the leader) unless this node leads it.
// allowed caches the topic decisions of one request.
func (h *Handlers) resolveShare(r *protocol.Request, tp share.TopicPartition, lookup time.Time, allowed map[string]bool) sharePart {
	sp := sharePart{tp: tp, leader: -1, epoch: -1}
	name, ok := h.b.TopicName(metadata.UUID(tp.TopicID))
	if !ok {
		sp.err = kerr.UnknownTopicID.Code
		return sp
	}
	sp.topic = name
	ok, seen := allowed[name]
	if !seen {
		ok = h.allowedTopic(r, name, acl.OpRead)
		allowed[name] = ok
	}
	if !ok {
		sp.err = kerr.TopicAuthorizationFailed.Code
		return sp
	}
	p, err := h.b.PartitionBy(name, tp.Partition, lookup)
	if err == nil && !p.IsLeader() {
		err = kerr.NotLeaderForPartition
	}
	if err != nil {
		sp.err = code(err)
		if t := h.b.Image().Topics[name]; t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			sp.leader, sp.epoch = t.Partitions[tp.Partition].Leader, t.Partitions[tp.Partition].LeaderEpoch
		}
		return sp
	}
	sp.p, sp.leader, sp.epoch = p, p.Leader(), p.LeaderEpoch()
	return sp
}

// sharePartition returns the share partition of group on part (which this
// node leads), loading it from the persister if needed.
//
// A load starts with a metadata read barrier and reads *cfg again after
// it: a client that sets the group's share.* configs through one node
// and then fetches from another must not find the partition started
// where the old share.auto.offset.reset said (at latest, the records
// already produced would never be delivered), nor its first records
// locked for the old share.record.lock.duration.ms. Kafka's group
// coordinator initializes a share partition's state before assigning it,
// which leaves time for the configs to reach the leader; the barrier
// makes it certain.
func (h *Handlers) sharePartition(group string, part sharePart, cfg *shareGroupConfig) (*share.Partition, error) {
	key := share.Key{Group: group, TopicID: part.tp.TopicID, Partition: part.tp.Partition}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !h.share.mgr.Holds(key, part.p.LeaderEpoch()) {
		sctx, scancel := context.WithTimeout(ctx, shareLoadSyncTimeout)
		err := h.b.SyncMetadata(sctx)
		scancel()
		if err != nil {
			h.b.Logger().Warn("share partition loads without a metadata read barrier", "group", group, "topic", part.p.Topic, "partition", part.p.TP.Partition, "err", err)
		}
		*cfg = h.shareConfig(group)
	}
	return h.share.mgr.Get(ctx, key, part.p.LeaderEpoch(), cfg.part, h.resetOffset(part.p, group))
}

// shareAcking is one partition's acknowledgements applied in memory
// (shareAckStart), or the error that stopped them.
type shareAcking struct {
	sp   *share.Partition
	p    *share.Pending
	code int16
	msg  *string
}

// shareAckStart applies member's acknowledgements on one partition in
// memory and returns them to wait for (shareAckWait), or the error code:
// the partition's, INVALID_REQUEST for malformed batches,
// INVALID_RECORD_STATE for records member does not hold.
func (h *Handlers) shareAckStart(group, member string, part sharePart, cfg shareGroupConfig, acks []share.AckBatch, renew bool) shareAcking {
	if err := share.CheckAcks(acks, renew); err != nil {
		return shareAcking{code: code(err), msg: message(err)}
	}
	if part.err != 0 {
		return shareAcking{code: part.err}
	}
	sp, err := h.sharePartition(group, part, &cfg)
	if err != nil {
		return shareAcking{code: code(err), msg: message(err)}
	}
	p, err := sp.Ack(member, h.b.Now(), acks, renew)
	if err != nil {
		h.dropIfFenced(sp, err)
		return shareAcking{code: code(err), msg: message(err)}
	}
	return shareAcking{sp: sp, p: p}
}

// shareAckWait waits until a's acknowledgements are durable and returns
// its error code: 0, a's own, or the persister's (the acknowledgements
// were then undone).
func (h *Handlers) shareAckWait(a shareAcking) (int16, *string) {
	if a.p == nil {
		return a.code, a.msg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.p.Wait(ctx); err != nil {
		h.dropIfFenced(a.sp, err)
		return code(err), message(err)
	}
	return 0, nil
}

// shareAckResult is one partition's acknowledgement outcome.
type shareAckResult struct {
	code int16
	msg  *string
}

// shareAckWaitAll waits for as (shareAckWait), the partitions' writes
// side by side; in the simulator (one goroutine runs at a time) one after
// the other.
func (h *Handlers) shareAckWaitAll(as []shareAcking) []shareAckResult {
	out := make([]shareAckResult, len(as))
	if h.share.oneGoroutine || len(as) == 1 {
		for i, a := range as {
			out[i].code, out[i].msg = h.shareAckWait(a)
		}
		return out
	}
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].code, out[i].msg = h.shareAckWait(a)
		}()
	}
	wg.Wait()
	return out
}

// dropIfFenced forgets a share partition whose write was fenced
// (FENCED_STATE_EPOCH after AlterShareGroupOffsets or
// DeleteShareGroupOffsets reinitialized its state, FENCED_LEADER_EPOCH
// after a newer leader read it): the next request loads the state again,
// as Kafka's SharePartitionManager removes a fenced SharePartition.
func (h *Handlers) dropIfFenced(sp *share.Partition, err error) bool {
	if errors.Is(err, kerr.FencedStateEpoch) || errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, share.ErrFenced) {
		h.share.mgr.Drop(sp.Key())
		return true
	}
	return false
}

// ExpireShareLocks persists the acquisition locks that passed on the share
// partitions this node holds (share.Manager.PersistExpired), as Kafka's
// acquisition lock timer tasks do when no fetch comes; a fenced partition
// is dropped. The handlers run it every share.ExpirySweepInterval unless
// Options.StepShareExpiry (the simulator runs it on its clock).
func (h *Handlers) ExpireShareLocks() {
	for sp, err := range h.share.mgr.PersistExpired(h.b.Now(), shareWriteTimeout) {
		h.dropIfFenced(sp, err)
	}
}

// shareWriteTimeout bounds one write of a share partition's state, as
// the share partitions' other Persister calls.
const shareWriteTimeout = 30 * time.Second

// sweepShareExpiry runs ExpireShareLocks every share.ExpirySweepInterval
// on the broker's clock until Close.
func (h *Handlers) sweepShareExpiry() {
	stop := make(chan struct{})
	h.share.stopSweep = stop
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-clock.After(h.b.Clock(), share.ExpirySweepInterval):
				h.ExpireShareLocks()
			}
		}
	}()
}

// stopShareSweep ends sweepShareExpiry's goroutine.
func (h *Handlers) stopShareSweep() {
	if h.share.stopSweep != nil {
		close(h.share.stopSweep)
		h.share.stopSweep = nil
	}
}

// releaseShareMember releases member's locks on the share partitions of
// group on parts that this node holds (a closed share session).
func (h *Handlers) releaseShareMember(group, member string, parts []share.TopicPartition) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tp := range parts {
		if sp := h.share.mgr.Held(share.Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition}); sp != nil {
			if err := sp.ReleaseMember(ctx, member, h.b.Now()); err != nil {
				h.dropIfFenced(sp, err) // otherwise the sweep writes the release
			}
		}
	}
}

// watchShareConn arranges for the share sessions opened on r's connection
// to be closed, and their members' locks released, once the connection
// closes (Kafka's ShareSessionCache connection disconnect listener).
func (h *Handlers) watchShareConn(r *protocol.Request) {
	c := r.Conn
	if c == nil {
		return
	}
	if _, ok := c.Values["share.sessions"]; ok {
		return
	}
	c.Values["share.sessions"] = true
	release := func() {
		for _, cl := range h.share.sessions.ConnClosed(c) {
			h.releaseShareMember(cl.Key.Group, cl.Key.Member, cl.Parts)
		}
	}
	if h.share.watch != nil {
		h.share.watch(c, release)
		return
	}
	go func() {
		<-c.Gone()
		release()
	}()
}

// shareRead is one acquisition on one partition.
type shareRead struct {
	data     []byte
	acquired []share.AcquiredRange
	err      int16
}

// acquireShare reads sp's partition p from the share partition's next
// fetch offset, at most maxBytes (the first batch always whole), up to the
// high watermark (the last stable offset under read_committed), and
// acquires for member what it read, at most maxRecords. Only the batch
// headers are read up to the end of the window (maxInFlight offsets from
// SPSO), and then only the batches that hold acquired offsets. Control
// batches and, under read_committed, aborted transactional batches are
// archived. The records returned are the batches that hold acquired
// offsets.
func (h *Handlers) acquireShare(sp *share.Partition, p *broker.Partition, member string, readCommitted bool, maxInFlight int, maxBytes int64, maxRecords int, strict bool) shareRead {
	now := h.b.Now()
	if sp.ExpiryDue(now) {
		// Locks passed: their releases are written before their records
		// are acquired again (share/expiry.go). A fenced write is
		// NOT_LEADER_OR_FOLLOWER, as Kafka's SharePartition maps a
		// fenced persister error (fetchPersisterError); any other leaves
		// the released records out until a write succeeds.
		ctx, cancel := context.WithTimeout(context.Background(), shareWriteTimeout)
		err := sp.PersistExpired(ctx, now)
		cancel()
		if err != nil && h.dropIfFenced(sp, err) {
			return shareRead{err: kerr.NotLeaderForPartition.Code}
		}
	}
	sp.AdvanceTo(p.LogStartOffset())
	from, ok := sp.NextFetchOffset(now)
	if !ok {
		return shareRead{}
	}
	res, slice, err := p.Fetch(replica.FetchRequest{ReplicaID: -1, BrokerEpoch: -1, CurrentLeaderEpoch: -1,
		FetchOffset: from, LastFetchedEpoch: -1, LogStartOffset: -1, ReadCommitted: readCommitted}, int(max(maxBytes, 0)), true)
	if errors.Is(err, storage.ErrOffsetTiered) {
		// Below the local log start of a tiered topic: the remote log
		// (share_remote.go).
		data, txns, code := h.readShareRemote(p, from, res.To, maxBytes, readCommitted)
		if code != 0 || len(data) == 0 {
			return shareRead{err: code}
		}
		return acquireShareBytes(sp, member, now, from, data, txns, readCommitted, maxRecords, strict)
	}
	if err != nil {
		return shareRead{err: kerr.KafkaStorageError.Code}
	}
	if res.Error != 0 {
		if res.Error == kerr.OffsetOutOfRange.Code {
			return shareRead{} // the log moved under the read; next time
		}
		return shareRead{err: res.Error}
	}
	if slice.Size == 0 {
		return shareRead{}
	}
	// Only the headers are read first, up to the batch that reaches the
	// end of the window the acquisition may grow to; the batches holding
	// acquired offsets are read afterwards.
	if maxInFlight <= 0 {
		maxInFlight = share.DefaultMaxInFlight
	}
	start, _ := sp.Offsets()
	hds, err := sliceBatches(slice, start+int64(maxInFlight)-1)
	if err != nil {
		return shareRead{err: kerr.KafkaStorageError.Code}
	}
	if len(hds) == 0 {
		return shareRead{}
	}
	var aborted []abortedRange
	if readCommitted {
		for _, a := range p.Log().AbortedTxns(from, hds[len(hds)-1].hd.NextOffset()) {
			aborted = append(aborted, abortedRange{pid: a.ProducerID, first: a.FirstOffset, last: a.LastOffset})
		}
	}
	batches := make([]share.LogBatch, len(hds))
	for i, sb := range hds {
		hd := sb.hd
		batches[i] = share.LogBatch{First: hd.BaseOffset, Last: hd.LastOffset(),
			Skip: hd.IsControl() || readCommitted && hd.IsTransactional() && isAborted(aborted, hd.ProducerID, hd.BaseOffset)}
	}
	acq := sp.Acquire(member, now, from, batches, maxRecords, strict)
	if len(acq) == 0 {
		return shareRead{}
	}
	// Send the batches that hold acquired offsets.
	var send []sliceBatch
	k := 0
	for i, lb := range batches {
		for k < len(acq) && acq[k].Last < lb.First {
			k++
		}
		if k < len(acq) && acq[k].First <= lb.Last && !lb.Skip {
			send = append(send, hds[i])
		}
	}
	data, err := readBatches(slice, send)
	if err != nil {
		// The records are acquired but cannot be sent: their locks
		// expire and they are delivered again.
		return shareRead{err: kerr.KafkaStorageError.Code}
	}
	return shareRead{data: data, acquired: acq}
}

// acquireShareBytes acquires for member from data, batches read whole
// (the remote log), as acquireShare does from a local slice: control
// batches and, under read_committed, batches of the aborted transactions
// txns are archived; the batches holding acquired offsets are returned.
func acquireShareBytes(sp *share.Partition, member string, now time.Time, from int64, data []byte, txns []storage.AbortedTxn, readCommitted bool, maxRecords int, strict bool) shareRead {
	var aborted []abortedRange
	for _, a := range txns {
		aborted = append(aborted, abortedRange{pid: a.ProducerID, first: a.FirstOffset, last: a.LastOffset})
	}
	type span struct{ start, end int }
	var batches []share.LogBatch
	var spans []span
	for pos, rest := 0, data; len(rest) > 0; {
		hd, b, next, err := batch.Next(rest)
		if err != nil {
			break
		}
		lb := share.LogBatch{First: hd.BaseOffset, Last: hd.BaseOffset + int64(hd.LastOffsetDelta)}
		lb.Skip = hd.IsControl() || readCommitted && hd.IsTransactional() && isAborted(aborted, hd.ProducerID, hd.BaseOffset)
		batches = append(batches, lb)
		spans = append(spans, span{pos, pos + len(b)})
		pos += len(b)
		rest = next
	}
	acq := sp.Acquire(member, now, from, batches, maxRecords, strict)
	if len(acq) == 0 {
		return shareRead{}
	}
	out := make([]byte, 0, len(data))
	k := 0
	for i, lb := range batches {
		for k < len(acq) && acq[k].Last < lb.First {
			k++
		}
		if k < len(acq) && acq[k].First <= lb.Last && !lb.Skip {
			out = append(out, data[spans[i].start:spans[i].end]...)
		}
	}
	return shareRead{data: out, acquired: acq}
}

// sliceBatch is one batch of a storage.Slice: its header, and where it is.
type sliceBatch struct {
	hd       batch.Header
	chunk    int
	pos, len int64
}

// sliceBatches reads the headers of s's batches in order, without their
// records, up to the first batch whose last offset reaches stop.
func sliceBatches(s storage.Slice, stop int64) ([]sliceBatch, error) {
	var out []sliceBatch
	var buf [batch.HeaderSize]byte
	for ci, c := range s.Chunks {
		for pos := c.Pos; pos+batch.HeaderSize <= c.Pos+c.Len; {
			if _, err := c.File.ReadAt(buf[:], pos); err != nil {
				return nil, err
			}
			hd, err := batch.ParseHeader(buf[:])
			if err != nil {
				return nil, err
			}
			n := int64(hd.Size())
			if pos+n > c.Pos+c.Len {
				break
			}
			out = append(out, sliceBatch{hd: hd, chunk: ci, pos: pos, len: n})
			if hd.LastOffset() >= stop {
				return out, nil
			}
			pos += n
		}
	}
	return out, nil
}

// readBatches reads the bytes of bs (batches of s, in order), joining
// the reads of adjacent ones.
func readBatches(s storage.Slice, bs []sliceBatch) ([]byte, error) {
	total := int64(0)
	for _, b := range bs {
		total += b.len
	}
	out := make([]byte, 0, total)
	for i := 0; i < len(bs); {
		j, end := i+1, bs[i].pos+bs[i].len
		for j < len(bs) && bs[j].chunk == bs[i].chunk && bs[j].pos == end {
			end += bs[j].len
			j++
		}
		n := len(out)
		out = out[:n+int(end-bs[i].pos)]
		if m, err := s.Chunks[bs[i].chunk].File.ReadAt(out[n:], bs[i].pos); m < len(out)-n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		i = j
	}
	return out, nil
}

// abortedRange is an aborted transaction of the read range.
type abortedRange struct {
	pid         int64
	first, last int64
}

// isAborted reports whether a transactional batch of pid at offset lies in
// an aborted transaction of pid.
func isAborted(aborted []abortedRange, pid, offset int64) bool {
	for _, a := range aborted {
		if a.pid == pid && offset >= a.first && offset <= a.last {
			return true
		}
	}
	return false
}

// shareEndpoint is one leader's endpoint for a share response's
// NodeEndpoints.
type shareEndpoint struct {
	id   int32
	host string
	port int32
	rack *string
}

// shareEndpoints returns the endpoints, on the listener r came in on, of
// leaders (the CurrentLeader of NOT_LEADER_OR_FOLLOWER partitions): the
// client goes there without a metadata request (KIP-951, as Fetch v16).
func (h *Handlers) shareEndpoints(r *protocol.Request, leaders []int32) []shareEndpoint {
	brokers := h.b.Image().Brokers
	seen := map[int32]bool{}
	var out []shareEndpoint
	for _, id := range leaders {
		br, ok := brokers[id]
		if id < 0 || seen[id] || !ok {
			continue
		}
		seen[id] = true
		host, port, ok := endpoint(r, br)
		if !ok {
			continue
		}
		e := shareEndpoint{id: br.ID, host: host, port: port}
		if br.Rack != "" {
			rack := br.Rack
			e.rack = &rack
		}
		out = append(out, e)
	}
	return out
}
