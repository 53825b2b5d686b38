package coord

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
)

// newStepped is newHarness with a stepped runtime.
func newStepped(t *testing.T, rep *fakeReplica, clk clock.Clock) *harness {
	h := &harness{t: t, rep: rep}
	if clk == nil {
		clk = clock.Real
	}
	h.rt = New(Config[*kv]{Name: "test", Clock: clk, Stepped: true,
		Replica: func(int32) (Replica, error) { return h.rep, nil },
		Load: func(_ int32, r Replica) (*kv, error) {
			h.loads.Add(1)
			k := &kv{m: map[string]string{}}
			for _, rec := range r.(*fakeReplica).log {
				k.apply(rec)
			}
			return k, nil
		}})
	t.Cleanup(h.rt.Close)
	return h
}

// setAsync writes key=val with WriteAsync; the answer lands in *got.
func (h *harness) setAsync(key, val string, got *[]error) {
	h.t.Helper()
	err := WriteAsync(h.rt, 0, func(s *Shard[*kv]) ([]byte, func(), string, error) {
		rec := key + "=" + val
		return []byte(rec), s.State().apply(rec), rec, nil
	}, func(_ string, err error) { *got = append(*got, err) })
	if err != nil {
		h.t.Fatalf("WriteAsync: %v", err)
	}
}

// value reads key through a posted event, stepped to completion.
func (h *harness) value(key string) string {
	h.t.Helper()
	var v string
	if err := h.rt.Post(0, func(s *Shard[*kv]) { v = s.State().m[key] }); err != nil {
		h.t.Fatalf("Post: %v", err)
	}
	h.rt.Drain()
	return v
}

func TestSteppedNothingRunsUntilStepped(t *testing.T) {
	h := newStepped(t, newFake(1, true, "a=1"), nil)
	h.rt.Elect(0, 1)
	ran := false
	if err := h.rt.Post(0, func(*Shard[*kv]) { ran = true }); err != nil {
		t.Fatal(err)
	}
	if h.loads.Load() != 0 || ran {
		t.Fatalf("work ran without a Step: loads %d, event %v", h.loads.Load(), ran)
	}
	if !h.rt.Step() || h.loads.Load() != 1 || ran {
		t.Fatalf("first Step: loads %d, event %v (want the load only)", h.loads.Load(), ran)
	}
	if !h.rt.Step() || !ran {
		t.Fatal("second Step did not run the event")
	}
	if h.rt.Step() {
		t.Fatal("a Step with nothing to do reported work")
	}
	if v := h.value("a"); v != "1" {
		t.Fatalf("loaded a=%q", v)
	}
}

func TestSteppedWriteAnsweredOnlyAfterCommit(t *testing.T) {
	h := newStepped(t, newFake(1, false), nil)
	h.rt.Elect(0, 1)
	var got []error
	h.setAsync("k", "v", &got)
	h.rt.Drain()
	if len(got) != 0 {
		t.Fatalf("answered before the commit: %v", got)
	}
	if v := h.value("k"); v != "v" {
		t.Fatalf("state %q before the commit", v)
	}
	h.rep.setHW(1)
	if n := h.rt.Drain(); n != 1 || len(got) != 1 || got[0] != nil {
		t.Fatalf("after the HW moved: %d steps, answers %v", n, got)
	}
}

