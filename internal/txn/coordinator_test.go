package txn

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
)

func openBroker(t *testing.T) *broker.Broker {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Props["transaction.state.log.num.partitions"] = "3"
	b, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("t", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	// AddOffsetsToTxn's partition; a marker to a topic that does not
	// exist counts as written.
	if err := b.CreateTopic("__consumer_offsets", 3, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// fakeMarkers records marker requests and answers them with fail (nil:
// every partition succeeds).
type fakeMarkers struct {
	mu   sync.Mutex
	sent []kmsg.WriteTxnMarkersRequestMarker
	fail error
	code int16
}

func (f *fakeMarkers) Send(_ context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		f.sent = append(f.sent, m)
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: f.code})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

func (f *fakeMarkers) set(fail error, code int16) {
	f.mu.Lock()
	f.fail, f.code = fail, code
	f.mu.Unlock()
}

func (f *fakeMarkers) markers() []kmsg.WriteTxnMarkersRequestMarker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]kmsg.WriteTxnMarkersRequestMarker{}, f.sent...)
}

func testCoordinator(t *testing.T, b *broker.Broker, clk *clock.Manual, fm *fakeMarkers) *Coordinator {
	cfg := ConfigFrom(b.Config())
	cfg.AbortInterval = time.Second
	cfg.RemoveInterval = time.Minute
	cfg.IDExpiration = time.Hour
	cfg.MarkerBackoff = 10 * time.Millisecond
	c := New(b, Options{Config: cfg, Clock: clk, Markers: fm})
	t.Cleanup(c.Close)
	return c
}

// initTxn calls InitProducerId until the coordinator has loaded.
func initTxn(t *testing.T, c *Coordinator, id string, pid int64, epoch int16) InitResult {
	t.Helper()
	for i := 0; i < 2000; i++ {
		r := c.InitProducerID(id, 60000, pid, epoch).Get()
		if r.Err != kerr.CoordinatorLoadInProgress && r.Err != kerr.ConcurrentTransactions {
			return r
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("InitProducerId never answered")
	return InitResult{}
}

// retryArmed waits until the earliest timer on clk is backoff away: a
// marker sender sleeping its retry backoff (testCoordinator's MarkerBackoff
// is 10 ms; the coordinator's other timers, the abort and removal checks,
// are 1 s and 1 min away, and a held AddPartitionsToTxn's is 500 ms).
func retryArmed(t *testing.T, clk *clock.Manual, backoff time.Duration) {
	t.Helper()
	for i := 0; ; i++ {
		if next, ok := clk.Next(); ok && next.Equal(clk.Now().Add(backoff)) {
			return
		}
		if i == 10000 {
			next, _ := clk.Next()
			t.Fatalf("no retry armed %v after %v: the next timer is at %v", backoff, clk.Now(), next)
		}
		time.Sleep(time.Millisecond) // polls for an event that does happen
	}
}

// waitState waits until id is in state want.
func waitState(t *testing.T, c *Coordinator, id string, want State) Metadata {
	t.Helper()
	var m Metadata
	for i := 0; i < 3000; i++ {
		var ok bool
		if m, ok = c.Describe(id); ok && m.State == want && m.Pending() == nil {
			return m
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s never reached %v: %+v", id, want, m)
	return m
}

func TestCoordinatorCommitAndAbort(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	fm := &fakeMarkers{}
	c := testCoordinator(t, b, clk, fm)

	r := initTxn(t, c, "tx", -1, -1)
	if r.Err != nil || r.ProducerID < 0 || r.Epoch != 0 {
		t.Fatalf("init: %+v", r)
	}
	pid := r.ProducerID
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 0}, {"t", 1}}).Get(); err != nil {
		t.Fatal(err)
	}
	// Adding again is a no-op; the offsets partition of a group joins.
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 1}}).Get(); err != nil {
		t.Fatal(err)
	}
	if err := c.AddOffsets("tx", pid, 0, "g").Get(); err != nil {
		t.Fatal(err)
	}
	if m := waitState(t, c, "tx", Ongoing); len(m.Partitions) != 3 {
		t.Fatalf("partitions: %v", m.Partitions)
	}
	// Verification (KIP-890 part 1) adds nothing.
	v := c.VerifyPartitions("tx", pid, 0, []Partition{{"t", 0}, {"other", 0}})
	if v[Partition{"t", 0}] != nil || v[Partition{"other", 0}] != kerr.InvalidTxnState {
		t.Fatalf("verify: %v", v)
	}
	// Wrong producer, wrong epoch.
	if err := c.AddPartitions("tx", pid+1, 0, []Partition{{"t", 0}}).Get(); err != kerr.InvalidProducerIDMapping {
		t.Fatalf("mapping: %v", err)
	}
	if err := c.AddPartitions("tx", pid, 1, []Partition{{"t", 0}}).Get(); err != kerr.ProducerFenced {
		t.Fatalf("epoch: %v", err)
	}
	if e := c.EndTxn("tx", pid, 0, true, 0).Get(); e.Err != nil {
		t.Fatalf("end: %+v", e)
	}
	waitState(t, c, "tx", CompleteCommit)
	ms := fm.markers()
	if len(ms) != 1 || !ms[0].Committed || ms[0].ProducerID != pid || ms[0].ProducerEpoch != 0 || len(ms[0].Topics) != 2 {
		t.Fatalf("markers: %+v", ms)
	}
	tp, _ := b.Partition(Topic, PartitionFor("tx", 3))
	if ms[0].CoordinatorEpoch != tp.LeaderEpoch() {
		t.Fatalf("coordinator epoch %d, leader epoch %d", ms[0].CoordinatorEpoch, tp.LeaderEpoch())
	}
	// A retried commit succeeds; an abort of it is invalid.
	if e := c.EndTxn("tx", pid, 0, true, 0).Get(); e.Err != nil {
		t.Fatalf("retried end: %+v", e)
	}
	if e := c.EndTxn("tx", pid, 0, false, 0).Get(); e.Err != kerr.InvalidTxnState {
		t.Fatalf("abort after commit: %+v", e)
	}
	// An empty transaction cannot end.
	if e := c.EndTxn("tx", pid, 0, false, 0).Get(); e.Err != kerr.InvalidTxnState {
		t.Fatalf("empty end: %+v", e)
	}
	// The second transaction aborts.
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 0}}).Get(); err != nil {
		t.Fatal(err)
	}
	if e := c.EndTxn("tx", pid, 0, false, 0).Get(); e.Err != nil {
		t.Fatal(e.Err)
	}
	waitState(t, c, "tx", CompleteAbort)
	if ms := fm.markers(); len(ms) != 2 || ms[1].Committed {
		t.Fatalf("abort markers: %+v", ms)
	}
}

