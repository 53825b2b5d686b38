package replica

import (
	"slices"
	"testing"

	"github.com/sluice-io/sluice/internal/epoch"
)

// newLeader returns broker 1 leading epoch le with replicas 1..3 and the
// given ISR, after appending n single-record batches (flushed).
func newLeader(t *testing.T, minISR int, isr []int32, le int32, n int) *Replica {
	t.Helper()
	r := New(Config{ID: 1, MinISR: minISR, LagTimeMaxMs: 1000}, LogState{})
	r.Tick(10_000)
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: le, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: isr})
	for i := 0; i < n; i++ {
		r.Append(ProduceRequest{Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
	}
	r.Flushed(r.LEO(), r.LogGen())
	r.Advance()
	return r
}

func fetch(r *Replica, id int32, off int64) FetchResult {
	return r.HandleFetch(FetchRequest{ReplicaID: id, BrokerEpoch: -1, CurrentLeaderEpoch: r.LeaderEpoch(),
		FetchOffset: off, LastFetchedEpoch: r.LeaderEpoch(), LogStartOffset: 0})
}

func TestLeaderHW(t *testing.T) {
	for _, tc := range []struct {
		name    string
		minISR  int
		isr     []int32
		fetches map[int32]int64 // follower -> fetch offset (in id order)
		flushed int64           // leader flushed offset (-1: all 10)
		want    int64
	}{
		{"no fetch yet: held after election", 1, []int32{1, 2, 3}, nil, -1, 0},
		{"one ISR follower has not fetched", 1, []int32{1, 2, 3}, map[int32]int64{2: 10}, -1, 0},
		{"min over the ISR", 1, []int32{1, 2, 3}, map[int32]int64{2: 10, 3: 4}, -1, 4},
		{"all caught up", 2, []int32{1, 2, 3}, map[int32]int64{2: 10, 3: 10}, -1, 10},
		{"leader counts only flushed", 1, []int32{1, 2, 3}, map[int32]int64{2: 10, 3: 10}, 6, 6},
		{"ISR of leader alone, min ISR 1", 1, []int32{1}, nil, -1, 10},
		{"strict min ISR: frozen below min ISR", 2, []int32{1}, map[int32]int64{2: 10}, -1, 0},
		{"caught-up non-ISR follower holds HW back", 1, []int32{1, 2}, map[int32]int64{2: 10, 3: 10}, -1, 10},
		{"lagging non-ISR follower does not", 1, []int32{1, 2}, map[int32]int64{2: 10, 3: 2}, -1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{ID: 1, MinISR: tc.minISR, LagTimeMaxMs: 1000}, LogState{})
			r.Tick(10_000)
			r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: tc.isr})
			for i := 0; i < 10; i++ {
				r.Append(ProduceRequest{Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
			}
			fl := tc.flushed
			if fl < 0 {
				fl = 10
			}
			r.Flushed(fl, r.LogGen())
			for _, id := range []int32{2, 3} {
				if off, ok := tc.fetches[id]; ok {
					fetch(r, id, off)
				}
			}
			if r.HW() != tc.want {
				t.Fatalf("HW = %d, want %d (%s)", r.HW(), tc.want, r)
			}
		})
	}
}

func TestHWMonotonic(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2, 3}, 1, 10)
	fetch(r, 2, 10)
	fetch(r, 3, 8)
	if r.HW() != 8 {
		t.Fatalf("HW %d", r.HW())
	}
	fetch(r, 3, 5) // a follower going back (it truncated) never lowers the HW
	if r.HW() != 8 {
		t.Fatalf("HW went back to %d", r.HW())
	}
}

