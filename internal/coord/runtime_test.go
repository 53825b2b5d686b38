package coord

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/storage"
)

// fakeReplica is an in-memory log of one record per batch whose high
// watermark the test moves.
type fakeReplica struct {
	mu        sync.Mutex
	cond      *sync.Cond
	log       []string
	hw        int64
	epoch     int32
	autoHW    bool  // the high watermark follows every append
	appendErr error // the next Append fails with it
	commitErr error // waiting Commits fail with it
}

func newFake(epoch int32, auto bool, recs ...string) *fakeReplica {
	f := &fakeReplica{epoch: epoch, autoHW: auto, log: recs, hw: int64(len(recs))}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *fakeReplica) Append(b []byte, _ time.Time) (storage.AppendInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.appendErr; err != nil {
		f.appendErr = nil
		return storage.AppendInfo{}, err
	}
	f.log = append(f.log, string(b))
	off := int64(len(f.log) - 1)
	if f.autoHW {
		f.hw = off + 1
		f.cond.Broadcast()
	}
	return storage.AppendInfo{FirstOffset: off, LastOffset: off}, nil
}

func (f *fakeReplica) Commit(end int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.hw < end && f.commitErr == nil {
		f.cond.Wait()
	}
	if f.hw >= end {
		return nil
	}
	return f.commitErr
}

func (f *fakeReplica) setHW(hw int64) {
	f.mu.Lock()
	f.hw = hw
	f.cond.Broadcast()
	f.mu.Unlock()
}

func (f *fakeReplica) failCommits(err error) {
	f.mu.Lock()
	f.commitErr = err
	f.cond.Broadcast()
	f.mu.Unlock()
}

func (f *fakeReplica) HighWatermark() int64  { f.mu.Lock(); defer f.mu.Unlock(); return f.hw }
func (f *fakeReplica) LeaderEpoch() int32    { f.mu.Lock(); defer f.mu.Unlock(); return f.epoch }
func (f *fakeReplica) LogStartOffset() int64 { return 0 }
func (f *fakeReplica) LogEndOffset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.log))
}

// kv is the test state machine: records are "key=value".
type kv struct {
	m map[string]string
}

func (k *kv) apply(rec string) (undo func()) {
	key, val, _ := strings.Cut(rec, "=")
	old, had := k.m[key]
	k.m[key] = val
	return func() {
		if had {
			k.m[key] = old
		} else {
			delete(k.m, key)
		}
	}
}

type harness struct {
	t     *testing.T
	rt    *Runtime[*kv]
	rep   *fakeReplica
	gate  chan struct{} // if set, Load waits on it
	loads atomic.Int32
}

func newHarness(t *testing.T, rep *fakeReplica, clk clock.Clock) *harness {
	h := &harness{t: t, rep: rep}
	if clk == nil {
		clk = clock.Real
	}
	h.rt = New(Config[*kv]{Name: "test", Clock: clk,
		Replica: func(int32) (Replica, error) { return h.rep, nil },
		Load: func(_ int32, r Replica) (*kv, error) {
			h.loads.Add(1)
			if h.gate != nil {
				<-h.gate
			}
			f := r.(*fakeReplica)
			k := &kv{m: map[string]string{}}
			f.mu.Lock()
			recs := append([]string(nil), f.log...)
			f.mu.Unlock()
			for _, rec := range recs {
				k.apply(rec)
			}
			return k, nil
		}})
	t.Cleanup(h.rt.Close)
	return h
}

// set writes key=val as a write event and returns its wait.
func (h *harness) set(key, val string) <-chan error {
	out := make(chan error, 1)
	go func() {
		_, err := Write(h.rt, 0, func(s *Shard[*kv]) ([]byte, func(), struct{}, error) {
			rec := key + "=" + val
			return []byte(rec), s.State().apply(rec), struct{}{}, nil
		})
		out <- err
	}()
	return out
}