func TestCoordinatorInitFencesOngoing(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	fm := &fakeMarkers{}
	c := testCoordinator(t, b, clk, fm)
	r := initTxn(t, c, "tx", -1, -1)
	pid := r.ProducerID
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 0}}).Get(); err != nil {
		t.Fatal(err)
	}
	// A new instance: the ongoing transaction is aborted first.
	if r := c.InitProducerID("tx", 60000, -1, -1).Get(); r.Err != kerr.ConcurrentTransactions {
		t.Fatalf("init over ongoing: %+v", r)
	}
	waitState(t, c, "tx", CompleteAbort)
	r = initTxn(t, c, "tx", -1, -1)
	if r.Err != nil || r.ProducerID != pid || r.Epoch != 2 {
		t.Fatalf("after the fence: %+v", r)
	}
	ms := fm.markers()
	if len(ms) != 1 || ms[0].Committed || ms[0].ProducerEpoch != 1 {
		t.Fatalf("fence markers: %+v", ms)
	}
	// The abort is the coordinator's: its markers carry the cluster's
	// transaction.version (2), so a partition refuses a late copy of them
	// once the producer's next transaction is open there.
	if ms[0].TransactionVersion != 2 {
		t.Fatalf("fence markers carry transaction version %d, want the cluster's 2", ms[0].TransactionVersion)
	}
	// The old instance is fenced.
	if e := c.EndTxn("tx", pid, 0, true, 0).Get(); e.Err != kerr.ProducerFenced {
		t.Fatalf("old instance: %+v", e)
	}
	// KIP-360 with the current id and epoch bumps; with an older epoch
	// it is fenced.
	if r := initTxn(t, c, "tx", pid, 2); r.Err != nil || r.Epoch != 3 {
		t.Fatalf("kip-360: %+v", r)
	}
	if r := initTxn(t, c, "tx", pid, 0); r.Err != kerr.ProducerFenced {
		t.Fatalf("stale kip-360: %+v", r)
	}
	if r := c.InitProducerID("tx", int32(c.cfg.MaxTimeout/time.Millisecond)+1, -1, -1).Get(); r.Err != kerr.InvalidTransactionTimeout {
		t.Fatalf("timeout: %+v", r)
	}
	if r := c.InitProducerID("", 1000, -1, -1).Get(); r.Err != kerr.InvalidRequest {
		t.Fatalf("empty id: %+v", r)
	}
}

