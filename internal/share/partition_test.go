package share

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
)

var testKey = Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}

func newTestPartition(t testing.TB, cfg Config, start int64) (*Partition, *MemPersister) {
	t.Helper()
	p := NewMemPersister()
	sp, err := Load(context.Background(), p, testKey, 0, cfg, func() (int64, error) { return start, nil })
	if err != nil {
		t.Fatal(err)
	}
	return sp, p
}

// one returns n single-record batches from first.
func one(first int64, n int) []LogBatch {
	var bs []LogBatch
	for i := 0; i < n; i++ {
		bs = append(bs, LogBatch{First: first + int64(i), Last: first + int64(i)})
	}
	return bs
}

// fetch acquires from log for member as the handlers do: the expired
// locks are persisted first.
func fetch(sp *Partition, member string, now time.Time, log []LogBatch, maxRecords int) []AcquiredRange {
	_ = sp.PersistExpired(context.Background(), now)
	from, ok := sp.NextFetchOffset(now)
	if !ok {
		return nil
	}
	var bs []LogBatch
	for _, b := range log {
		if b.Last >= from {
			bs = append(bs, b)
		}
	}
	return sp.Acquire(member, now, from, bs, maxRecords, false)
}

func count(rs []AcquiredRange) int {
	n := 0
	for _, r := range rs {
		n += int(r.Last - r.First + 1)
	}
	return n
}

func TestAcquireTwoMembersDisjoint(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sp, _ := newTestPartition(t, Config{}, 0)
	log := one(0, 10)
	a := fetch(sp, "a", clk.Now(), log, 4)
	b := fetch(sp, "b", clk.Now(), log, 100)
	if count(a) != 4 || count(b) != 6 || a[0].First != 0 || b[0].First != 4 {
		t.Fatalf("a=%v b=%v", a, b)
	}
	if c := fetch(sp, "c", clk.Now(), log, 100); len(c) != 0 {
		t.Fatalf("c got %v while everything is locked", c)
	}
}

func TestLockExpiryRedelivers(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sp, _ := newTestPartition(t, Config{LockDuration: time.Second}, 0)
	log := one(0, 3)
	if got := fetch(sp, "a", clk.Now(), log, 0); count(got) != 3 || got[0].DeliveryCount != 1 {
		t.Fatalf("first: %v", got)
	}
	clk.Advance(999 * time.Millisecond)
	if got := fetch(sp, "b", clk.Now(), log, 0); len(got) != 0 {
		t.Fatalf("before expiry: %v", got)
	}
	clk.Advance(time.Millisecond)
	got := fetch(sp, "b", clk.Now(), log, 0)
	if count(got) != 3 || got[0].DeliveryCount != 2 {
		t.Fatalf("after expiry: %v", got)
	}
	// a's lock expired: its acknowledgement is refused and changes nothing.
	err := sp.Acknowledge(context.Background(), "a", clk.Now(), []AckBatch{{First: 0, Last: 2, Types: []int8{AckAccept}}}, false)
	if !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("ack of an expired lock: %v", err)
	}
	if err := sp.Acknowledge(context.Background(), "b", clk.Now(), []AckBatch{{First: 0, Last: 2, Types: []int8{AckAccept}}}, false); err != nil {
		t.Fatal(err)
	}
	if s, e := sp.Offsets(); s != 3 || e != 3 {
		t.Fatalf("offsets %d %d", s, e)
	}
}