func TestCaughtUpAndShrink(t *testing.T) {
	// Steady small produces: the follower always fetches a little behind the
	// live LEO but reaches the LEO of its previous fetch
	// (docs/kafka-replication.md §2.1 second rule), so it never leaves the ISR.
	r := newLeader(t, 1, []int32{1, 2, 3}, 1, 0)
	now := int64(10_000)
	off2 := int64(0)
	for i := 0; i < 50; i++ {
		now += 100
		r.Tick(now)
		fetch(r, 2, off2)
		off2 = r.LEO()
		fetch(r, 3, r.LEO())
		r.Append(ProduceRequest{Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
		r.Flushed(r.LEO(), r.LogGen())
		if rd := r.Ready(); rd.ISRProposal != nil {
			t.Fatalf("step %d: unexpected ISR proposal %v", i, rd.ISRProposal.NewISR)
		}
		r.Advance()
	}
	// Follower 3 stops; 2 keeps up. 3 leaves within 1.5x the lag time.
	stopped := now
	for now < stopped+1500 {
		now += 100
		r.Tick(now)
		fetch(r, 2, r.LEO())
		r.Append(ProduceRequest{Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
		r.Flushed(r.LEO(), r.LogGen())
		if rd := r.Ready(); rd.ISRProposal != nil {
			if !slices.Equal(rd.ISRProposal.NewISR, []int32{1, 2}) {
				t.Fatalf("proposal %v", rd.ISRProposal.NewISR)
			}
			if now-stopped < 1000 {
				t.Fatalf("shrunk after %dms, before the lag time", now-stopped)
			}
			return
		}
		r.Advance()
	}
	t.Fatal("stopped follower never removed")
}

func TestExpandConditions(t *testing.T) {
	// Leader of epoch 2 whose epoch started at 10 with HW 6 (KAFKA-7128).
	c := &epoch.Cache{}
	c.Assign(1, 0)
	r := New(Config{ID: 1, MinISR: 1, LagTimeMaxMs: 1000}, LogState{LEO: 10, HW: 6, Epochs: c})
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	r.Advance()
	for _, tc := range []struct {
		off     int64
		propose bool
	}{{5, false}, {6, false}, {9, false}, {10, true}} {
		res := r.HandleFetch(FetchRequest{ReplicaID: 3, BrokerEpoch: -1, CurrentLeaderEpoch: 2, FetchOffset: tc.off, LastFetchedEpoch: 1})
		if res.Error != ErrNone || res.Diverging != nil {
			t.Fatalf("fetch %d: %+v", tc.off, res)
		}
		rd := r.Ready()
		if got := rd.ISRProposal != nil; got != tc.propose {
			t.Fatalf("fetch offset %d (HW 6, epoch start 10): proposal=%v want %v", tc.off, got, tc.propose)
		}
		r.Advance()
	}
	if got := r.MaximalISR(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("maximal ISR %v: an expansion counts at once", got)
	}
}

// TestExpandWaitsForLogStart: a follower caught up to the leader's end
// joins the ISR only once its fetches show it has the leader's log start
// (a DeleteRecords answered while it was away must hold if it is elected).
func TestExpandWaitsForLogStart(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 10)
	r.HandleFetch(FetchRequest{ReplicaID: 2, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 10, LastFetchedEpoch: 1, LogStartOffset: 0})
	r.Advance()
	if r.HW() != 10 {
		t.Fatalf("HW %d", r.HW())
	}
	r.AdvanceLogStart(4)
	r.Advance()
	for _, tc := range []struct {
		logStart int64
		propose  bool
	}{{0, false}, {3, false}, {4, true}} {
		res := r.HandleFetch(FetchRequest{ReplicaID: 3, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 10, LastFetchedEpoch: 1, LogStartOffset: tc.logStart})
		if res.Error != ErrNone || res.LogStart != 4 {
			t.Fatalf("fetch: %+v", res)
		}
		if got := r.Ready().ISRProposal != nil; got != tc.propose {
			t.Fatalf("follower log start %d (leader's 4): proposal=%v want %v", tc.logStart, got, tc.propose)
		}
		r.Advance()
	}
	// The low watermark waits for follower 2, which reported 0.
	if lw := r.LowWatermark(); lw != 0 {
		t.Fatalf("low watermark %d, want 0 until follower 2 reports the new log start", lw)
	}
	r.HandleFetch(FetchRequest{ReplicaID: 2, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: 10, LastFetchedEpoch: 1, LogStartOffset: 4})
	r.Advance()
	if lw := r.LowWatermark(); lw != 4 {
		t.Fatalf("low watermark %d, want 4", lw)
	}
}

func TestAcksAll(t *testing.T) {
	produce := func(r *Replica, id uint64) ProduceResult {
		r.Append(ProduceRequest{ID: id, Acks: AcksAll, DeadlineMs: 20_000, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
		r.Flushed(r.LEO(), r.LogGen())
		rd := r.Ready()
		defer r.Advance()
		if len(rd.Completed) == 0 {
			return ProduceResult{Error: -1}
		}
		return rd.Completed[0]
	}
	t.Run("not enough replicas before append", func(t *testing.T) {
		r := newLeader(t, 2, []int32{1}, 1, 0)
		if res := produce(r, 1); res.Error != ErrNotEnoughReplicas || r.LEO() != 0 {
			t.Fatalf("%+v leo %d", res, r.LEO())
		}
	})
	t.Run("completes when the HW passes", func(t *testing.T) {
		r := newLeader(t, 2, []int32{1, 2}, 1, 0)
		if res := produce(r, 1); res.Error != -1 {
			t.Fatalf("completed early: %+v", res)
		}
		fetch(r, 2, 1)
		rd := r.Ready()
		if len(rd.Completed) != 1 || rd.Completed[0].Error != ErrNone || rd.Completed[0].BaseOffset != 0 {
			t.Fatalf("%+v", rd.Completed)
		}
	})
	t.Run("HW frozen after the ISR drops below min: times out", func(t *testing.T) {
		r := newLeader(t, 2, []int32{1, 2, 3}, 1, 0)
		produce(r, 1)
		fetch(r, 2, 1)
		// 3 has not fetched: the HW waits for it. The controller commits ISR
		// {1, 3} (2 was fenced): below nothing, but 3 still holds it back.
		r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}})
		r.Advance()
		// Then ISR {1}: the HW is frozen (strict min ISR), nothing completes.
		r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1}})
		fetch(r, 3, 1)
		if rd := r.Ready(); len(rd.Completed) != 0 || r.HW() != 0 {
			t.Fatalf("completed below min ISR: %+v hw %d", rd.Completed, r.HW())
		}
		r.Advance()
		r.Tick(20_000)
		if rd := r.Ready(); len(rd.Completed) != 1 || rd.Completed[0].Error != ErrRequestTimedOut {
			t.Fatalf("%+v", rd.Completed)
		}
	})
	t.Run("leader change fails parked requests", func(t *testing.T) {
		r := newLeader(t, 1, []int32{1, 2}, 1, 0)
		produce(r, 1)
		r.ApplyMetadata(PartitionState{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
		rd := r.Ready()
		if len(rd.Completed) != 1 || rd.Completed[0].Error != ErrNotLeaderOrFollower {
			t.Fatalf("%+v", rd.Completed)
		}
	})
}

func TestFencing(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2, 3}, 5, 3)
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, BrokerEpochs: []int64{10, 20, 30}})
	for _, tc := range []struct {
		req  FetchRequest
		want int16
	}{
		{FetchRequest{ReplicaID: 2, BrokerEpoch: 20, CurrentLeaderEpoch: 4, FetchOffset: 0, LastFetchedEpoch: -1}, ErrFencedLeaderEpoch},
		{FetchRequest{ReplicaID: 2, BrokerEpoch: 20, CurrentLeaderEpoch: 6, FetchOffset: 0, LastFetchedEpoch: -1}, ErrUnknownLeaderEpoch},
		{FetchRequest{ReplicaID: 9, BrokerEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 0, LastFetchedEpoch: -1}, ErrUnknownLeaderEpoch},
		{FetchRequest{ReplicaID: 2, BrokerEpoch: 19, CurrentLeaderEpoch: 5, FetchOffset: 0, LastFetchedEpoch: -1}, ErrNotLeaderOrFollower},
		{FetchRequest{ReplicaID: 2, BrokerEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 9, LastFetchedEpoch: -1}, ErrOffsetOutOfRange},
		{FetchRequest{ReplicaID: 2, BrokerEpoch: 20, CurrentLeaderEpoch: 5, FetchOffset: 3, LastFetchedEpoch: 5}, ErrNone},
	} {
		if res := r.HandleFetch(tc.req); res.Error != tc.want {
			t.Errorf("%+v: error %d, want %d", tc.req, res.Error, tc.want)
		}
	}
	if leo, _ := r.FollowerLEO(2); leo != 3 {
		t.Fatalf("only the valid fetch updates follower state: leo %d", leo)
	}
}