func TestCoordinatorTimeoutAndExpiry(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	fm := &fakeMarkers{}
	c := testCoordinator(t, b, clk, fm)
	r := c.InitProducerID("tx", 5000, -1, -1)
	var res InitResult
	for res = r.Get(); res.Err == kerr.CoordinatorLoadInProgress; res = c.InitProducerID("tx", 5000, -1, -1).Get() {
		time.Sleep(time.Millisecond)
	}
	pid := res.ProducerID
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 1}}).Get(); err != nil {
		t.Fatal(err)
	}
	// The abort check runs on this goroutine (an AfterFunc of the manual
	// clock) and an abort it starts is pending at once (the state follows
	// when the write commits): neither, right after Advance, is a fact.
	clk.Advance(5 * time.Second)
	if m, _ := c.Describe("tx"); m.State != Ongoing || m.Pending() != nil {
		t.Fatalf("aborted at the timeout: %v, pending %+v", m.State, m.Pending())
	}
	clk.Advance(time.Second)
	m := waitState(t, c, "tx", CompleteAbort)
	if m.Epoch != 1 {
		t.Fatalf("timeout abort did not bump the epoch: %+v", m)
	}
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 1}}).Get(); err != kerr.ProducerFenced {
		t.Fatalf("timed-out producer: %v", err)
	}
	// KIP-588: the producer recovers with its old epoch.
	if r := initTxn(t, c, "tx", pid, 0); r.Err != nil || r.Epoch != 1 {
		t.Fatalf("kip-588: %+v", r)
	}
	// Idle past transactional.id.expiration.ms: removed, durably.
	for i := 0; i < 61; i++ {
		clk.Advance(time.Minute)
	}
	for i := 0; i < 3000; i++ {
		if _, ok := c.Describe("tx"); !ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if m, ok := c.Describe("tx"); ok {
		t.Fatalf("not expired: %+v", m)
	}
	i := PartitionFor("tx", 3)
	c.Resign(i)
	c.Elect(i)
	for j := 0; j < 3000; j++ {
		if c.InitProducerID("zz-other", 1000, -1, -1).Get().Err != kerr.CoordinatorLoadInProgress {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if m, ok := c.Describe("tx"); ok {
		t.Fatalf("expired id came back after reload: %+v", m)
	}
}

func TestCoordinatorReloadRollsForward(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	fm := &fakeMarkers{}
	c := testCoordinator(t, b, clk, fm)
	for _, id := range []string{"a", "b", "c"} {
		initTxn(t, c, id, -1, -1)
	}
	mb, _ := c.Describe("b")
	if err := c.AddPartitions("b", mb.ProducerID, 0, []Partition{{"t", 0}}).Get(); err != nil {
		t.Fatal(err)
	}
	mc, _ := c.Describe("c")
	if err := c.AddPartitions("c", mc.ProducerID, 0, []Partition{{"t", 1}}).Get(); err != nil {
		t.Fatal(err)
	}
	// "c" commits while no marker gets through: it stays PrepareCommit.
	fm.set(errors.New("unreachable"), 0)
	if e := c.EndTxn("c", mc.ProducerID, 0, true, 0).Get(); e.Err != nil {
		t.Fatal(e.Err)
	}
	before := map[string]Metadata{}
	for _, id := range []string{"a", "b", "c"} {
		before[id], _ = c.Describe(id)
	}
	if before["c"].State != PrepareCommit {
		t.Fatalf("c: %v", before["c"].State)
	}
	// Move every shard away and back: the same state is rebuilt, and
	// the prepared commit is completed by the new incarnation.
	for i := int32(0); i < 3; i++ {
		c.Resign(i)
	}
	fm.set(nil, 0)
	for i := int32(0); i < 3; i++ {
		c.Elect(i)
	}
	after := waitState(t, c, "c", CompleteCommit)
	if after.ProducerID != mc.ProducerID || after.Epoch != 0 {
		t.Fatalf("c after roll forward: %+v", after)
	}
	ms := fm.markers()
	if len(ms) == 0 || !ms[len(ms)-1].Committed || ms[len(ms)-1].ProducerID != mc.ProducerID {
		t.Fatalf("roll-forward markers: %+v", ms)
	}
	for _, id := range []string{"a", "b"} {
		got, ok := c.Describe(id)
		want := before[id]
		if !ok || got.State != want.State || got.ProducerID != want.ProducerID || got.Epoch != want.Epoch ||
			len(got.Partitions) != len(want.Partitions) || !got.Start.Equal(want.Start) || got.Timeout != want.Timeout {
			t.Fatalf("%s reloaded as %+v, was %+v", id, got, want)
		}
	}
	if c.NumTransactionalIDs() != 3 {
		t.Fatalf("ids: %d", c.NumTransactionalIDs())
	}
}

// advanceUntil moves clk in backoff steps until id is in state want.
func advanceUntil(t *testing.T, c *Coordinator, clk *clock.Manual, id string, want State) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if m, ok := c.Describe(id); ok && m.State == want && m.Pending() == nil {
			return
		}
		clk.Advance(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	m, _ := c.Describe(id)
	t.Fatalf("%s never reached %v: %+v", id, want, m)
}

// TestCoordinatorMarkerRetries: markers are retried after a retriable
// answer until they are written; a deleted topic's partition counts as
// written; a fenced answer stops the sending.
func TestCoordinatorMarkerRetries(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	if err := b.CreateTopic("gone", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	fm := &fakeMarkers{}
	c := testCoordinator(t, b, clk, fm)
	pid := initTxn(t, c, "tx", -1, -1).ProducerID
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 0}, {"gone", 0}}).Get(); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	fm.set(nil, kerr.NotLeaderForPartition.Code)
	if e := c.EndTxn("tx", pid, 0, true, 0).Get(); e.Err != nil {
		t.Fatal(e.Err)
	}
	// The sender, answered NOT_LEADER, sleeps its backoff on the manual
	// clock before it sends again; the transaction completes only after a
	// send that writes every marker. With that retry armed and the clock
	// still, it has not completed, and cannot meanwhile.
	retryArmed(t, clk, 10*time.Millisecond)
	if len(fm.markers()) == 0 {
		t.Fatal("a retry armed before any marker was sent")
	}
	if m, _ := c.Describe("tx"); m.State != PrepareCommit {
		t.Fatalf("completed without its markers: %v", m.State)
	}
	if e := c.EndTxn("tx", pid, 0, true, 0).Get(); e.Err != kerr.ConcurrentTransactions {
		t.Fatalf("retried end while sending: %+v", e)
	}
	fm.set(nil, 0)
	advanceUntil(t, c, clk, "tx", CompleteCommit)
	for _, m := range fm.markers() {
		for _, tp := range m.Topics {
			if tp.Topic != "t" {
				t.Fatalf("marker sent to %s", tp.Topic)
			}
		}
	}

	// A fenced answer: this coordinator stops and leaves the
	// transaction prepared (for a newer coordinator to complete).
	fm.set(nil, kerr.TransactionCoordinatorFenced.Code)
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 1}}).Get(); err != nil {
		t.Fatal(err)
	}
	sent := len(fm.markers())
	if e := c.EndTxn("tx", pid, 0, false, 0).Get(); e.Err != nil {
		t.Fatal(e.Err)
	}
	for len(fm.markers()) == sent {
		time.Sleep(time.Millisecond)
	}
	// The sender gives up on the fenced answer: its goroutine ends
	// (c.work holds only marker senders and loaders, all done but this
	// one) instead of arming a retry. Once it has, no goroutine is left
	// to send anything, so the clock moving past every backoff shows
	// that nothing more is sent, without a guess at how long to wait.
	idle := make(chan struct{})
	go func() { c.work.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("the marker sender did not stop on a fenced answer")
	}
	for i := 0; i < 50; i++ {
		clk.Advance(time.Second)
	}
	if m, _ := c.Describe("tx"); m.State != PrepareAbort || len(fm.markers()) != sent+1 {
		t.Fatalf("fenced: %v, %d markers", m.State, len(fm.markers())-sent)
	}
}