func TestAckTypes(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sp, p := newTestPartition(t, Config{}, 10)
	log := one(10, 4)
	fetch(sp, "a", clk.Now(), log, 0)
	// accept 10, release 11, reject 12, renew 13
	err := sp.Acknowledge(context.Background(), "a", clk.Now(), []AckBatch{{First: 10, Last: 13, Types: []int8{AckAccept, AckRelease, AckReject, AckRenew}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	w := sp.Window(clk.Now())
	if w[0].Offset != 11 || w[0].State != Available || w[1].State != Archived || w[2].State != Acquired {
		t.Fatalf("window %+v", w)
	}
	st, _ := p.Read(context.Background(), testKey, 0)
	if st.StartOffset != 11 || st.DeliveryCompleteCount != 1 {
		t.Fatalf("persisted %+v", st)
	}
	got := fetch(sp, "b", clk.Now(), log, 0)
	if len(got) != 1 || got[0].First != 11 || got[0].Last != 11 || got[0].DeliveryCount != 2 {
		t.Fatalf("redelivery %v", got)
	}
}

func TestDeliveryLimitArchives(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sp, _ := newTestPartition(t, Config{DeliveryLimit: 2}, 0)
	log := one(0, 1)
	for i := 0; i < 2; i++ {
		if got := fetch(sp, "a", clk.Now(), log, 0); count(got) != 1 {
			t.Fatalf("delivery %d: %v", i+1, got)
		}
		if err := sp.Acknowledge(context.Background(), "a", clk.Now(), []AckBatch{{First: 0, Last: 0, Types: []int8{AckRelease}}}, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := fetch(sp, "a", clk.Now(), log, 0); len(got) != 0 {
		t.Fatalf("delivered past the limit: %v", got)
	}
	if s, _ := sp.Offsets(); s != 1 {
		t.Fatalf("SPSO %d, want 1 (archived)", s)
	}
}

func TestAckValidation(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sp, p := newTestPartition(t, Config{}, 0)
	fetch(sp, "a", clk.Now(), one(0, 5), 3) // 0-2 to a
	bad := map[string][]AckBatch{
		"never delivered":  {{First: 3, Last: 4, Types: []int8{AckAccept}}},
		"beyond window":    {{First: 100, Last: 100, Types: []int8{AckAccept}}},
		"other member":     {{First: 0, Last: 0, Types: []int8{AckAccept}}},
		"overlap":          {{First: 0, Last: 1, Types: []int8{AckAccept}}, {First: 1, Last: 2, Types: []int8{AckAccept}}},
		"reversed":         {{First: 2, Last: 1, Types: []int8{AckAccept}}},
		"types length":     {{First: 0, Last: 2, Types: []int8{AckAccept, AckAccept}}},
		"unknown type":     {{First: 0, Last: 0, Types: []int8{9}}},
		"renew not marked": {{First: 0, Last: 0, Types: []int8{AckRenew}}},
		"no types":         {{First: 0, Last: 0}},
	}
	want := map[string]*kerr.Error{"never delivered": kerr.InvalidRecordState, "beyond window": kerr.InvalidRecordState, "other member": kerr.InvalidRecordState}
	before := sp.Window(clk.Now())
	for name, acks := range bad {
		member := "a"
		if name == "other member" {
			member = "b"
		}
		err := sp.Acknowledge(context.Background(), member, clk.Now(), acks, false)
		w := want[name]
		if w == nil {
			w = kerr.InvalidRequest
		}
		if !errors.Is(err, w) {
			t.Errorf("%s: %v, want %v", name, err, w)
		}
	}
	after := sp.Window(clk.Now())
	if len(before) != len(after) {
		t.Fatalf("window changed: %v -> %v", before, after)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("window changed: %v -> %v", before, after)
		}
	}
	if st, _ := p.ReadSummary(context.Background(), testKey); st.StartOffset != -1 {
		t.Fatalf("something was persisted: %+v", st)
	}
}

// failingPersister fails every Write.
type failingPersister struct{ *MemPersister }

func (failingPersister) Write(context.Context, Key, State) error { return kerr.CoordinatorNotAvailable }

func TestAckNotAppliedWhenWriteFails(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	p := failingPersister{NewMemPersister()}
	sp, err := Load(context.Background(), p, testKey, 0, Config{}, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	fetch(sp, "a", clk.Now(), one(0, 2), 0)
	err = sp.Acknowledge(context.Background(), "a", clk.Now(), []AckBatch{{First: 0, Last: 1, Types: []int8{AckAccept}}}, false)
	if !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatal(err)
	}
	w := sp.Window(clk.Now())
	if len(w) != 2 || w[0].State != Acquired || w[1].State != Acquired {
		t.Fatalf("window after a failed write: %+v", w)
	}
}

func TestLoadFromPersister(t *testing.T) {
	p := NewMemPersister()
	p.Write(context.Background(), testKey, State{StartOffset: 5, Batches: []StateBatch{
		{FirstOffset: 5, LastOffset: 6, DeliveryState: StateAcknowledged, DeliveryCount: 1},
		{FirstOffset: 7, LastOffset: 7, DeliveryState: StateAvailable, DeliveryCount: 2},
		{FirstOffset: 9, LastOffset: 9, DeliveryState: StateArchived, DeliveryCount: 1},
	}})
	sp, err := Load(context.Background(), p, testKey, 1, Config{}, func() (int64, error) { t.Fatal("reset used"); return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1, 0)
	got := fetch(sp, "a", now, one(0, 12), 0)
	want := []AcquiredRange{{7, 7, 3}, {8, 8, 1}, {10, 11, 1}}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}

func TestSkipAndGapsArchived(t *testing.T) {
	sp, _ := newTestPartition(t, Config{}, 0)
	now := time.Unix(1, 0)
	// 0-1 data, 2 a control batch, 3-4 compacted away, 5 data.
	got := fetch(sp, "a", now, []LogBatch{{0, 1, false}, {2, 2, true}, {5, 5, false}}, 0)
	if len(got) != 2 || got[0] != (AcquiredRange{0, 1, 1}) || got[1] != (AcquiredRange{5, 5, 1}) {
		t.Fatalf("got %v", got)
	}
	if err := sp.Acknowledge(context.Background(), "a", now, []AckBatch{{0, 1, []int8{AckAccept}}, {5, 5, []int8{AckAccept}}}, false); err != nil {
		t.Fatal(err)
	}
	if s, e := sp.Offsets(); s != 6 || e != 6 {
		t.Fatalf("offsets %d-%d", s, e)
	}
}

func TestWindowBounded(t *testing.T) {
	sp, _ := newTestPartition(t, Config{MaxInFlight: 3}, 0)
	now := time.Unix(1, 0)
	if got := fetch(sp, "a", now, one(0, 10), 0); count(got) != 3 {
		t.Fatalf("got %v", got)
	}
	if _, ok := sp.NextFetchOffset(now); ok {
		t.Fatal("a full window offers more")
	}
}

// TestWindowTakesBatchWhole: under batch_optimized the batch that starts
// inside the window is acquired whole past MaxInFlight, as Kafka's
// SharePartition does, up to 4 times the limit; record_limit stops at
// the limit; a window past the limit acquires nothing more.
func TestWindowTakesBatchWhole(t *testing.T) {
	now := time.Unix(1, 0)
	sp, _ := newTestPartition(t, Config{MaxInFlight: 3}, 0)
	if got := fetch(sp, "a", now, []LogBatch{{0, 9, false}, {10, 12, false}}, 0); count(got) != 10 {
		t.Fatalf("batch_optimized acquired %v, want the batch 0-9 whole", got)
	}
	if _, ok := sp.NextFetchOffset(now); ok {
		t.Fatal("a window past its limit offers more")
	}
	sp, _ = newTestPartition(t, Config{MaxInFlight: 3}, 0)
	if got := fetch(sp, "a", now, []LogBatch{{0, 99, false}}, 0); count(got) != 12 {
		t.Fatalf("a huge batch acquired %v, want 12 (4 times the limit)", got)
	}
	sp, _ = newTestPartition(t, Config{MaxInFlight: 3}, 0)
	if got := sp.Acquire("a", now, 0, []LogBatch{{0, 9, false}}, 0, true); count(got) != 3 {
		t.Fatalf("record_limit acquired %v, want 3", got)
	}
}

func TestRecordLimitMode(t *testing.T) {
	sp, _ := newTestPartition(t, Config{}, 0)
	now := time.Unix(1, 0)
	// A batch of 5: batch_optimized takes it whole, record_limit takes 2.
	if got := sp.Acquire("a", now, 0, []LogBatch{{0, 4, false}}, 2, true); count(got) != 2 {
		t.Fatalf("record_limit: %v", got)
	}
	if got := sp.Acquire("b", now, 2, []LogBatch{{0, 4, false}, {5, 9, false}}, 2, false); count(got) != 3 || got[0].First != 2 {
		t.Fatalf("batch_optimized: %v", got)
	}
}

func TestReleaseMember(t *testing.T) {
	sp, p := newTestPartition(t, Config{}, 0)
	now := time.Unix(1, 0)
	fetch(sp, "a", now, one(0, 3), 0)
	if err := sp.ReleaseMember(context.Background(), "a", now); err != nil {
		t.Fatal(err)
	}
	got := fetch(sp, "b", now, one(0, 3), 0)
	if count(got) != 3 || got[0].DeliveryCount != 2 {
		t.Fatalf("after release: %v", got)
	}
	if st, _ := p.Read(context.Background(), testKey, 0); len(st.Batches) != 1 || st.Batches[0].DeliveryCount != 1 {
		t.Fatalf("persisted %+v", st)
	}
}

// checkInvariants checks what holds of every share partition at rest.
func checkInvariants(t testing.TB, sp *Partition, now time.Time, prevCounts map[int64]int16, confirmed map[int64]RecordState, prevStart int64) {
	t.Helper()
	start, _ := sp.Offsets()
	if start < prevStart {
		t.Fatalf("SPSO went back: %d -> %d", prevStart, start)
	}
	for _, r := range sp.Window(now) {
		if c, ok := prevCounts[r.Offset]; ok && r.DeliveryCount < c {
			t.Fatalf("offset %d delivery count shrank %d -> %d", r.Offset, c, r.DeliveryCount)
		}
		prevCounts[r.Offset] = r.DeliveryCount
		if r.State == Acquired && r.Member == "" {
			t.Fatalf("offset %d acquired by nobody", r.Offset)
		}
		if s, ok := confirmed[r.Offset]; ok && r.State != s {
			t.Fatalf("offset %d confirmed %v is now %v", r.Offset, s, r.State)
		}
	}
	for o, s := range confirmed {
		if s != Acknowledged && s != Archived {
			t.Fatalf("confirmed %d in state %v", o, s)
		}
	}
}

// runRandom drives a share partition with random fetches, acks and clock
// moves from rng, checking the invariants after each step. Members hold
// what each was last given; a record is never held by two at once.
func runRandom(t testing.TB, rng *rand.Rand, steps int) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sp, p := newTestPartition(t, Config{LockDuration: 10 * time.Second, DeliveryLimit: 3, MaxInFlight: 20}, 0)
	var log []LogBatch
	// noRecord are the offsets no member may be given: control batches
	// and offsets compacted away.
	noRecord := map[int64]bool{}
	for o := int64(0); o < 60; {
		n := int64(rng.Intn(4) + 1)
		b := LogBatch{First: o, Last: o + n - 1, Skip: rng.Intn(10) == 0}
		log = append(log, b)
		for k := b.First; k <= b.Last && b.Skip; k++ {
			noRecord[k] = true
		}
		o += n
		if rng.Intn(2) == 0 { // a gap
			noRecord[o] = true
			o++
		}
	}
	delivered := map[int64]int16{}
	members := []string{"a", "b", "c"}
	counts := map[int64]int16{}
	confirmed := map[int64]RecordState{}
	prevStart, prevPersisted := int64(0), int64(0)
	for i := 0; i < steps; i++ {
		m := members[rng.Intn(len(members))]
		switch rng.Intn(4) {
		case 0:
			got := fetch(sp, m, clk.Now(), log, rng.Intn(6))
			for _, r := range got {
				for o := r.First; o <= r.Last; o++ {
					if _, ok := confirmed[o]; ok {
						t.Fatalf("confirmed offset %d delivered again", o)
					}
					if noRecord[o] {
						t.Fatalf("offset %d without a deliverable record delivered", o)
					}
					if r.DeliveryCount != delivered[o]+1 {
						t.Fatalf("offset %d delivery count %d after %d deliveries", o, r.DeliveryCount, delivered[o])
					}
					delivered[o] = r.DeliveryCount
				}
			}
		case 1, 2:
			// Ack a random range with random types; it may be refused.
			start, end := sp.Offsets()
			if end == start {
				continue
			}
			first := start + rng.Int63n(end-start+2) - 1
			last := first + rng.Int63n(4)
			types := []int8{int8(rng.Intn(5))}
			if rng.Intn(2) == 0 {
				types = nil
				for o := first; o <= last; o++ {
					types = append(types, int8(rng.Intn(4)))
				}
			}
			before := sp.Window(clk.Now())
			err := sp.Acknowledge(context.Background(), m, clk.Now(), []AckBatch{{First: first, Last: last, Types: types}}, true)
			if err != nil {
				after := sp.Window(clk.Now())
				if len(after) != len(before) {
					t.Fatalf("refused ack changed the window")
				}
				for k := range after {
					if after[k] != before[k] {
						t.Fatalf("refused ack changed offset %d: %+v -> %+v", after[k].Offset, before[k], after[k])
					}
				}
				continue
			}
			for o := first; o <= last; o++ {
				ty := types[0]
				if len(types) > 1 {
					ty = types[o-first]
				}
				switch ty {
				case AckAccept:
					confirmed[o] = Acknowledged
				case AckReject, AckGap:
					confirmed[o] = Archived
				}
			}
			st, _ := p.Read(context.Background(), testKey, 0)
			if st.StartOffset >= 0 && st.StartOffset < prevPersisted {
				t.Fatalf("persisted SPSO went back: %d -> %d", prevPersisted, st.StartOffset)
			}
			prevPersisted = max(prevPersisted, st.StartOffset)
		case 3:
			clk.Advance(time.Duration(rng.Intn(6)) * time.Second)
		}
		checkInvariants(t, sp, clk.Now(), counts, confirmed, prevStart)
		prevStart, _ = sp.Offsets()
		// Every offset below SPSO, and every archived one, is done for a
		// reason: confirmed, without a record, or at the delivery limit.
		done := func(o int64) bool {
			_, ok := confirmed[o]
			return ok || noRecord[o] || delivered[o] >= 3
		}
		for o := int64(0); o < prevStart; o++ {
			if !done(o) {
				t.Fatalf("offset %d below SPSO %d is neither acknowledged nor archived", o, prevStart)
			}
		}
		for _, r := range sp.Window(clk.Now()) {
			if (r.State == Archived || r.State == Acknowledged) && !done(r.Offset) {
				t.Fatalf("offset %d %v without cause", r.Offset, r.State)
			}
		}
		// Below SPSO everything is acknowledged or archived: confirmed,
		// archived for a gap, a skip or the delivery limit.
		for _, r := range sp.Window(clk.Now()) {
			if r.State == Acquired {
				holders := 0
				for _, mm := range members {
					if r.Member == mm {
						holders++
					}
				}
				if holders != 1 {
					t.Fatalf("offset %d held by %q", r.Offset, r.Member)
				}
			}
		}
	}
}

func TestPropertyRandomRuns(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		runRandom(t, rand.New(rand.NewSource(seed)), 300)
	}
}

func FuzzAcknowledge(f *testing.F) {
	f.Add(int64(1), uint16(100))
	f.Add(int64(42), uint16(1000))
	f.Fuzz(func(t *testing.T, seed int64, steps uint16) {
		runRandom(t, rand.New(rand.NewSource(seed)), int(steps%2000))
	})
}