// follower returns broker 2 following 1 in epoch le, with the given batches
// (offset, epoch) as its log.
func follower2(t *testing.T, le int32, epochs []int32) *Replica {
	t.Helper()
	c := &epoch.Cache{}
	for i, e := range epochs {
		c.Assign(e, int64(i))
	}
	r := New(Config{ID: 2, MinISR: 1}, LogState{LEO: int64(len(epochs)), Epochs: c})
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: le, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	r.Advance()
	return r
}

func TestDivergence(t *testing.T) {
	// Each case: leader log and follower log as per-offset epochs; the
	// follower converges on the common prefix in a few fetch rounds, never
	// truncating to its HW.
	for _, tc := range []struct {
		name             string
		leader, follower []int32
		leaderEpoch      int32
		wantTruncations  []int64
	}{
		{"follower ahead in old epoch (KIP-101 #2)", []int32{1, 1, 2}, []int32{1, 1, 1, 1}, 2, []int64{2}},
		{"follower has an epoch the leader never saw (KIP-279)", []int32{1, 1, 3}, []int32{1, 2}, 3, []int64{1}},
		{"two unknown epochs, one round", []int32{1, 1, 1, 4}, []int32{1, 2, 2, 3, 3}, 4, []int64{1}},
		{"iterates: leader epoch unknown to the follower", []int32{1, 2, 2, 5}, []int32{1, 1, 3, 3}, 5, []int64{2, 1}},
		{"no divergence", []int32{1, 1, 2, 2}, []int32{1, 1, 2}, 2, nil},
		{"follower below the leader's earliest epoch", []int32{3, 3}, []int32{1, 1, 1}, 3, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &epoch.Cache{}
			for i, e := range tc.leader {
				lc.Assign(e, int64(i))
			}
			l := New(Config{ID: 1, MinISR: 1}, LogState{LEO: int64(len(tc.leader)), Epochs: lc})
			l.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: tc.leaderEpoch, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
			f := follower2(t, tc.leaderEpoch, tc.follower)
			var got []int64
			for round := 0; round < 5; round++ {
				req, ok := f.FetchRequest()
				if !ok {
					t.Fatal("no fetch")
				}
				res := l.HandleFetch(req)
				if res.Diverging == nil {
					if res.Error != ErrNone {
						t.Fatalf("error %d", res.Error)
					}
					break
				}
				f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: res})
				rd := f.Ready()
				if rd.Truncate == nil {
					t.Fatalf("diverging without truncation")
				}
				got = append(got, rd.Truncate.Offset)
				f.Advance()
			}
			if !slices.Equal(got, tc.wantTruncations) {
				t.Fatalf("truncations %v, want %v", got, tc.wantTruncations)
			}
		})
	}
}