// TestCoordinatorEpochExhaustion: at the last epoch InitProducerId hands
// out a new producer id at epoch 0; a retry with the exhausted epoch of
// the previous id gets the same answer (KIP-360).
func TestCoordinatorEpochExhaustion(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	c := testCoordinator(t, b, clk, &fakeMarkers{})
	pid := initTxn(t, c, "tx", -1, -1).ProducerID
	s, err := c.lockShard("tx")
	if err != nil {
		t.Fatal(err)
	}
	s.txns["tx"].Epoch = math.MaxInt16 - 1
	s.mu.Unlock()
	r := initTxn(t, c, "tx", pid, math.MaxInt16-1)
	if r.Err != nil || r.ProducerID == pid || r.Epoch != 0 {
		t.Fatalf("exhausted: %+v", r)
	}
	if again := initTxn(t, c, "tx", pid, math.MaxInt16-1); again != r {
		t.Fatalf("retry: %+v, first %+v", again, r)
	}
	if m, _ := c.Describe("tx"); m.PrevProducerID != pid {
		t.Fatalf("previous id: %+v", m)
	}
	// Without an expected epoch an exhausted id rotates too.
	s, _ = c.lockShard("tx")
	s.txns["tx"].Epoch = math.MaxInt16 - 1
	s.mu.Unlock()
	if r2 := initTxn(t, c, "tx", -1, -1); r2.Err != nil || r2.ProducerID == r.ProducerID || r2.Epoch != 0 {
		t.Fatalf("exhausted, new instance: %+v", r2)
	}
}

