package share

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
)

// gatePersister is a MemPersister whose writes wait at a gate: each
// write signals entered, then waits for a value on release (nil: stored,
// else that error).
type gatePersister struct {
	*MemPersister
	entered chan State
	release chan error
	mu      sync.Mutex
	writes  int
}

func newGatePersister() *gatePersister {
	return &gatePersister{MemPersister: NewMemPersister(), entered: make(chan State, 16), release: make(chan error)}
}

func (g *gatePersister) Write(ctx context.Context, key Key, st State) error {
	g.mu.Lock()
	g.writes++
	g.mu.Unlock()
	g.entered <- st
	if err := <-g.release; err != nil {
		return err
	}
	return g.MemPersister.Write(ctx, key, st)
}

func (g *gatePersister) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// within runs fn and fails the test if it does not return in time.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: blocked (behind an acknowledgement's write?)", what)
	}
}

func waitEntered(t *testing.T, g *gatePersister) State {
	t.Helper()
	select {
	case st := <-g.entered:
		return st
	case <-time.After(5 * time.Second):
		t.Fatal("no write started")
		return State{}
	}
}

// TestAckWriteDoesNotBlockOthers: while one acknowledgement's write is in
// flight, other members acquire and acknowledge; the records under the
// write are not acquired again; the acknowledgements applied meanwhile are
// carried by one write.
func TestAckWriteDoesNotBlockOthers(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	g := newGatePersister()
	sp, err := Load(context.Background(), g, testKey, 0, Config{}, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	log := one(0, 30)
	if n := count(sp.Acquire("a", clk.Now(), 0, log[:10], 0, false)); n != 10 {
		t.Fatalf("a acquired %d", n)
	}
	ctx := context.Background()
	errs := make(chan error, 3)
	// a releases 0-4: its write waits at the gate.
	go func() {
		errs <- sp.Acknowledge(ctx, "a", clk.Now(), []AckBatch{{First: 0, Last: 4, Types: []int8{AckRelease}}}, false)
	}()
	waitEntered(t, g)
	var got []AcquiredRange
	within(t, "acquire during a write", func() { got = fetch(sp, "b", clk.Now(), log, 0) })
	if len(got) != 1 || got[0].First != 10 || got[0].Last != 29 {
		t.Fatalf("b acquired %+v during the release's write, want 10-29 (0-4 pending, 5-9 a's)", got)
	}
	// Two more acknowledgements while the first write is in flight.
	within(t, "acknowledge during a write", func() {
		pa, err := sp.Ack("a", clk.Now(), []AckBatch{{First: 5, Last: 7, Types: []int8{AckAccept}}}, false)
		if err != nil {
			t.Error(err)
			return
		}
		pb, err := sp.Ack("b", clk.Now(), []AckBatch{{First: 10, Last: 12, Types: []int8{AckAccept}}}, false)
		if err != nil {
			t.Error(err)
			return
		}
		go func() { errs <- pa.Wait(ctx) }()
		go func() { errs <- pb.Wait(ctx) }()
	})
	g.release <- nil // the release's write
	st := waitEntered(t, g)
	g.release <- nil // one write for both acknowledgements
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := g.count(); n != 2 {
		t.Fatalf("%d writes, want 2 (the two acknowledgements in one)", n)
	}
	// 8-9 (a's) and 13-29 (b's) are acquired: written as Available with
	// the delivery count before their acquisition, 0, which is not written.
	want := []StateBatch{{0, 4, StateAvailable, 1}, {5, 7, StateAcknowledged, 1}, {10, 12, StateAcknowledged, 1}}
	if st.StartOffset != 0 || len(st.Batches) != len(want) {
		t.Fatalf("second write %+v, want batches %+v", st, want)
	}
	for i := range want {
		if st.Batches[i] != want[i] {
			t.Fatalf("second write batch %d: %+v, want %+v", i, st.Batches[i], want[i])
		}
	}
	// 0-4 are available again now that the release is durable.
	if got := fetch(sp, "c", clk.Now(), log, 0); len(got) == 0 || got[0].First != 0 || got[0].Last != 4 {
		t.Fatalf("c acquired %+v, want 0-4 first", got)
	}
}

// TestFailedWriteRollsBack: a failed write restores the records it
// carried (acquired by their member again), for every acknowledgement it
// carried, and the window does not move past them.
func TestFailedWriteRollsBack(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	g := newGatePersister()
	sp, err := Load(context.Background(), g, testKey, 0, Config{}, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	log := one(0, 10)
	sp.Acquire("a", clk.Now(), 0, log, 0, false)
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		first <- sp.Acknowledge(ctx, "a", clk.Now(), []AckBatch{{First: 0, Last: 2, Types: []int8{AckAccept}}}, false)
	}()
	waitEntered(t, g)
	p, err := sp.Ack("a", clk.Now(), []AckBatch{{First: 3, Last: 4, Types: []int8{AckReject}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { second <- p.Wait(ctx) }()
	// Pending accepts are not acknowledged twice, and SPSO waits.
	within(t, "acknowledge during a write", func() {
		if _, err := sp.Ack("a", clk.Now(), []AckBatch{{First: 0, Last: 0, Types: []int8{AckAccept}}}, false); !errors.Is(err, kerr.InvalidRecordState) {
			t.Errorf("acknowledging a pending record: %v", err)
		}
	})
	if start, _ := sp.Offsets(); start != 0 {
		t.Fatalf("SPSO %d before the write returned", start)
	}
	g.release <- kerr.CoordinatorNotAvailable
	if err := <-first; !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("first: %v", err)
	}
	waitEntered(t, g)
	g.release <- kerr.CoordinatorNotAvailable
	if err := <-second; !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("second: %v", err)
	}
	for _, r := range sp.Window(clk.Now()) {
		if r.State != Acquired || r.Member != "a" {
			t.Fatalf("offset %d: %+v after the failed writes, want acquired by a", r.Offset, r)
		}
	}
	// The member acknowledges them again, durably this time.
	go func() { g.release <- nil }()
	go func() { <-g.entered }()
	if err := sp.Acknowledge(ctx, "a", clk.Now(), []AckBatch{{First: 0, Last: 4, Types: []int8{AckAccept}}}, false); err != nil {
		t.Fatal(err)
	}
	if start, _ := sp.Offsets(); start != 5 {
		t.Fatalf("SPSO %d, want 5", start)
	}
}