func TestDivergingResponseIgnoresHW(t *testing.T) {
	// KAFKA-14704: records and HW of a diverging response are ignored.
	f := follower2(t, 2, []int32{1, 1, 1})
	req, _ := f.FetchRequest()
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 3, Diverging: &DivergingEpoch{Epoch: 1, EndOffset: 1}},
		Batches: []Batch{{BaseOffset: 3, NumRecords: 1, Epoch: 2}}})
	if f.HW() != 0 || f.LEO() != 1 {
		t.Fatalf("hw %d leo %d", f.HW(), f.LEO())
	}
}

func TestOutOfRange(t *testing.T) {
	f := follower2(t, 2, []int32{1, 1, 1, 1})
	req, _ := f.FetchRequest()
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{Error: ErrOffsetOutOfRange, LEO: 2, LogStart: 0}})
	if f.LEO() != 2 {
		t.Fatalf("leader behind: leo %d, want 2", f.LEO())
	}
	f.Advance()
	req, _ = f.FetchRequest()
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{Error: ErrOffsetOutOfRange, LEO: 50, LogStart: 40}})
	rd := f.Ready()
	if rd.Truncate == nil || !rd.Truncate.Fully || f.LEO() != 40 || f.LogStart() != 40 || f.HW() != 40 {
		t.Fatalf("leader start ahead: %+v %s", rd.Truncate, f)
	}
}

// TestFollowerFetchesOnlyFlushed: a follower whose last answer brought
// records fetches again before they are flushed, naming how many offsets
// are unflushed; once an answer brings nothing it waits for its flush. The
// leader counts only the flushed offset toward the HW and the ISR
// (docs/replication.md, "Pipelined follower fetches").
func TestFollowerFetchesOnlyFlushed(t *testing.T) {
	f := follower2(t, 1, nil)
	req, ok := f.FetchRequest()
	if !ok || req.FetchOffset != 0 || req.Unflushed != 0 || req.LastFetchedEpoch != -1 {
		t.Fatalf("%+v %v", req, ok)
	}
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 0, To: 2},
		Batches: []Batch{{BaseOffset: 0, NumRecords: 2, Epoch: 1, ProducerID: NoProducer}}})
	gen := f.LogGen()
	f.Ready()
	f.Advance()
	// The answer brought records: fetch on, acknowledging only offset 0.
	req, ok = f.FetchRequest()
	if !ok || req.FetchOffset != 2 || req.Unflushed != 2 {
		t.Fatalf("pipelined fetch: %+v %v", req, ok)
	}
	// An empty answer: nothing more to fetch until the flush.
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 0, From: 2, To: 2}})
	if req, ok := f.FetchRequest(); ok {
		t.Fatalf("fetched again past unflushed data after an empty answer: %+v", req)
	}
	f.Flushed(2, gen)
	req, ok = f.FetchRequest()
	if !ok || req.FetchOffset != 2 || req.Unflushed != 0 || req.LastFetchedEpoch != 1 {
		t.Fatalf("%+v %v", req, ok)
	}
	// A stale response (other fetch offset) is ignored.
	f.HandleFetchResponse(FetchResponse{Request: FetchRequest{Leader: 1, CurrentLeaderEpoch: 1, FetchOffset: 0},
		Batches: []Batch{{BaseOffset: 0, NumRecords: 1, Epoch: 1}}})
	if f.LEO() != 2 || f.HasReady() {
		t.Fatalf("stale response applied: %s %+v", f, f.Ready())
	}
	// A flush that raced a truncation does not count.
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 1},
		Batches: []Batch{{BaseOffset: 2, NumRecords: 3, Epoch: 1}}})
	gen = f.LogGen()
	f.truncateTo(3)
	f.Flushed(5, gen)
	if f.FlushedOffset() != 2 {
		t.Fatalf("flushed %d", f.FlushedOffset())
	}
}

