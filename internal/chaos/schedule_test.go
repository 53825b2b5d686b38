package chaos

import (
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