func (h *harness) get(key string) (string, error) {
	var v string
	err := h.rt.Run(0, func(s *Shard[*kv]) { v = s.State().m[key] })
	return v, err
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

func TestWriteAnsweredOnlyAfterCommit(t *testing.T) {
	h := newHarness(t, newFake(1, false), nil)
	h.rt.Elect(0, 1)
	done := h.set("a", "1")
	select {
	case err := <-done:
		t.Fatalf("write answered (%v) before the high watermark passed it", err)
	case <-time.After(100 * time.Millisecond):
	}
	h.rep.setHW(1)
	if err := waitErr(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestAppendFailureRollsBack(t *testing.T) {
	h := newHarness(t, newFake(1, true), nil)
	h.rt.Elect(0, 1)
	if err := waitErr(t, h.set("a", "1")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("not enough replicas")
	h.rep.mu.Lock()
	h.rep.appendErr = boom
	h.rep.mu.Unlock()
	if err := waitErr(t, h.set("a", "2")); err != boom {
		t.Fatalf("append error %v", err)
	}
	if v, _ := h.get("a"); v != "1" {
		t.Fatalf("a = %q after a failed append, want the committed 1", v)
	}
}

func TestCommitFailureRollsBackToLastCommitted(t *testing.T) {
	h := newHarness(t, newFake(1, false), nil)
	h.rt.Elect(0, 1)
	first := h.set("a", "1")
	h.rep.setHW(1)
	if err := waitErr(t, first); err != nil {
		t.Fatal(err)
	}
	// Two writes appended, neither committed: b=1 then a=2 then b=2.
	w1, w2, w3 := h.set("b", "1"), (<-chan error)(nil), (<-chan error)(nil)
	waitAppended := func(n int) {
		for deadline := time.Now().Add(5 * time.Second); h.rep.LogEndOffset() < int64(n); {
			if time.Now().After(deadline) {
				t.Fatal("not appended")
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitAppended(2)
	w2 = h.set("a", "2")
	waitAppended(3)
	w3 = h.set("b", "2")
	waitAppended(4)
	if v, _ := h.get("a"); v != "2" {
		t.Fatalf("a = %q before the failure", v)
	}
	boom := errors.New("leadership lost")
	h.rep.failCommits(boom)
	for _, w := range []<-chan error{w1, w2, w3} {
		if err := waitErr(t, w); err != boom {
			t.Fatalf("write answered %v, want %v", err, boom)
		}
	}
	a, _ := h.get("a")
	_, errB := h.get("b")
	var hasB bool
	h.rt.Run(0, func(s *Shard[*kv]) { _, hasB = s.State().m["b"] })
	if a != "1" || hasB || errB != nil {
		t.Fatalf("after rollback a=%q b present=%v, want a=1 and no b", a, hasB)
	}
}

func TestEventsOfAShardNeverOverlap(t *testing.T) {
	h := newHarness(t, newFake(1, true), nil)
	h.rt.Elect(0, 1)
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				h.rt.Run(0, func(s *Shard[*kv]) {
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					runtime.Gosched()
					inside.Add(-1)
				})
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d events overlapped", n)
	}
}

// goid is the running goroutine's id.
func goid() string {
	var b [64]byte
	f := strings.Fields(string(b[:runtime.Stack(b[:], false)]))
	return f[1]
}

func TestTimersRunOnTheOwner(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	h := newHarness(t, newFake(1, true), clk)
	h.rt.Elect(0, 1)
	var owner, fired string
	h.rt.Run(0, func(s *Shard[*kv]) {
		owner = goid()
		s.Schedule("k", s.Now().Add(time.Second), func(s *Shard[*kv]) {
			fired = goid()
			s.State().m["timer"] = "fired"
		})
		s.Schedule("k2", s.Now().Add(time.Second), func(*Shard[*kv]) {})
		s.Cancel("k2")
	})
	clk.Advance(999 * time.Millisecond)
	if v, _ := h.get("timer"); v != "" {
		t.Fatal("timer fired early")
	}
	clk.Advance(time.Millisecond)
	// Advance returns once the timer's event ran.
	var v string
	h.rt.Run(0, func(s *Shard[*kv]) { v = s.State().m["timer"] })
	if v != "fired" || fired != owner || fired == "" {
		t.Fatalf("timer: value %q, ran on goroutine %s, owner %s", v, fired, owner)
	}
}

func TestStaleEpochIgnored(t *testing.T) {
	h := newHarness(t, newFake(5, true), nil)
	if !h.rt.Elect(0, 5) {
		t.Fatal("not elected")
	}
	if h.rt.Resign(0, 4) {
		t.Fatal("a Resign at an older epoch unloaded the shard")
	}
	if h.rt.Elect(0, 4) {
		t.Fatal("an Elect at an older epoch reloaded the shard")
	}
	if _, err := h.get("x"); err != nil {
		t.Fatalf("after stale Resign: %v", err)
	}
	if !h.rt.Resign(0, 5) {
		t.Fatal("Resign at the shard's epoch ignored")
	}
	if _, err := h.get("x"); err != ErrNotCoordinator {
		t.Fatalf("after Resign: %v", err)
	}
	// A newer epoch replaces the shard.
	h.rt.Elect(0, 6)
	if !h.rt.Elect(0, 7) {
		t.Fatal("a newer Elect kept the old shard")
	}
	if info, _ := h.rt.Info(0); info.Epoch != 7 {
		t.Fatalf("epoch %d", info.Epoch)
	}
}

func TestLoadReplays(t *testing.T) {
	h := newHarness(t, newFake(1, true, "a=1", "b=1", "a=2"), nil)
	h.gate = make(chan struct{})
	h.rt.Elect(0, 1)
	if _, err := h.get("a"); err != ErrLoading {
		t.Fatalf("while loading: %v", err)
	}
	posted := make(chan string, 1)
	if err := h.rt.Post(0, func(s *Shard[*kv]) { posted <- s.State().m["a"] }); err != nil {
		t.Fatal(err)
	}
	close(h.gate)
	select {
	case v := <-posted:
		if v != "2" {
			t.Fatalf("posted event saw a=%q", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("posted event never ran")
	}
	a, _ := h.get("a")
	b, _ := h.get("b")
	if a != "2" || b != "1" {
		t.Fatalf("replayed a=%q b=%q", a, b)
	}
}

func TestUnloadFailsPendingWrites(t *testing.T) {
	unloaded := make(chan struct{})
	h := newHarness(t, newFake(1, false), nil)
	h.rt.cfg.Unloaded = func(*Shard[*kv]) { close(unloaded) }
	h.rt.Elect(0, 1)
	w := h.set("a", "1")
	for h.rep.LogEndOffset() < 1 {
		time.Sleep(time.Millisecond)
	}
	h.rt.Resign(0, -1)
	if err := waitErr(t, w); err != ErrNotCoordinator {
		t.Fatalf("pending write after unload: %v", err)
	}
	select {
	case <-unloaded:
	default:
		t.Fatal("Resign returned before the Unloaded hook ran")
	}
}

// TestCommittedWaitsForLoadedRecords: Shard.Committed, called after a
// load that read records above the HW, completes only once the HW reaches
// the log end.
func TestCommittedWaitsForLoadedRecords(t *testing.T) {
	rep := newFake(1, false, "a=1", "b=2")
	rep.setHW(1)
	h := newHarness(t, rep, nil)
	h.rt.Elect(0, 1)
	done := make(chan error, 1)
	var err error
	for i := 0; i < 1000; i++ {
		if err = h.rt.Run(0, func(s *Shard[*kv]) { s.Committed(func(err error) { done <- err }) }); err != ErrLoading {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("answered (%v) with the log end above the HW", err)
	case <-time.After(100 * time.Millisecond):
	}
	rep.setHW(2)
	if err := waitErr(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestReadAfterRollback: a write applied at its append (Shows) holds
// reads back until it is committed; once its commit fails and the state is
// rolled back, reads are answered at once again (the state shows only
// committed records), and the read that waited gets the failure.
func TestReadAfterRollback(t *testing.T) {
	rep := newFake(1, false)
	h := newHarness(t, rep, nil)
	h.rt.Elect(0, 1)
	done := make(chan error, 1)
	if err := h.rt.Run(0, func(s *Shard[*kv]) {
		info, err := s.Append([]byte("a=1"), s.State().apply("a=1"), nil)
		if err != nil {
			t.Error(err)
			return
		}
		s.Shows(info.LastOffset + 1)
		s.Read(func(err error) { done <- err })
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("read answered (%v) with a shown write above the HW", err)
	case <-time.After(100 * time.Millisecond):
	}
	boom := errors.New("commit failed")
	rep.failCommits(boom)
	if err := waitErr(t, done); err != boom {
		t.Fatalf("the waiting read: %v, want the commit's failure", err)
	}
	var readable bool
	var v string
	if err := h.rt.Run(0, func(s *Shard[*kv]) { readable, v = s.Readable(), s.State().m["a"] }); err != nil {
		t.Fatal(err)
	}
	if !readable || v != "" {
		t.Fatalf("after the rollback: readable %v, a=%q", readable, v)
	}
}
