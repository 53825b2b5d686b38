package chaos

import (
	"slices"
	"testing"
	"time"
)

// Faults of one lane never overlap; with Overlap the network faults get a
// lane of their own, and without it every fault is in lane 0.
func TestScheduleLanes(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		o := &Options{Nodes: 5, Partitions: 4, Duration: 10 * time.Minute, Seed: 42, Faults: AllFaults, Overlap: overlap}
		sched := Schedule(o)
		if len(sched) < 50 {
			t.Fatalf("overlap=%v: only %d faults in 10 minutes", overlap, len(sched))
		}
		end := map[int]int64{}
		lanes := map[int]int{}
		for _, f := range sched {
			lanes[f.Lane]++
			if f.AtMs < end[f.Lane] {
				t.Errorf("overlap=%v: %s starts before the previous fault of its lane ends (%d ms)", overlap, f, end[f.Lane])
			}
			end[f.Lane] = f.AtMs + f.DurMs
			if overlap && netFault(f.Kind) != (f.Lane == 1) {
				t.Errorf("%s in lane %d", f, f.Lane)
			}
		}
		if want := map[bool]int{false: 1, true: 2}[overlap]; len(lanes) != want {
			t.Errorf("overlap=%v: %d lanes, want %d", overlap, len(lanes), want)
		}
		again := Schedule(o)
		for i := range sched {
			if sched[i] != again[i] {
				t.Fatalf("overlap=%v: schedule not a function of the seed: %s vs %s", overlap, sched[i], again[i])
			}
		}
	}
}

// TestScheduleObjStore: the object store fault is drawn only in a tiered
// run, so a seed of any other run keeps the schedule it had before the
// kind existed; in a tiered run it is scheduled in all three modes, in
// the network lane.
func TestScheduleObjStore(t *testing.T) {
	others := slices.DeleteFunc(slices.Clone(AllFaults), func(k string) bool { return k == FaultObjStore })
	for _, overlap := range []bool{false, true} {
		o := &Options{Nodes: 3, Partitions: 4, Duration: 10 * time.Minute, Seed: 7, Faults: AllFaults, Overlap: overlap}
		plain := &Options{Nodes: 3, Partitions: 4, Duration: 10 * time.Minute, Seed: 7, Faults: others, Overlap: overlap}
		if a, b := Schedule(o), Schedule(plain); !slices.Equal(a, b) {
			t.Errorf("overlap=%v: a run that is not tiered drew from the objstore kind too", overlap)
		}
		o.Tiered = true
		modes := map[int]int{}
		for _, f := range Schedule(o) {
			if f.Kind != FaultObjStore {
				continue
			}
			mode, delay := objStoreMode(f)
			modes[mode]++
			if delay < 200*time.Millisecond || delay > time.Second {
				t.Errorf("%s: delay %v", f, delay)
			}
			if overlap && f.Lane != 1 {
				t.Errorf("%s in lane %d", f, f.Lane)
			}
		}
		if modes[s3Slow] == 0 || modes[s3Errors] == 0 || modes[s3Outage] == 0 {
			t.Errorf("overlap=%v: modes drawn %v, want slow, errors and outage", overlap, modes)
		}
	}
	if _, err := ParseFaults("objstore,kill"); err != nil {
		t.Error(err)
	}
}
