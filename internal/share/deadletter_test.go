package share

import (
	"context"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
)

// sinkRec is a DeadLetterSink that keeps what it is given, up to room.
type sinkRec struct {
	room int
	got  []DeadLetter
}

func (s *sinkRec) Enqueue(dl DeadLetter) bool {
	if len(s.got) >= s.room {
		return false
	}
	s.got = append(s.got, dl)
	return true
}

// runs strips the Partition of dls, for comparison.
func runs(dls []DeadLetter) []DeadLetter {
	out := make([]DeadLetter, len(dls))
	for i, dl := range dls {
		dl.Partition = nil
		out[i] = dl
	}
	return out
}

// TestDeadLetterRejectAndLimit: with a dead-letter sink, a rejected record
// and one released, and one whose lock passed, at the delivery limit become
// Archiving (persisted as such), are handed to the sink with their cause
// and delivery count, and hold SPSO back until FinishArchiving archives them.
// Gaps are archived without a copy.
func TestDeadLetterRejectAndLimit(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sink := &sinkRec{room: 10}
	cfg := Config{DeliveryLimit: 2, LockDuration: time.Second, DeadLetters: sink}
	sp, p := newTestPartition(t, cfg, 0)
	ctx := context.Background()
	log := one(0, 4)
	if n := count(fetch(sp, "m", clk.Now(), log, 0)); n != 4 {
		t.Fatalf("acquired %d", n)
	}
	// 0 rejected, 1 released (count 1 < 2), 3 a gap.
	if err := sp.Acknowledge(ctx, "m", clk.Now(), []AckBatch{{0, 0, []int8{AckReject}}, {1, 1, []int8{AckRelease}}, {3, 3, []int8{AckGap}}}, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := p.Read(ctx, testKey, 0); st.StartOffset != 0 || st.Batches[0] != (StateBatch{0, 0, StateArchiving, 1}) {
		t.Fatalf("persisted %+v, want offset 0 Archiving", st)
	}
	// 1 again (count 2) and released: the limit. 2's lock passes at count 1
	// and then again at 2.
	if n := count(fetch(sp, "m", clk.Now(), log, 1)); n != 1 {
		t.Fatalf("acquired %d", n)
	}
	if err := sp.Acknowledge(ctx, "m", clk.Now(), []AckBatch{{1, 1, []int8{AckRelease}}}, false); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	fetch(sp, "m", clk.Now(), log, 0) // 2 again, count 2
	clk.Advance(2 * time.Second)
	sp.Window(clk.Now())
	if n := len(sink.got); n != 2 {
		t.Fatalf("%d runs handed before the expiry's archiving is durable, want 2", n)
	}
	if err := sp.PersistExpired(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	want := []DeadLetter{
		{Key: testKey, First: 0, Last: 0, DeliveryCount: 1, Cause: CauseRejected},
		{Key: testKey, First: 1, Last: 1, DeliveryCount: 2, Cause: CauseDeliveryLimit},
		{Key: testKey, First: 2, Last: 2, DeliveryCount: 2, Cause: CauseDeliveryLimit},
	}
	if got := runs(sink.got); !reflect.DeepEqual(got, want) {
		t.Fatalf("dead letters %+v\nwant %+v", got, want)
	}
	if start, _ := sp.Offsets(); start != 0 {
		t.Fatalf("SPSO %d past Archiving records", start)
	}
	for _, dl := range sink.got {
		if err := dl.Partition.FinishArchiving(ctx, dl.First, dl.Last); err != nil {
			t.Fatal(err)
		}
	}
	if start, _ := sp.Offsets(); start != 4 {
		t.Fatalf("SPSO %d after the copies, want 4", start)
	}
	if st, _ := p.Read(ctx, testKey, 0); st.StartOffset != 4 {
		t.Fatalf("persisted start %d, want 4", st.StartOffset)
	}
	if msg := CauseRejected.Message(); msg != "Offset rejected by client." {
		t.Fatal(msg)
	}
}

// TestDeadLetterQueueFull: a run the sink does not take is archived at once,
// without a copy; without a sink every archive is immediate.
func TestDeadLetterQueueFull(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	for _, sink := range []DeadLetterSink{&sinkRec{room: 0}, nil} {
		sp, _ := newTestPartition(t, Config{DeadLetters: sink}, 0)
		fetch(sp, "m", clk.Now(), one(0, 2), 0)
		if err := sp.Acknowledge(context.Background(), "m", clk.Now(), []AckBatch{{0, 1, []int8{AckReject}}}, false); err != nil {
			t.Fatal(err)
		}
		if start, _ := sp.Offsets(); start != 2 {
			t.Fatalf("sink %v: SPSO %d, want 2", sink, start)
		}
	}
}

// TestDeadLetterRestoredOnLoad: a share partition loaded with Archiving
// records (the previous leader's copy may not have been written) hands
// them to its sink again: the copy is at least once.
func TestDeadLetterRestoredOnLoad(t *testing.T) {
	p := NewMemPersister()
	ctx := context.Background()
	st := State{StartOffset: 5, Batches: []StateBatch{{5, 6, StateArchiving, 3}, {7, 7, StateAcknowledged, 1}}}
	if err := p.Write(ctx, testKey, st); err != nil {
		t.Fatal(err)
	}
	sink := &sinkRec{room: 10}
	sp, err := Load(ctx, p, testKey, 1, Config{DeadLetters: sink}, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []DeadLetter{{Key: testKey, First: 5, Last: 6, DeliveryCount: 3, Cause: CauseRestored}}
	if got := runs(sink.got); !reflect.DeepEqual(got, want) {
		t.Fatalf("dead letters %+v, want %+v", got, want)
	}
	if err := sp.FinishArchiving(ctx, 5, 6); err != nil {
		t.Fatal(err)
	}
	if start, _ := sp.Offsets(); start != 8 {
		t.Fatalf("SPSO %d, want 8", start)
	}
}

// TestDeadLetterPropertyRandom drives a share partition with a dead-letter
// sink through random fetches, acknowledgements, lock expiries, copies
// finished in random order and a sink that sometimes refuses. Each offset
// is handed to the sink at most once, with the cause of its archive; it
// stays Archiving (and SPSO below it) until its copy is finished; a
// refused run is archived at once.
func TestDeadLetterPropertyRandom(t *testing.T) {
	causes := map[DLQCause]int{}
	refused := 0
	for seed := int64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		clk := clock.NewManual(time.Unix(1000, 0))
		sink := &sinkRec{room: 1 << 30}
		const limit = 3
		sp, _ := newTestPartition(t, Config{LockDuration: 10 * time.Second, DeliveryLimit: limit, MaxInFlight: 30, DeadLetters: sink}, 0)
		log := one(0, 40)
		handed := map[int64]bool{}
		rejected := map[int64]bool{}
		var pending []DeadLetter
		finished := map[int64]bool{}
		seen := 0
		for step := 0; step < 300; step++ {
			m := []string{"a", "b"}[rng.Intn(2)]
			sink.room = len(sink.got) + rng.Intn(3) // sometimes full
			switch rng.Intn(5) {
			case 0:
				fetch(sp, m, clk.Now(), log, rng.Intn(5))
			case 1:
				var acks []AckBatch
				for _, r := range sp.Window(clk.Now()) {
					if r.State == Acquired && r.Member == m && rng.Intn(2) == 0 {
						acks = append(acks, AckBatch{r.Offset, r.Offset, []int8{int8(rng.Intn(3) + 1)}})
					}
				}
				if len(acks) > 0 {
					if err := sp.Acknowledge(context.Background(), m, clk.Now(), acks, false); err != nil {
						t.Fatal(err)
					}
					for _, a := range acks {
						if a.Types[0] == AckReject {
							rejected[a.First] = true
						}
					}
				}
			case 2:
				clk.Advance(time.Duration(rng.Intn(12)) * time.Second)
			case 3:
				if len(pending) > 0 {
					i := rng.Intn(len(pending))
					dl := pending[i]
					pending = append(pending[:i], pending[i+1:]...)
					if err := sp.FinishArchiving(context.Background(), dl.First, dl.Last); err != nil {
						t.Fatal(err)
					}
					for o := dl.First; o <= dl.Last; o++ {
						finished[o] = true
					}
				}
			}
			// The expiry sweep: an expired lock's archiving is handed
			// over once written.
			if err := sp.PersistExpired(context.Background(), clk.Now()); err != nil {
				t.Fatal(err)
			}
			// The runs handed over since the last step.
			for _, dl := range sink.got[seen:] {
				for o := dl.First; o <= dl.Last; o++ {
					if handed[o] {
						t.Fatalf("seed %d: offset %d handed twice", seed, o)
					}
					handed[o] = true
					causes[dl.Cause]++
					switch {
					case dl.Cause == CauseRejected && !rejected[o]:
						t.Fatalf("seed %d: offset %d handed as rejected", seed, o)
					case dl.Cause == CauseDeliveryLimit && dl.DeliveryCount < limit:
						t.Fatalf("seed %d: offset %d handed at delivery count %d", seed, o, dl.DeliveryCount)
					}
				}
				pending = append(pending, dl)
			}
			seen = len(sink.got)
			start, _ := sp.Offsets()
			for _, r := range sp.Window(clk.Now()) {
				inFlight := handed[r.Offset] && !finished[r.Offset]
				if r.State == Archived && !handed[r.Offset] {
					refused++
				}
				if (r.State == Archiving) != inFlight {
					t.Fatalf("seed %d: offset %d %v, handed %v finished %v", seed, r.Offset, r.State, handed[r.Offset], finished[r.Offset])
				}
			}
			for o := range handed {
				if o < start && !finished[o] {
					t.Fatalf("seed %d: SPSO %d past offset %d whose copy is not finished", seed, start, o)
				}
			}
		}
	}
	if causes[CauseRejected] == 0 || causes[CauseDeliveryLimit] == 0 || refused == 0 {
		t.Fatalf("the runs did not reach every path: causes %v, refused %d", causes, refused)
	}
}