// TestLeaderCountsFollowerFlushed: a follower's fetch counts toward the HW
// and the ISR only up to its flushed offset (FetchOffset - Unflushed).
func TestLeaderCountsFollowerFlushed(t *testing.T) {
	l := newLeader(t, 2, []int32{1, 2}, 1, 5)
	fetch := func(id int32, off, unflushed int64) {
		t.Helper()
		if res := l.HandleFetch(FetchRequest{ReplicaID: id, BrokerEpoch: -1, CurrentLeaderEpoch: 1, FetchOffset: off, Unflushed: unflushed, LastFetchedEpoch: -1}); res.Error != 0 {
			t.Fatalf("fetch: %+v", res)
		}
	}
	fetch(2, 5, 3)
	if l.HW() != 2 {
		t.Fatalf("HW %d after a fetch at 5 with 3 unflushed, want 2", l.HW())
	}
	fetch(2, 5, 0)
	if l.HW() != 5 {
		t.Fatalf("HW %d once everything is flushed, want 5", l.HW())
	}
	// Replica 3 holds everything but has flushed none of it: not
	// proposed for the ISR, which needs the HW flushed.
	fetch(3, 5, 5)
	if p := l.PendingISR(); p != nil {
		t.Fatalf("ISR expansion proposed for an unflushed follower: %+v", p)
	}
	fetch(3, 5, 0)
	if p := l.PendingISR(); p == nil || !slices.Contains(p.NewISR, 3) {
		t.Fatalf("no ISR expansion once flushed: %+v", p)
	}
}

func TestIdempotentRollback(t *testing.T) {
	// docs/kafka-replication.md §9 item 15: a truncated batch, retried, is
	// appended again rather than reported as a duplicate; a retry of a
	// surviving batch is a duplicate.
	f := follower2(t, 1, nil)
	req, _ := f.FetchRequest()
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 0}, Batches: []Batch{
		{BaseOffset: 0, NumRecords: 2, Epoch: 1, ProducerID: 7, BaseSeq: 0},
		{BaseOffset: 2, NumRecords: 2, Epoch: 1, ProducerID: 7, BaseSeq: 2},
	}})
	f.truncateTo(2) // divergence removed the second batch
	f.Advance()
	f.Flushed(2, f.LogGen())
	f.ApplyMetadata(PartitionState{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{2}})
	f.Advance()
	f.Append(ProduceRequest{ID: 1, Acks: AcksLeader, Batch: Batch{NumRecords: 2, ProducerID: 7, BaseSeq: 2}})
	f.Append(ProduceRequest{ID: 2, Acks: AcksLeader, Batch: Batch{NumRecords: 2, ProducerID: 7, BaseSeq: 0}})
	f.Append(ProduceRequest{ID: 3, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: 7, BaseSeq: 9}})
	f.Flushed(f.LEO(), f.LogGen()) // acks=1 answers once durable
	rd := f.Ready()
	want := []ProduceResult{
		{ID: 2, Acks: AcksLeader, BaseOffset: 0, LastOffset: 1, Duplicate: true},
		{ID: 3, Acks: AcksLeader, Error: ErrOutOfOrderSequence, BaseOffset: -1, LastOffset: -1},
		{ID: 1, Acks: AcksLeader, BaseOffset: 2, LastOffset: 3},
	}
	if !slices.Equal(rd.Completed, want) {
		t.Fatalf("got %+v\nwant %+v", rd.Completed, want)
	}
	if len(rd.Append) != 1 || rd.Append[0].Epoch != 2 || rd.Append[0].BaseOffset != 2 {
		t.Fatalf("append %+v", rd.Append)
	}
}

