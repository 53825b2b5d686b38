package sharecoord

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/share"
)

// live applies each operation's records to st, as the coordinator does,
// and keeps them (encoded and decoded again) as the log.
type live struct {
	st  *State
	log []Record
}

func (l *live) apply(t *testing.T, recs []Record) {
	t.Helper()
	for _, r := range recs {
		dec, err := DecodeRecord(r.EncodeKey(), r.EncodeValue())
		if err != nil {
			t.Fatal(err)
		}
		l.st.Apply(r)
		l.log = append(l.log, dec)
	}
}

func (l *live) replay() *State {
	st := NewState(l.st.snapshotEvery)
	for _, r := range l.log {
		st.Apply(r)
	}
	return st
}

func TestFencing(t *testing.T) {
	l := &live{st: NewState(500)}
	k := testKey(0)
	recs, err := l.st.InitializeRecords(k, 1, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.apply(t, recs)
	if recs, err = l.st.ReadRecords(k, 5); err != nil || len(recs) != 1 {
		t.Fatalf("read at a new leader epoch: %v %v", recs, err)
	}
	l.apply(t, recs)
	if _, err := l.st.ReadRecords(k, 4); err != kerr.FencedLeaderEpoch {
		t.Fatalf("read at an older leader epoch: %v", err)
	}
	if recs, err := l.st.ReadRecords(k, 5); err != nil || len(recs) != 0 {
		t.Fatalf("read at the same leader epoch: %v %v", recs, err)
	}
	if _, err := l.st.WriteRecords(k, share.State{StateEpoch: 1, LeaderEpoch: 4, StartOffset: 10}, 2); err != kerr.FencedLeaderEpoch {
		t.Fatalf("write from an older leader: %v", err)
	}
	if _, err := l.st.WriteRecords(k, share.State{StateEpoch: 0, LeaderEpoch: 5, StartOffset: 10}, 2); err != kerr.FencedStateEpoch {
		t.Fatalf("write at an older state epoch: %v", err)
	}
	if _, err := l.st.InitializeRecords(k, 0, 3, 2); err != kerr.FencedStateEpoch {
		t.Fatalf("initialize at an older state epoch: %v", err)
	}
	if recs, err = l.st.WriteRecords(k, share.State{StateEpoch: 1, LeaderEpoch: 5, StartOffset: 12, DeliveryCompleteCount: 1,
		Batches: []share.StateBatch{{FirstOffset: 12, LastOffset: 13, DeliveryState: share.StateAcknowledged, DeliveryCount: 1}}}, 3); err != nil {
		t.Fatal(err)
	}
	l.apply(t, recs)
	// The replay fences the same way: the leader epoch the reader set
	// was written.
	re := l.replay()
	if _, err := re.WriteRecords(k, share.State{StateEpoch: 1, LeaderEpoch: 4, StartOffset: 10}, 4); err != kerr.FencedLeaderEpoch {
		t.Fatalf("replayed state: write from an older leader: %v", err)
	}
	got, _ := re.Get(k)
	want := share.State{StateEpoch: 1, LeaderEpoch: 5, StartOffset: 12, DeliveryCompleteCount: 1,
		Batches: []share.StateBatch{{FirstOffset: 12, LastOffset: 13, DeliveryState: share.StateAcknowledged, DeliveryCount: 1}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed state = %+v, want %+v", got, want)
	}
}

func TestSnapshotCadence(t *testing.T) {
	const every = 3
	l := &live{st: NewState(every)}
	k := testKey(1)
	var types []int16
	for i := range 10 {
		recs, err := l.st.WriteRecords(k, share.State{StateEpoch: 0, LeaderEpoch: 1, StartOffset: int64(i), DeliveryCompleteCount: -1}, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		l.apply(t, recs)
		types = append(types, recs[0].Type)
	}
	// The first write is a snapshot, then every+1 records per cycle: every
	// updates and one snapshot.
	want := []int16{TypeSnapshot, TypeUpdate, TypeUpdate, TypeUpdate, TypeSnapshot, TypeUpdate, TypeUpdate, TypeUpdate, TypeSnapshot, TypeUpdate}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("record types = %v, want %v", types, want)
	}
	snaps := 0
	for _, r := range l.log {
		if r.Type == TypeSnapshot {
			if r.SnapshotEpoch != int32(snaps) {
				t.Fatalf("snapshot %d has epoch %d", snaps, r.SnapshotEpoch)
			}
			snaps++
		}
	}
	// A write at a newer state epoch is a snapshot whatever the count.
	recs, err := l.st.WriteRecords(k, share.State{StateEpoch: 1, LeaderEpoch: 1, StartOffset: 20, DeliveryCompleteCount: -1}, 20)
	if err != nil || recs[0].Type != TypeSnapshot || recs[0].StateEpoch != 1 {
		t.Fatalf("write at a new state epoch: %+v %v", recs, err)
	}
}

// TestReplayEqualsLive runs random operations on several keys and checks
// that replaying the records written gives the live state, and that the
// live state is what a model applying share.Combine directly holds.
func TestReplayEqualsLive(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, every := range []int{0, 1, 4, 500} {
		l := &live{st: NewState(every)}
		model := map[share.Key]share.State{}
		keys := []share.Key{testKey(0), testKey(1), {Group: "other", Partition: 2}}
		for step := range 3000 {
			k := keys[rng.Intn(len(keys))]
			cur, ok := model[k]
			switch op := rng.Intn(20); {
			case op == 0:
				epoch := cur.StateEpoch + 1
				recs, err := l.st.InitializeRecords(k, epoch, rng.Int63n(50), int64(step))
				if err != nil {
					t.Fatal(err)
				}
				l.apply(t, recs)
				model[k] = share.State{StateEpoch: epoch, LeaderEpoch: -1, StartOffset: recs[0].StartOffset}
			case op == 1:
				l.apply(t, l.st.DeleteRecords(k))
				delete(model, k)
			case op == 2 && ok:
				recs, err := l.st.ReadRecords(k, cur.LeaderEpoch+int32(rng.Intn(2)))
				if err != nil {
					t.Fatal(err)
				}
				l.apply(t, recs)
				if len(recs) > 0 {
					cur.LeaderEpoch = recs[0].LeaderEpoch
					model[k] = cur
				}
			default:
				start := cur.StartOffset + rng.Int63n(3)
				if !ok {
					start = rng.Int63n(10)
				}
				var bs []share.StateBatch
				for range rng.Intn(4) {
					f := start + rng.Int63n(20)
					bs = append(bs, share.StateBatch{FirstOffset: f, LastOffset: f + rng.Int63n(5),
						DeliveryState: []int8{0, 2, 4}[rng.Intn(3)], DeliveryCount: int16(rng.Intn(4))})
				}
				w := share.State{StateEpoch: cur.StateEpoch, LeaderEpoch: max(cur.LeaderEpoch, 0), StartOffset: start,
					DeliveryCompleteCount: int32(rng.Intn(5)), Batches: bs}
				recs, err := l.st.WriteRecords(k, w, int64(step))
				if err != nil {
					t.Fatal(err)
				}
				l.apply(t, recs)
				w.Batches = share.Combine(cur.Batches, bs, start)
				model[k] = w
			}
		}
		re := l.replay()
		for _, k := range keys {
			want, ok := model[k]
			got, gok := l.st.Get(k)
			rgot, rok := re.Get(k)
			if ok != gok || ok != rok {
				t.Fatalf("every=%d key %v: present model=%v live=%v replay=%v", every, k, ok, gok, rok)
			}
			if !ok {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("every=%d key %v: live %+v, model %+v", every, k, got, want)
			}
			if !reflect.DeepEqual(rgot, got) {
				t.Fatalf("every=%d key %v: replay %+v, live %+v", every, k, rgot, got)
			}
		}
	}
}

// TestPruneFloor: the records below the last snapshot of every share
// partition, and of the committed state of one with writes in flight, are
// the only ones not needed; a share partition not written since the last
// prune is cold.
func TestPruneFloor(t *testing.T) {
	st := NewState(3)
	a, b := testKey(0), testKey(1)
	st.Apply(Record{Type: TypeSnapshot, Key: a, StartOffset: 0, Offset: 10})
	st.Apply(Record{Type: TypeUpdate, Key: a, StartOffset: 1, Offset: 11})
	st.Apply(Record{Type: TypeSnapshot, Key: b, StartOffset: 0, Offset: 12})
	st.Apply(Record{Type: TypeUpdate, Key: b, StartOffset: 2, Offset: 13})
	if f := st.PruneFloor(100); f != 10 {
		t.Fatalf("floor %d, want 10 (a's snapshot)", f)
	}
	if f := st.PruneFloor(5); f != 5 {
		t.Fatalf("floor %d, want the high watermark 5", f)
	}
	if cold := st.coldKeys(12); len(cold) != 1 || cold[0] != a {
		t.Fatalf("cold keys below 12: %v, want [a]", cold)
	}
	// a gets a new snapshot, not yet committed: its committed one (10)
	// is still needed.
	st.pending[a] = &inflight{n: 1, base: st.entries[a]}
	st.Apply(Record{Type: TypeSnapshot, Key: a, StartOffset: 1, Offset: 14})
	if f := st.PruneFloor(100); f != 10 {
		t.Fatalf("floor %d with a's new snapshot in flight, want 10", f)
	}
	if cold := st.coldKeys(100); len(cold) != 1 || cold[0] != b {
		t.Fatalf("cold keys: %v, want only b (a has a write in flight)", cold)
	}
	delete(st.pending, a)
	if f := st.PruneFloor(100); f != 12 {
		t.Fatalf("floor %d once a's snapshot is committed, want 12 (b's)", f)
	}
	// Deleting b in flight keeps its committed snapshot.
	st.pending[b] = &inflight{n: 1, base: st.entries[b]}
	st.Apply(Record{Type: TypeSnapshot, Key: b, Tombstone: true, Offset: 15})
	if f := st.PruneFloor(100); f != 12 {
		t.Fatalf("floor %d with b's deletion in flight, want 12", f)
	}
	delete(st.pending, b)
	if f := st.PruneFloor(100); f != 14 {
		t.Fatalf("floor %d once b is deleted, want 14 (a's snapshot)", f)
	}
}
