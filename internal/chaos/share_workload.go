package chaos

// The share workload (--workload share): the queue workload's producers,
// and instead of its assign-mode readers a share group (KIP-932)
// "chaos-share" of franz-go kgo.ShareGroup members that acknowledge every
// record they are given: mostly accept, some release (the record is
// delivered again), some reject (archived). Now and then a member stalls
// past its acquisition lock before acknowledging (the group's
// share.record.lock.duration.ms is set low), crashes (its connections
// are cut, so it stops without leaving; the broker releases its locks
// when the connections close, or the locks pass), or leaves (closes its
// client); a new member takes its place. Every member flushes its
// acknowledgements after each poll and learns from the
// ShareAckCallback, per partition, whether they were confirmed. After the
// faults the members drain the topic, accepting everything, until every
// acknowledged send is complete. The share checker (share_checker.go)
// reads what the members saw.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WorkloadShare is the queue's producers consumed by a share group whose
// members accept, release and reject records and sometimes stall past
// their lock, crash or leave (share_workload.go).
const WorkloadShare = "share"

// shareGroupName is the share group the workload's members join.
const shareGroupName = "chaos-share"

// Share workload settings: the group's lock duration and delivery limit
// (group configs, KIP-932), and the odds of each member action.
const (
	shareLockMs       = 4000
	shareDeliveryMax  = 10 // share.delivery.count.limit (Kafka's most)
	shareReleasePct   = 8
	shareRejectPct    = 6
	shareStallPerMil  = 25 // per poll with records
	shareCrashPerMil  = 8
	shareLeavePerMil  = 8
	shareMaxPollBatch = 50
)

// shareProps are the broker settings of the share workload: group configs
// may set a lock as short as 1 s, and members are fenced 6 s after their
// last heartbeat.
var shareProps = []string{
	"group.share.min.record.lock.duration.ms=1000",
	"group.share.session.timeout.ms=6000",
	"group.share.min.session.timeout.ms=3000",
	"group.share.heartbeat.interval.ms=1000",
	"group.share.min.heartbeat.interval.ms=500",
}

// shareGroupConfigs are the group configs the harness sets on
// chaos-share before any member joins (IncrementalAlterConfigs on the
// GROUP resource).
var shareGroupConfigs = map[string]string{
	"share.auto.offset.reset":       "earliest",
	"share.record.lock.duration.ms": fmt.Sprint(shareLockMs),
	"share.delivery.count.limit":    fmt.Sprint(shareDeliveryMax),
}