func TestISRChangeResults(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 2)
	fetch(r, 2, 2)
	fetch(r, 3, 2) // proposes {1,2,3}
	rd := r.Ready()
	p := rd.ISRProposal
	if p == nil {
		t.Fatal("no proposal")
	}
	r.Advance()
	// A delayed copy of the committed metadata (same epochs) must not drop
	// the in-flight expansion (found by the simulator).
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	if r.PendingISR() == nil || len(r.MaximalISR()) != 3 {
		t.Fatal("pending expansion dropped")
	}
	// A result for another proposal is ignored.
	r.ISRChangeResult(AlterPartitionResult{Seq: p.Seq + 1, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1}})
	if r.PendingISR() == nil {
		t.Fatal("stale result applied")
	}
	// Fencing errors keep it pending; INELIGIBLE reverts.
	r.ISRChangeResult(AlterPartitionResult{Seq: p.Seq, Error: ErrInvalidUpdateVersion})
	if r.PendingISR() == nil {
		t.Fatal("pending dropped on a version error")
	}
	r.ISRChangeResult(AlterPartitionResult{Seq: p.Seq, Error: ErrIneligibleReplica})
	if r.PendingISR() != nil || len(r.MaximalISR()) != 2 {
		t.Fatal("not reverted")
	}
	// Other errors retry the same proposal after a pause.
	fetch(r, 3, 2)
	p = r.Ready().ISRProposal
	r.Advance()
	r.ISRChangeResult(AlterPartitionResult{Seq: p.Seq, Error: ErrNotController})
	if rd := r.Ready(); rd.ISRProposal != nil {
		t.Fatal("retried at once")
	}
	r.Tick(10_000 + isrRetryBackoffMs - 1)
	if rd := r.Ready(); rd.ISRProposal != nil {
		t.Fatal("retried before the pause ended")
	}
	r.Tick(10_000 + isrRetryBackoffMs)
	if rd := r.Ready(); rd.ISRProposal != p {
		t.Fatal("no retry")
	}
	r.Advance()
	r.ISRChangeResult(AlterPartitionResult{Seq: p.Seq, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2, 3}})
	if !slices.Equal(r.ISR(), []int32{1, 2, 3}) || r.PartitionEpoch() != 2 || r.PendingISR() != nil {
		t.Fatalf("not committed: %s", r)
	}
}

func TestConsumerReadsBelowHW(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 5)
	fetch(r, 2, 3)
	res := r.HandleFetch(FetchRequest{ReplicaID: -1, CurrentLeaderEpoch: -1, FetchOffset: 0, LastFetchedEpoch: -1})
	if res.Error != ErrNone || res.From != 0 || res.To != 3 {
		t.Fatalf("%+v", res)
	}
	res = r.HandleFetch(FetchRequest{ReplicaID: -1, CurrentLeaderEpoch: -1, FetchOffset: 4, LastFetchedEpoch: -1})
	if res.Error != ErrNone || res.To > res.From {
		t.Fatalf("served above the HW: %+v", res)
	}
}

// The driver's log cuts whole batches; when it ends below the machine's
// truncation point the machine must follow, or it would fetch past a gap.
func TestLogTruncatedFollowsTheLog(t *testing.T) {
	r := New(Config{ID: 2, Partition: "t-0"}, LogState{LEO: 10, HW: 4, Epochs: epoch.New([]epoch.Entry{{Epoch: 0, StartOffset: 0}})})
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	r.Flushed(10, r.LogGen())
	for r.HasReady() {
		r.Ready()
		r.Advance()
	}
	r.LogTruncated(7)
	if r.LEO() != 7 || r.HW() > 7 {
		t.Fatalf("leo %d hw %d after the log ended at 7", r.LEO(), r.HW())
	}
	req, ok := r.FetchRequest()
	if !ok || req.FetchOffset != 7 {
		t.Fatalf("next fetch %+v %v, want offset 7", req, ok)
	}
	r.LogTruncated(9) // above the log end: nothing to do
	if r.LEO() != 7 {
		t.Fatal("LogTruncated above the log end moved the LEO")
	}
}

func TestFollowerAppendsAcrossCompactionGaps(t *testing.T) {
	// A compacted leader's batches have gaps between them: the follower
	// appends them at their offsets (Kafka refuses only offsets below the
	// log end) and stops at the first batch behind its LEO.
	f := follower2(t, 1, []int32{1, 1})
	req, _ := f.FetchRequest()
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 20},
		Batches: []Batch{{BaseOffset: 5, NumRecords: 3, Epoch: 1}, {BaseOffset: 12, NumRecords: 1, Epoch: 1},
			{BaseOffset: 10, NumRecords: 1, Epoch: 1}}})
	rd := f.Ready()
	if len(rd.Append) != 2 || rd.Append[0].BaseOffset != 5 || rd.Append[1].BaseOffset != 12 || f.LEO() != 13 {
		t.Fatalf("appended %+v, leo %d", rd.Append, f.LEO())
	}
	if f.HW() != 13 {
		t.Fatalf("hw %d, want min(leader HW, LEO) = 13", f.HW())
	}
}