func TestSteppedBlockingWrite(t *testing.T) {
	h := newStepped(t, newFake(1, true), nil)
	h.rt.Elect(0, 1)
	ch := h.set("k", "v") // Write on another goroutine, answered by Steps
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.rt.Step()
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSteppedCommitFailureRollsBack(t *testing.T) {
	rep := newFake(1, false)
	h := newStepped(t, rep, nil)
	h.rt.Elect(0, 1)
	var got []error
	h.setAsync("a", "1", &got)
	h.setAsync("a", "2", &got)
	h.setAsync("b", "1", &got)
	h.rt.Drain()
	rep.setHW(1) // the first write is committed, then leadership moves
	rep.mu.Lock()
	rep.epoch = 2
	rep.mu.Unlock()
	h.rt.Drain()
	if len(got) != 3 || got[0] != nil || !errors.Is(got[1], ErrNotCoordinator) || !errors.Is(got[2], ErrNotCoordinator) {
		t.Fatalf("answers %v", got)
	}
	if a, b := h.value("a"), h.value("b"); a != "1" || b != "" {
		t.Fatalf("rolled back to a=%q b=%q, want a=1 b=\"\"", a, b)
	}
}

// pollingFake reports its commit failures through CommitPoller.
type pollingFake struct{ *fakeReplica }

func (p pollingFake) PollCommit(end int64) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.hw >= end:
		return true, nil
	case p.commitErr != nil:
		return true, p.commitErr
	}
	return false, nil
}

func TestSteppedCommitPoller(t *testing.T) {
	rep := newFake(1, false)
	h := newStepped(t, rep, nil)
	h.rt.cfg.Replica = func(int32) (Replica, error) { return pollingFake{rep}, nil }
	h.rt.cfg.Load = func(int32, Replica) (*kv, error) { return &kv{m: map[string]string{}}, nil }
	h.rt.Elect(0, 1)
	var got []error
	h.setAsync("a", "1", &got)
	h.rt.Drain()
	boom := errors.New("timed out")
	rep.failCommits(boom)
	h.rt.Drain()
	if len(got) != 1 || got[0] != boom {
		t.Fatalf("answers %v", got)
	}
	if v := h.value("a"); v != "" {
		t.Fatalf("not rolled back: a=%q", v)
	}
}

func TestSteppedTimers(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	h := newStepped(t, newFake(1, true), clk)
	h.rt.Elect(0, 1)
	var fired []string
	h.rt.Post(0, func(s *Shard[*kv]) {
		s.Schedule("late", s.Now().Add(2*time.Second), func(*Shard[*kv]) { fired = append(fired, "late") })
		s.Schedule("b", s.Now().Add(time.Second), func(*Shard[*kv]) { fired = append(fired, "b") })
		s.Schedule("a", s.Now().Add(time.Second), func(*Shard[*kv]) { fired = append(fired, "a") })
		s.Schedule("gone", s.Now().Add(time.Second), func(*Shard[*kv]) { fired = append(fired, "gone") })
		s.Cancel("gone")
	})
	h.rt.Drain()
	clk.Advance(999 * time.Millisecond)
	if h.rt.Drain(); len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	clk.Advance(5 * time.Second)
	if h.rt.Drain(); len(fired) != 3 || fired[0] != "a" || fired[1] != "b" || fired[2] != "late" {
		t.Fatalf("fired %v, want [a b late]", fired)
	}
}

func TestSteppedResign(t *testing.T) {
	h := newStepped(t, newFake(1, false), nil)
	unloaded := 0
	h.rt.cfg.Unloaded = func(*Shard[*kv]) { unloaded++ }
	h.rt.Elect(0, 1)
	var got []error
	h.setAsync("a", "1", &got)
	h.rt.Drain() // appended, waiting for the commit
	ran := false
	h.rt.Post(0, func(*Shard[*kv]) { ran = true })
	if !h.rt.Resign(0, 1) { // returns without a Step
		t.Fatal("not resigned")
	}
	if len(got) != 0 || unloaded != 0 {
		t.Fatal("the unload ran inside Resign")
	}
	h.rt.Drain()
	if ran || len(got) != 1 || !errors.Is(got[0], ErrNotCoordinator) || unloaded != 1 {
		t.Fatalf("after the unload: event ran %v, answers %v, Unloaded %d times", ran, got, unloaded)
	}
	if err := h.rt.Post(0, func(*Shard[*kv]) {}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("Post after Resign: %v", err)
	}
}