// Delivery is one record a share group member was given, and what became
// of its acknowledgement.
type Delivery struct {
	Member    string `json:"member"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
	// Count is the record's delivery count (1 on its first delivery).
	Count int32 `json:"count"`
	// AtMs is when the poll that returned the record returned (the
	// record was acquired before); DeadlineMs the acquisition lock's
	// deadline as the client computed it (at or after the broker's).
	AtMs       float64 `json:"atMs"`
	DeadlineMs float64 `json:"deadlineMs"`
	// Ack is "accept", "release", "reject", or "" if the member never
	// acknowledged it (it crashed or left first).
	Ack string `json:"ack,omitempty"`
	// AckSentMs is when the acknowledgement was flushed (the broker saw
	// it no earlier), AckDoneMs when the flush returned.
	AckSentMs float64 `json:"ackSentMs,omitempty"`
	AckDoneMs float64 `json:"ackDoneMs,omitempty"`
	// AckResult is "ok" (the broker confirmed it), "fail" (the broker
	// answered an error: nothing changed) or "info" (unknown: no answer,
	// or one answer for several acknowledgements that disagreed).
	AckResult string `json:"ackResult,omitempty"`
	AckErr    string `json:"ackErr,omitempty"`
	// Stalled: the member waited past the lock before acknowledging.
	Stalled bool `json:"stalled,omitempty"`
	// Drain: delivered in the final drain.
	Drain bool `json:"drain,omitempty"`
}

// ShareStats counts the share workload.
type ShareStats struct {
	Members    int            `json:"members"`
	Crashes    int            `json:"crashes"`
	Leaves     int            `json:"leaves"`
	Stalls     int            `json:"stalls"`
	Deliveries int            `json:"deliveries"`
	Acks       map[string]int `json:"acks"`
	Results    map[string]int `json:"results"`
	// Redelivered counts deliveries with a count above 1.
	Redelivered int `json:"redelivered"`
	// AckErrs counts the acknowledgement errors by message.
	AckErrs map[string]int `json:"ackErrs,omitempty"`
}

// shareHistory collects the deliveries.
type shareHistory struct {
	mu    sync.Mutex
	dels  []Delivery
	stats ShareStats
}

func (sh *shareHistory) add(ds []Delivery) {
	sh.mu.Lock()
	sh.dels = append(sh.dels, ds...)
	sh.mu.Unlock()
}

// smember is one share group member.
type smember struct {
	gmember
	// results collects the ShareAckCallback's outcomes per partition
	// since the last flush.
	rmu     sync.Mutex
	results map[int32][]error
	// lostReqs counts the ShareFetch and ShareAcknowledge requests
	// written (in part or whole) whose response never came: the client
	// may retry their acknowledgements on a new connection, and the
	// retry's error (SHARE_SESSION_NOT_FOUND, INVALID_RECORD_STATE) then
	// says nothing about whether the first attempt applied them.
	lostReqs atomic.Int64
}

// OnBrokerE2E counts m's share requests without a response.
func (m *smember) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if (key == 78 || key == 79) && e2e.Err() != nil && e2e.BytesWritten > 0 {
		m.lostReqs.Add(1)
	}
}

// shareWorkload drives the members.
type shareWorkload struct {
	w  *workload
	sh *shareHistory
	// ctx is the workload's: members start under it.
	ctx context.Context

	mu      sync.Mutex
	members []*smember
	next    int
	drain   bool
	stopped bool
	wg      sync.WaitGroup
}

// setGroupConfigs sets shareGroupConfigs on the group and waits until
// every node describes them (a share partition loaded before would start
// at the latest offset).
func (s *shareWorkload) setGroupConfigs(ctx context.Context, cl *kgo.Client, nodes []int) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, shareGroupName
	for k, v := range shareGroupConfigs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, &v
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err == nil {
			err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("setting the share group's configs: %w", err)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	for _, id := range nodes {
		for {
			if s.describes(ctx, cl, id) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d does not describe the share group's configs", id)
			}
			sleepCtx(ctx, 250*time.Millisecond)
		}
	}
	return nil
}

// describes reports whether node id describes every shareGroupConfigs.
func (s *shareWorkload) describes(ctx context.Context, cl *kgo.Client, id int) bool {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, shareGroupName
	req.Resources = append(req.Resources, r)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := cl.Broker(id).Request(rctx, req)
	if err != nil {
		return false
	}
	res := resp.(*kmsg.DescribeConfigsResponse).Resources
	if len(res) != 1 {
		return false
	}
	got := 0
	for _, c := range res[0].Configs {
		if want, ok := shareGroupConfigs[c.Name]; ok && c.Value != nil && *c.Value == want {
			got++
		}
	}
	return got == len(shareGroupConfigs)
}

// startMember starts a member.
func (s *shareWorkload) startMember(ctx context.Context) {
	w := s.w
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	idx := s.next
	name := fmt.Sprintf("s%d", idx)
	s.next++
	s.mu.Unlock()
	m := &smember{gmember: gmember{name: name, done: make(chan struct{})}, results: map[int32][]error{}}
	opts := append(w.c.clientOpts(),
		kgo.Dialer(m.dial(w.c.dialer())),
		kgo.WithHooks(m),
		kgo.ShareGroup(shareGroupName), kgo.ConsumeTopics(w.topic),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ShareMaxRecords(shareMaxPollBatch),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			m.rmu.Lock()
			for _, r := range rs {
				if r.Topic == w.topic {
					m.results[r.Partition] = append(m.results[r.Partition], r.Err)
				}
			}
			m.rmu.Unlock()
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		w.h.pollErr(err)
		return
	}
	m.cl = cl
	mctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		cancel()
		cl.Close()
		return
	}
	s.members = append(s.members, m)
	s.mu.Unlock()
	s.sh.mu.Lock()
	s.sh.stats.Members++
	s.sh.mu.Unlock()
	rng := rand.New(rand.NewPCG(w.o.Seed, uint64(7000+idx)))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(m.done)
		tainted := false
		for mctx.Err() == nil && !m.dead.Load() {
			pctx, pcancel := context.WithTimeout(mctx, time.Second)
			fs := cl.PollRecords(pctx, shareMaxPollBatch)
			pcancel()
			if m.dead.Load() {
				return
			}
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					w.h.pollErr(err)
				}
			})
			rs := fs.Records()
			if len(rs) == 0 {
				continue
			}
			tainted = s.handle(mctx, m, rng, rs, tainted)
		}
	}()
}

// handle acknowledges one poll's records, flushes, and records the
// deliveries with their outcome; it returns whether the flush timed out
// (the next flush's results may then include this one's).
func (s *shareWorkload) handle(ctx context.Context, m *smember, rng *rand.Rand, rs []*kgo.Record, tainted bool) bool {
	w := s.w
	at := w.h.since()
	s.mu.Lock()
	drain := s.drain
	s.mu.Unlock()
	ds := make([]Delivery, len(rs))
	for i, r := range rs {
		ds[i] = Delivery{Member: m.name, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value),
			Count: r.DeliveryCount(), AtMs: at, Drain: drain}
		if dl := r.AcquisitionDeadline(); !dl.IsZero() {
			ds[i].DeadlineMs = float64(dl.Sub(w.h.t0).Microseconds()) / 1000
		}
	}
	if !drain {
		switch x := rng.IntN(1000); {
		case x < shareCrashPerMil:
			s.sh.add(ds) // given, never acknowledged
			go s.replace(m, true)
			m.crash()
			return tainted
		case x < shareCrashPerMil+shareLeavePerMil:
			s.sh.add(ds)
			go s.replace(m, false)
			m.cancel()
			return tainted
		case x < shareCrashPerMil+shareLeavePerMil+shareStallPerMil:
			s.sh.mu.Lock()
			s.sh.stats.Stalls++
			s.sh.mu.Unlock()
			for i := range ds {
				ds[i].Stalled = true
			}
			sleepCtx(ctx, time.Duration(shareLockMs+1000+rng.IntN(2000))*time.Millisecond)
		}
	}
	m.rmu.Lock()
	clear(m.results)
	m.rmu.Unlock()
	lost := m.lostReqs.Load()
	for i, r := range rs {
		st, kind := kgo.AckAccept, "accept"
		if !drain {
			switch x := rng.IntN(100); {
			case x < shareReleasePct:
				st, kind = kgo.AckRelease, "release"
			case x < shareReleasePct+shareRejectPct:
				st, kind = kgo.AckReject, "reject"
			}
		}
		r.Ack(st)
		ds[i].Ack = kind
	}
	sent := w.h.since()
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	ferr := m.cl.FlushAcks(fctx)
	fcancel()
	done := w.h.since()
	m.rmu.Lock()
	results := m.results
	m.results = map[int32][]error{}
	m.rmu.Unlock()
	retried := m.lostReqs.Load() != lost
	for i := range ds {
		d := &ds[i]
		d.AckSentMs, d.AckDoneMs = sent, done
		d.AckResult, d.AckErr = ackOutcome(results[d.Partition], ferr, tainted || retried)
	}
	s.sh.add(ds)
	return ferr != nil
}

// definiteAckErrs are acknowledgement errors after which the broker
// changed nothing (the share partition checks every offset before it
// applies any; a failed state write restores the window). Other errors
// (a timeout, a lost connection, an error the client made up) leave the
// outcome unknown.
var definiteAckErrs = []error{
	kerr.InvalidRecordState, kerr.NotLeaderForPartition, kerr.FencedLeaderEpoch,
	kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidRequest,
	kerr.ShareSessionNotFound, kerr.InvalidShareSessionEpoch, kerr.GroupAuthorizationFailed,
	kerr.TopicAuthorizationFailed,
}

// ackOutcome classifies the results the ShareAckCallback gave for one
// partition during a flush: "ok" if every one succeeded (and the flush
// completed, and the previous one did too), "fail" if every one is a
// definite error and no share request of the member lost its response
// meanwhile (unsure), "info" otherwise.
func ackOutcome(errs []error, flushErr error, unsure bool) (string, string) {
	if flushErr != nil {
		return "info", "flush: " + flushErr.Error()
	}
	if len(errs) == 0 {
		return "info", "no acknowledgement result"
	}
	var ok, definite, unknown int
	var msg string
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
			continue
		case isDefiniteAckErr(err):
			definite++
		default:
			unknown++
		}
		msg = err.Error()
	}
	switch {
	case ok == len(errs) && !unsure:
		return "ok", ""
	case definite == len(errs) && !unsure:
		return "fail", msg
	}
	if msg == "" {
		msg = "after a flush that timed out or a request without a response"
	}
	return "info", msg
}

func isDefiniteAckErr(err error) bool {
	for _, d := range definiteAckErrs {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

// replace stops m (a crash cuts its connections first; a leave closes
// its client, which leaves the group) and starts a new member 1-3 s
// later.
func (s *shareWorkload) replace(m *smember, crash bool) {
	s.mu.Lock()
	for i, x := range s.members {
		if x == m {
			s.members = append(s.members[:i], s.members[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	m.cancel()
	<-m.done
	if crash {
		go m.cl.Close() // cannot reach the broker
	} else {
		m.cl.Close()
	}
	s.sh.mu.Lock()
	if crash {
		s.sh.stats.Crashes++
	} else {
		s.sh.stats.Leaves++
	}
	s.sh.mu.Unlock()
	sleepCtx(s.ctx, time.Duration(1000+rand.IntN(2000))*time.Millisecond)
	if s.ctx.Err() == nil {
		s.startMember(s.ctx)
	}
}

// run starts n members.
func (s *shareWorkload) run(ctx context.Context, n int) {
	s.ctx = ctx
	for range n {
		s.startMember(ctx)
	}
}

// drainUntil switches the members to accepting every record, waits until
// done reports every acknowledged send complete or timeout, and stops
// the members.
func (s *shareWorkload) drainUntil(ctx context.Context, timeout time.Duration, done func() (bool, string)) error {
	s.mu.Lock()
	s.drain = true
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	var why string
	for {
		var ok bool
		if ok, why = done(); ok {
			why = ""
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, time.Second)
	}
	s.stop()
	if why != "" {
		return fmt.Errorf("after %v of draining: %s", timeout, why)
	}
	return nil
}

// stop closes every member (they leave the group).
func (s *shareWorkload) stop() {
	s.mu.Lock()
	ms := s.members
	s.members = nil
	s.stopped = true
	s.mu.Unlock()
	for _, m := range ms {
		m.cancel()
		<-m.done
		m.cl.Close()
	}
	waitTimeout(&s.wg, 15*time.Second)
}

// complete reports whether every acknowledged send so far is complete
// (shareComplete), and if not how many are not.
func (s *shareWorkload) complete(h *history) (bool, string) {
	h.mu.Lock()
	var ok []string
	for _, x := range h.sends {
		if x.Outcome == "ok" {
			ok = append(ok, x.Value)
		}
	}
	h.mu.Unlock()
	s.sh.mu.Lock()
	byVal := map[string][]*Delivery{}
	for i := range s.sh.dels {
		d := &s.sh.dels[i]
		byVal[d.Value] = append(byVal[d.Value], d)
	}
	missing := 0
	for _, v := range ok {
		if !shareComplete(byVal[v], shareDeliveryMax) {
			missing++
		}
	}
	s.sh.mu.Unlock()
	return missing == 0, fmt.Sprintf("%d of %d acknowledged sends not accepted, rejected or archived", missing, len(ok))
}

// count fills the delivery counts of ss from dels.
func (ss *ShareStats) count(dels []Delivery) {
	ss.Deliveries = len(dels)
	ss.Acks, ss.Results, ss.AckErrs = map[string]int{}, map[string]int{}, map[string]int{}
	for _, d := range dels {
		ack := d.Ack
		if ack == "" {
			ack = "none"
		}
		ss.Acks[ack]++
		if d.AckResult != "" {
			ss.Results[d.AckResult]++
		}
		if d.Count > 1 {
			ss.Redelivered++
		}
		if d.AckErr != "" {
			e := d.AckErr
			if len(e) > 100 {
				e = e[:100]
			}
			ss.AckErrs[e]++
		}
	}
	if len(ss.AckErrs) == 0 {
		ss.AckErrs = nil
	}
}

// SharePartitionEnd is a share partition's state as the group's
// coordinator describes it after the drain (DescribeShareGroupOffsets v1).
type SharePartitionEnd struct {
	// Start is the share-partition start offset; End the high watermark
	// (ListOffsets); Lag the records from Start to the coordinator's high
	// watermark not yet accepted, rejected or archived.
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Lag   int64  `json:"lag"`
	Err   string `json:"err,omitempty"`
}

// describeEnd describes the group's share partitions of the topic once.
func (s *shareWorkload) describeEnd(ctx context.Context, cl *kgo.Client, ends map[int32]int64) map[int32]SharePartitionEnd {
	out := map[int32]SharePartitionEnd{}
	for p, end := range ends {
		out[p] = SharePartitionEnd{Start: -1, End: end, Lag: -1, Err: "not described"}
	}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = shareGroupName
	t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	t.Topic = s.w.topic
	for p := range ends {
		t.Partitions = append(t.Partitions, p)
	}
	g.Topics = append(g.Topics, t)
	req.Groups = append(req.Groups, g)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		return out
	}
	rg := resp.Groups[0]
	for _, rt := range rg.Topics {
		for _, rp := range rt.Partitions {
			e := SharePartitionEnd{Start: rp.StartOffset, End: ends[rp.Partition], Lag: rp.Lag}
			if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
				e.Err = err.Error()
			} else if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				e.Err = err.Error()
			}
			out[rp.Partition] = e
		}
	}
	return out
}

// endComplete reports whether every share partition of end is described
// as complete: its start offset at the high watermark and no lag.
func endComplete(end map[int32]SharePartitionEnd) (bool, string) {
	for p, e := range end {
		if e.Err != "" || e.Start != e.End || e.Lag != 0 {
			return false, fmt.Sprintf("partition %d described with start offset %d, lag %d, high watermark %d %s", p, e.Start, e.Lag, e.End, e.Err)
		}
	}
	return true, ""
}