// TestTombstoneBound: the leader's bound is the least position of every
// assigned replica, in the ISR or not, and 0 while one is unknown; a
// follower takes its leader's, capped by its own HW, and forgets it with
// a new leader epoch.
func TestTombstoneBound(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 10)
	if b := r.TombstoneBound(); b != 0 {
		t.Fatalf("no follower fetched: bound %d, want 0", b)
	}
	fetch(r, 2, 10)
	if b := r.TombstoneBound(); b != 0 {
		t.Fatalf("follower 3 (not in the ISR) unknown: bound %d, want 0", b)
	}
	res := fetch(r, 3, 4)
	if b := r.TombstoneBound(); b != 4 || res.TombstoneBound != 4 {
		t.Fatalf("lagging follower 3 at 4: bound %d, answer %d; want 4 (HW %d)", b, res.TombstoneBound, r.HW())
	}
	res = fetch(r, 3, 10)
	if b := r.TombstoneBound(); b != 10 || res.TombstoneBound != 10 {
		t.Fatalf("all at 10: bound %d, answer %d; want 10", b, res.TombstoneBound)
	}

	f := follower2(t, 1, []int32{1, 1, 1})
	req, _ := f.FetchRequest()
	f.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: 2, LEO: 3, From: 3, To: 3, TombstoneBound: 3}})
	if b := f.TombstoneBound(); b != 2 {
		t.Fatalf("follower: bound %d, want 2 (its HW)", b)
	}
	f.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if b := f.TombstoneBound(); b != 0 {
		t.Fatalf("follower after a new leader epoch: bound %d, want 0", b)
	}
}

// TestProducerExpiry: a producer silent for producer.id.expiration.ms
// (by its last batch's max timestamp) is forgotten at the next check, so
// its next batch is checked as a new producer's; one still writing keeps
// its sequence checks.
func TestProducerExpiry(t *testing.T) {
	r := New(Config{ID: 1, MinISR: 1, ProducerIDExpirationMs: 1000, ProducerIDExpirationCheckMs: 100}, LogState{})
	r.Tick(10_000)
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}})
	r.Advance()
	r.Append(ProduceRequest{ID: 1, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: 7, BaseSeq: 0, MaxTimestamp: 10_000}})
	r.Append(ProduceRequest{ID: 2, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: 8, BaseSeq: 0, MaxTimestamp: 10_000}})
	r.Flushed(r.LEO(), r.LogGen())
	r.Advance()
	r.Tick(10_900)
	r.Append(ProduceRequest{ID: 3, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: 8, BaseSeq: 1, MaxTimestamp: 10_900}})
	r.Flushed(r.LEO(), r.LogGen())
	r.Advance()
	r.Tick(11_500) // producer 7 silent for 1,500 ms, producer 8 for 600 ms
	if r.Producers().Get(7) != nil || r.Producers().Get(8) == nil {
		t.Fatalf("after expiry: producer 7 %v (want gone), 8 %v (want kept)", r.Producers().Get(7), r.Producers().Get(8))
	}
	r.Append(ProduceRequest{ID: 4, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: 7, BaseSeq: 5, MaxTimestamp: 11_500}})
	r.Append(ProduceRequest{ID: 5, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: 8, BaseSeq: 5, MaxTimestamp: 11_500}})
	r.Flushed(r.LEO(), r.LogGen())
	rd := r.Ready()
	got := make([]int16, 2)
	for _, c := range rd.Completed {
		if c.ID >= 4 {
			got[c.ID-4] = c.Error
		}
	}
	if !slices.Equal(got, []int16{ErrNone, ErrOutOfOrderSequence}) {
		t.Fatalf("errors of the two batches %v, want [0 %d]: the expired producer starts over, the live one is checked", got, ErrOutOfOrderSequence)
	}
}

// TestOneISRProposalInFlight: a proposal the machine makes while another is
// with the controller is not sent until that one is answered, then goes
// (the driver once dropped it: the ISR stayed short).
func TestOneISRProposalInFlight(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 2)
	fetch(r, 2, 2)
	fetch(r, 3, 2) // proposes {1,2,3}
	p1 := r.Ready().ISRProposal
	r.Advance()
	if p1 == nil || r.InflightISR() != p1.Seq {
		t.Fatalf("first proposal %v, in flight %d", p1, r.InflightISR())
	}
	// New metadata (another partition epoch) drops the pending proposal;
	// the machine proposes again while the first is still out.
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	r.Advance()
	fetch(r, 3, 2)
	if rd := r.Ready(); rd.ISRProposal != nil {
		t.Fatalf("second proposal sent while the first is in flight: %+v", rd.ISRProposal)
	}
	p2 := r.PendingISR()
	if p2 == nil || p2.Seq == p1.Seq {
		t.Fatalf("no second proposal pending: %v", p2)
	}
	r.ISRChangeResult(AlterPartitionResult{Seq: p1.Seq, Error: ErrInvalidUpdateVersion})
	if rd := r.Ready(); rd.ISRProposal != p2 {
		t.Fatalf("the second proposal did not go once the first was answered: %+v", rd.ISRProposal)
	}
}

