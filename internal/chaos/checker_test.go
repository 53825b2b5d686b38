package chaos

import (
	"reflect"
	"testing"
	"time"
)

func ok(v string, p int32, off int64) Send {
	return Send{Value: v, Partition: p, Offset: off, Outcome: "ok"}
}

func rd(c string, s int, p int32, off int64, v string) Read {
	return Read{Consumer: c, Session: s, Partition: p, Offset: off, Value: v}
}

func final(p int32, start, end int64) FinalRead {
	return FinalRead{Start: map[int32]int64{p: start}, End: map[int32]int64{p: end}, Complete: map[int32]bool{p: true}}
}

func TestCheckClean(t *testing.T) {
	sends := []Send{ok("a", 0, 0), ok("b", 0, 1), {Value: "x", Partition: 0, Outcome: "info"}, ok("c", 0, 3)}
	reads := []Read{
		rd("c0", 0, 0, 0, "a"), rd("c0", 0, 0, 1, "b"),
		rd("c1", 0, 0, 0, "a"), rd("c1", 0, 0, 1, "b"), rd("c1", 0, 0, 2, "x"), rd("c1", 0, 0, 3, "c"),
		rd("final", 0, 0, 0, "a"), rd("final", 0, 0, 1, "b"), rd("final", 0, 0, 2, "x"), rd("final", 0, 0, 3, "c"),
	}
	a := Check(sends, reads, final(0, 0, 4))
	if a.Total() != 0 {
		t.Fatalf("anomalies in a clean history: %v %v", a.Counts, a.Examples)
	}
}

func TestCheckAnomalies(t *testing.T) {
	sends := []Send{
		ok("a", 0, 0),
		ok("lost", 0, 1), // never read, offset 2 read: lost-write (Jepsen)
		ok("b", 0, 2),    // read
		ok("gone", 0, 3), // read by c0 earlier, replaced in the final log: lost-write + inconsistent-offsets
		{Value: "failed", Partition: 0, Outcome: "fail"}, // read: G1a
		ok("unseen", 1, 0), // never read, final read of p1 incomplete: unseen
		ok("dup", 0, 4),    // also read at offset 6: duplicate
	}
	reads := []Read{
		rd("c0", 0, 0, 0, "a"), rd("c0", 0, 0, 2, "b"), // skips existing offset 1: poll-skip
		rd("c0", 0, 0, 3, "gone"),
		rd("c0", 0, 0, 2, "b"), // went back: nonmonotonic-poll
		rd("c1", 0, 0, 5, "failed"),
		rd("c1", 0, 0, 6, "dup"),
		rd("final", 0, 0, 0, "a"), rd("final", 0, 0, 2, "b"), rd("final", 0, 0, 3, "new"), rd("final", 0, 0, 4, "dup"),
		rd("final", 0, 0, 5, "failed"), rd("final", 0, 0, 6, "dup"),
	}
	fr := final(0, 0, 7)
	fr.End[1], fr.Complete[1] = 0, false
	a := Check(sends, reads, fr)
	want := map[string]int{
		AnomLostWrite: 2, AnomInconsistentOffsets: 1, AnomDuplicate: 1, AnomG1a: 1,
		AnomPollSkip: 2, AnomNonmonotonicPoll: 1, AnomUnseen: 1,
	}
	// poll-skip: c0 0->2 skips 1 (acked), and the final read 0->2 skips 1.
	if !reflect.DeepEqual(a.Counts, want) {
		t.Fatalf("counts = %v, want %v\nexamples: %v", a.Counts, want, a.Examples)
	}
}

func TestScheduleDeterministic(t *testing.T) {
	o := &Options{Nodes: 3, Duration: 120 * time.Second, Seed: 42, Partitions: 4, Faults: AllFaults}
	a, b := Schedule(o), Schedule(o)
	if !reflect.DeepEqual(a, b) || len(a) < 8 {
		t.Fatalf("schedule not deterministic or too short: %v", a)
	}
	o.Seed = 43
	if reflect.DeepEqual(a, Schedule(o)) {
		t.Fatal("different seeds gave the same schedule")
	}
	for i := 1; i < len(a); i++ {
		if gap := a[i].AtMs - a[i-1].AtMs; gap < 5000 || gap < a[i-1].DurMs {
			t.Fatalf("faults %d and %d overlap or are too close: %v %v", i-1, i, a[i-1], a[i])
		}
	}
}

func TestParseFaults(t *testing.T) {
	f, err := ParseFaults("kill, partition,pause,kill")
	if err != nil || !reflect.DeepEqual(f, []string{FaultKill, FaultIsolate, FaultPause}) {
		t.Fatalf("got %v %v", f, err)
	}
	if _, err := ParseFaults("clock"); err == nil {
		t.Fatal("unknown fault accepted")
	}
}