// TestCoordinatorTxnVersion2: EndTxn v5 bumps the epoch at every end and
// returns it; its retry at the previous epoch gets the same answer.
func TestCoordinatorTxnVersion2(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	fm := &fakeMarkers{}
	c := testCoordinator(t, b, clk, fm)
	pid := initTxn(t, c, "tx", -1, -1).ProducerID
	if err := c.AddPartitions("tx", pid, 0, []Partition{{"t", 0}}).Get(); err != nil {
		t.Fatal(err)
	}
	e := c.EndTxn("tx", pid, 0, true, 2).Get()
	if e.Err != nil || e.ProducerID != pid || e.Epoch != 1 {
		t.Fatalf("end v5: %+v", e)
	}
	waitState(t, c, "tx", CompleteCommit)
	if ms := fm.markers(); len(ms) != 1 || ms[0].ProducerEpoch != 1 {
		t.Fatalf("markers at the bumped epoch: %+v", ms)
	}
	if r := c.EndTxn("tx", pid, 0, true, 2).Get(); r != e {
		t.Fatalf("retry: %+v, first %+v", r, e)
	}
	if r := c.EndTxn("tx", pid, 1, true, 2).Get(); r.Err != kerr.InvalidTxnState {
		t.Fatalf("empty next transaction: %+v", r)
	}
	// The next transaction runs at the new epoch.
	if err := c.AddPartitions("tx", pid, 1, []Partition{{"t", 1}}).Get(); err != nil {
		t.Fatal(err)
	}
	if e := c.EndTxn("tx", pid, 1, false, 2).Get(); e.Err != nil || e.Epoch != 2 {
		t.Fatalf("second end: %+v", e)
	}
}

// gatedMarkers holds every request until released and records how many
// markers each one carried.
type gatedMarkers struct {
	fakeMarkers
	gate    chan struct{}
	mu      sync.Mutex
	perReq  []int
	arrived chan struct{}
}

func (g *gatedMarkers) Send(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	g.mu.Lock()
	g.perReq = append(g.perReq, len(req.Markers))
	g.mu.Unlock()
	g.arrived <- struct{}{}
	<-g.gate
	return g.fakeMarkers.Send(ctx, node, req)
}

// TestCoordinatorMarkerBatching: while a WriteTxnMarkers request to a
// broker is in flight, the markers of other transactions for it queue and
// go out together in the next request.
func TestCoordinatorMarkerBatching(t *testing.T) {
	clk := clock.NewManual(t0)
	b := openBroker(t)
	g := &gatedMarkers{gate: make(chan struct{}), arrived: make(chan struct{}, 10)}
	c := testCoordinator(t, b, clk, &fakeMarkers{})
	c.markers = g
	ids := []string{"a", "b", "c", "d"}
	pids := map[string]int64{}
	for _, id := range ids {
		pids[id] = initTxn(t, c, id, -1, -1).ProducerID
		if err := c.AddPartitions(id, pids[id], 0, []Partition{{"t", 0}}).Get(); err != nil {
			t.Fatal(err)
		}
	}
	if e := c.EndTxn("a", pids["a"], 0, true, 0).Get(); e.Err != nil {
		t.Fatal(e.Err)
	}
	<-g.arrived // a's request is in flight
	for _, id := range ids[1:] {
		if e := c.EndTxn(id, pids[id], 0, true, 0).Get(); e.Err != nil {
			t.Fatal(e.Err)
		}
	}
	// b, c and d queue behind a.
	for queued := 0; queued < 3; {
		time.Sleep(time.Millisecond)
		c.queues.mu.Lock()
		queued = len(c.queues.queues[b.NodeID()])
		c.queues.mu.Unlock()
	}
	close(g.gate)
	for _, id := range ids {
		waitState(t, c, id, CompleteCommit)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.perReq) != 2 || g.perReq[0] != 1 || g.perReq[1] != 3 {
		t.Fatalf("markers per request: %v", g.perReq)
	}
}