// TestAcksOneWaitsForTheFlush: an acks=1 answer goes only once the
// leader's log is durable past the batch; a truncation below it first, or
// losing the leadership, fails it; a duplicate of a durable batch answers
// at once.
func TestAcksOneWaitsForTheFlush(t *testing.T) {
	r := newLeader(t, 1, []int32{1}, 1, 2) // offsets 0, 1 durable
	r.Append(ProduceRequest{ID: 10, Acks: AcksLeader, Batch: Batch{NumRecords: 2, ProducerID: NoProducer}})
	if rd := r.Ready(); len(rd.Completed) != 0 {
		t.Fatalf("acks=1 answered before the flush: %+v", rd.Completed)
	}
	r.Advance()
	r.Flushed(3, r.LogGen()) // covers offset 2, not 3
	if rd := r.Ready(); len(rd.Completed) != 0 {
		t.Fatalf("answered with the batch half durable: %+v", rd.Completed)
	}
	r.Flushed(4, r.LogGen())
	rd := r.Ready()
	if len(rd.Completed) != 1 || rd.Completed[0].Error != ErrNone || rd.Completed[0].BaseOffset != 2 {
		t.Fatalf("after the flush: %+v", rd.Completed)
	}
	r.Advance()
	r.Append(ProduceRequest{ID: 11, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
	r.Advance()
	r.ApplyMetadata(PartitionState{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2}})
	rd = r.Ready()
	if len(rd.Completed) != 1 || rd.Completed[0].ID != 11 || rd.Completed[0].Error != ErrNotLeaderOrFollower {
		t.Fatalf("after losing the leadership unflushed: %+v", rd.Completed)
	}
}

// TestStorageFailed: once the log is offline, waiting acknowledgements
// fail with KAFKA_STORAGE_ERROR, new produces and fetches are refused, a
// follower stops fetching, and a late flush counts for nothing.
func TestStorageFailed(t *testing.T) {
	r := newLeader(t, 1, []int32{1, 2}, 1, 0)
	r.Append(ProduceRequest{ID: 1, Acks: AcksAll, DeadlineMs: 60_000, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
	r.Append(ProduceRequest{ID: 2, Acks: AcksLeader, DeadlineMs: 60_000, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
	if rd := r.Ready(); len(rd.Completed) != 0 {
		t.Fatalf("completed before any flush: %+v", rd.Completed)
	}
	r.Advance()
	r.StorageFailed()
	rd := r.Ready()
	got := map[uint64]int16{}
	for _, c := range rd.Completed {
		got[c.ID] = c.Error
	}
	if got[1] != ErrKafkaStorageError || got[2] != ErrKafkaStorageError || len(got) != 2 {
		t.Fatalf("waiting acks after the failure: %+v", rd.Completed)
	}
	r.Advance()
	r.Flushed(r.LEO(), r.LogGen())
	if r.FlushedOffset() != 0 || r.HW() != 0 {
		t.Fatalf("a flush after the failure counted: flushed %d HW %d", r.FlushedOffset(), r.HW())
	}
	r.Append(ProduceRequest{ID: 3, Acks: AcksLeader, Batch: Batch{NumRecords: 1, ProducerID: NoProducer}})
	if rd := r.Ready(); len(rd.Completed) != 1 || rd.Completed[0].Error != ErrKafkaStorageError || len(rd.Append) != 0 {
		t.Fatalf("produce after the failure: %+v", rd)
	}
	r.Advance()
	if res := fetch(r, 2, 0); res.Error != ErrKafkaStorageError {
		t.Fatalf("fetch after the failure: %+v", res)
	}
	f := New(Config{ID: 2, LagTimeMaxMs: 1000}, LogState{})
	f.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	f.Advance()
	if _, ok := f.FetchRequest(); !ok {
		t.Fatal("a follower does not fetch")
	}
	f.StorageFailed()
	if _, ok := f.FetchRequest(); ok {
		t.Fatal("a follower whose log failed still fetches")
	}
}