// TestSteppedShardsInterleave: Step visits the shards in partition order,
// one unit each, so one busy shard does not starve another.
func TestSteppedShardsInterleave(t *testing.T) {
	h := newStepped(t, newFake(1, true), nil)
	h.rt.Elect(0, 1)
	h.rt.Elect(1, 1)
	h.rt.Drain()
	var order []int32
	for range 2 {
		for _, p := range []int32{1, 0} {
			h.rt.Post(p, func(s *Shard[*kv]) { order = append(order, s.Partition()) })
		}
	}
	h.rt.Drain()
	if len(order) != 4 || order[0] == order[1] || order[2] == order[3] {
		t.Fatalf("order %v", order)
	}
}

// TestSteppedCommitted: Shard.Committed answers at once when the log is
// committed to its end, and otherwise once the HW reaches the log end it
// saw (records a load read above the HW included).
func TestSteppedCommitted(t *testing.T) {
	rep := newFake(1, false, "a=1", "b=2")
	rep.setHW(1) // b=2 was loaded from above the HW
	h := newStepped(t, rep, nil)
	h.rt.Elect(0, 1)
	var got []error
	if err := h.rt.Post(0, func(s *Shard[*kv]) { s.Committed(func(err error) { got = append(got, err) }) }); err != nil {
		t.Fatal(err)
	}
	h.rt.Drain()
	if len(got) != 0 {
		t.Fatalf("answered with the log end above the HW: %v", got)
	}
	rep.setHW(2)
	h.rt.Drain()
	if len(got) != 1 || got[0] != nil {
		t.Fatalf("after the HW reached the log end: %v", got)
	}
	if err := h.rt.Post(0, func(s *Shard[*kv]) { s.Committed(func(err error) { got = append(got, err) }) }); err != nil {
		t.Fatal(err)
	}
	h.rt.Drain()
	if len(got) != 2 || got[1] != nil {
		t.Fatalf("with the log committed: %v", got)
	}
}

// TestSteppedRead: Shard.Read waits for what the state shows: the records
// a load read above the HW and the writes applied at their append
// (Shows), not the other writes in flight, whose change the state does
// not show until they are committed.
func TestSteppedRead(t *testing.T) {
	rep := newFake(1, false, "a=1", "b=2")
	rep.setHW(1) // b=2 was loaded from above the HW
	h := newStepped(t, rep, nil)
	h.rt.Elect(0, 1)
	h.rt.Drain()
	var got []error
	read := func() {
		t.Helper()
		if err := h.rt.Post(0, func(s *Shard[*kv]) { s.Read(func(err error) { got = append(got, err) }) }); err != nil {
			t.Fatal(err)
		}
		h.rt.Drain()
	}
	var writes []error
	h.setAsync("c", "3", &writes) // in flight, not shown
	read()
	if len(got) != 0 {
		t.Fatalf("read answered with the loaded b=2 above the HW: %v", got)
	}
	rep.setHW(2) // b=2 committed, c=3 not yet
	h.rt.Drain()
	if len(got) != 1 || got[0] != nil || len(writes) != 0 {
		t.Fatalf("read %v (write %v): want answered once the loaded records are, before the write in flight", got, writes)
	}
	// A write applied at its append is waited for.
	if err := h.rt.Post(0, func(s *Shard[*kv]) {
		info, err := s.Append([]byte("d=4"), s.State().apply("d=4"), nil)
		if err != nil {
			t.Error(err)
			return
		}
		s.Shows(info.LastOffset + 1)
	}); err != nil {
		t.Fatal(err)
	}
	h.rt.Drain()
	read()
	if len(got) != 1 {
		t.Fatalf("read answered with a shown write above the HW: %v", got)
	}
	rep.setHW(4)
	h.rt.Drain()
	if len(got) != 2 || got[1] != nil {
		t.Fatalf("read once the shown write is committed: %v", got)
	}
	read()
	if len(got) != 3 || got[2] != nil {
		t.Fatalf("read with everything committed: %v", got)
	}
}
