package share

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
)

// TestExpiryWriteWaitsForAckWrite: the write of an expired lock's release
// does not start while an acknowledgement's write of the same partition is
// in flight (each write carries the whole window: an older window landing
// after a newer one would undo it); it starts once that write returned,
// and the released records are acquired again only after it.
func TestExpiryWriteWaitsForAckWrite(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	g := newGatePersister()
	sp, err := Load(context.Background(), g, testKey, 0, Config{LockDuration: time.Second}, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	log := one(0, 10)
	if n := count(sp.Acquire("a", clk.Now(), 0, log[:5], 0, false)); n != 5 {
		t.Fatalf("a acquired %d", n)
	}
	clk.Advance(500 * time.Millisecond)
	if n := count(sp.Acquire("b", clk.Now(), 5, log[5:], 0, false)); n != 5 {
		t.Fatalf("b acquired %d", n)
	}
	ctx := context.Background()
	errs := make(chan error, 2)
	go func() {
		errs <- sp.Acknowledge(ctx, "a", clk.Now(), []AckBatch{{First: 0, Last: 4, Types: []int8{AckAccept}}}, false)
	}()
	first := waitEntered(t, g)
	if first.StartOffset != 5 {
		t.Fatalf("acknowledgement's write %+v, want start offset 5", first)
	}
	// b's lock passes while a's write is in flight.
	clk.Advance(time.Second)
	go func() { errs <- sp.PersistExpired(ctx, clk.Now()) }()
	select {
	case st := <-g.entered:
		t.Fatalf("expiry write %+v started while the acknowledgement's write was in flight", st)
	case <-time.After(200 * time.Millisecond):
	}
	if got := sp.Acquire("c", clk.Now(), 5, log[5:], 0, false); len(got) != 0 {
		t.Fatalf("c acquired %+v before the release was written", got)
	}
	g.release <- nil
	second := waitEntered(t, g)
	want := StateBatch{FirstOffset: 5, LastOffset: 9, DeliveryState: StateAvailable, DeliveryCount: 1}
	if second.StartOffset != 5 || len(second.Batches) != 1 || second.Batches[0] != want {
		t.Fatalf("expiry write %+v, want start offset 5 and %+v", second, want)
	}
	g.release <- nil
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := g.Read(ctx, testKey, 0); st.StartOffset != 5 || len(st.Batches) != 1 || st.Batches[0] != want {
		t.Fatalf("persisted %+v, want the expiry write's window", st)
	}
	if got := sp.Acquire("c", clk.Now(), 5, log[5:], 0, false); count(got) != 5 || got[0].DeliveryCount != 2 {
		t.Fatalf("c acquired %+v after the release was written, want 5-9 with count 2", got)
	}
}

// TestDeadLetterOnlyAfterDurableWrite: a record goes to the dead-letter
// sink only once the write carrying its Archiving state succeeded: not
// for a reject whose write failed (rolled back), nor for a lock that
// passed at the delivery limit until its archiving is written.
func TestDeadLetterOnlyAfterDurableWrite(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	sink := &sinkRec{room: 10}
	p := &flakyPersister{MemPersister: NewMemPersister()}
	cfg := Config{LockDuration: time.Second, DeliveryLimit: 1, DeadLetters: sink}
	sp, err := Load(context.Background(), p, testKey, 0, cfg, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n := count(sp.Acquire("m", clk.Now(), 0, one(0, 2), 0, false)); n != 2 {
		t.Fatalf("acquired %d", n)
	}
	p.fail.Store(true)
	if err := sp.Acknowledge(ctx, "m", clk.Now(), []AckBatch{{First: 0, Last: 0, Types: []int8{AckReject}}}, false); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("reject with a failing persister: %v", err)
	}
	if len(sink.got) != 0 {
		t.Fatalf("handed %+v for a reject whose write failed", sink.got)
	}
	if w := sp.Window(clk.Now()); w[0].State != Acquired {
		t.Fatalf("window %+v, want offset 0 acquired again after the failed write", w)
	}
	// Both locks pass at the delivery limit: Archiving, not durable.
	clk.Advance(2 * time.Second)
	sp.Window(clk.Now())
	if err := sp.PersistExpired(ctx, clk.Now()); err == nil {
		t.Fatal("PersistExpired with a failing persister succeeded")
	}
	if len(sink.got) != 0 {
		t.Fatalf("handed %+v before the archiving was written", sink.got)
	}
	p.fail.Store(false)
	if err := sp.PersistExpired(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	want := []DeadLetter{{Key: testKey, First: 0, Last: 1, DeliveryCount: 1, Cause: CauseDeliveryLimit}}
	if got := runs(sink.got); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("handed %+v, want %+v", got, want)
	}
	if st, _ := p.Read(ctx, testKey, 0); st.StartOffset != 0 || len(st.Batches) != 1 || st.Batches[0] != (StateBatch{0, 1, StateArchiving, 1}) {
		t.Fatalf("persisted %+v, want 0-1 Archiving", st)
	}
}

// serialPersister is a MemPersister that records a write started while
// another is in flight, or a write whose start offset is below the last
// one stored; one write in 8 fails.
type serialPersister struct {
	*MemPersister
	mu        sync.Mutex
	inFlight  int
	n         int
	lastStart int64
	bad       []string
}

func (s *serialPersister) Write(ctx context.Context, key Key, st State) error {
	s.mu.Lock()
	s.inFlight++
	s.n++
	n := s.n
	if s.inFlight > 1 {
		s.bad = append(s.bad, fmt.Sprintf("write %d started while another was in flight", n))
	}
	s.mu.Unlock()
	time.Sleep(50 * time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if n%8 == 0 {
		return kerr.CoordinatorNotAvailable
	}
	if st.StartOffset < s.lastStart {
		s.bad = append(s.bad, fmt.Sprintf("write %d has start offset %d after %d", n, st.StartOffset, s.lastStart))
	}
	s.lastStart = st.StartOffset
	return s.MemPersister.Write(ctx, key, st)
}

// asyncSink finishes each run it takes on its own goroutine, as the
// handlers' dead-letter writer does.
type asyncSink struct{ wg *sync.WaitGroup }

func (a asyncSink) Enqueue(dl DeadLetter) bool {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		_ = dl.Partition.FinishArchiving(context.Background(), dl.First, dl.Last)
	}()
	return true
}

// TestWritesNeverOverlap: members acquiring, acknowledging and closing
// their sessions, the expiry sweep and the dead-letter writer's
// FinishArchiving run concurrently on one share partition whose writes
// sometimes fail; no two writes overlap and the start offset written
// never goes back.
func TestWritesNeverOverlap(t *testing.T) {
	var finishing sync.WaitGroup
	p := &serialPersister{MemPersister: NewMemPersister()}
	cfg := Config{LockDuration: 3 * time.Millisecond, DeliveryLimit: 3, MaxInFlight: 50, DeadLetters: asyncSink{&finishing}}
	sp, err := Load(context.Background(), p, testKey, 0, cfg, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	log := one(0, 400)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the sweep
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = sp.PersistExpired(ctx, time.Now())
			time.Sleep(time.Millisecond)
		}
	}()
	var members sync.WaitGroup
	for m := range 4 {
		members.Add(1)
		go func() {
			defer members.Done()
			rng := rand.New(rand.NewSource(int64(m)))
			name := fmt.Sprint("m", m)
			for range 150 {
				got := fetch(sp, name, time.Now(), log, 1+rng.Intn(5))
				var acks []AckBatch
				for _, r := range got {
					for o := r.First; o <= r.Last; o++ {
						if rng.Intn(4) != 0 {
							acks = append(acks, AckBatch{First: o, Last: o, Types: []int8{int8(1 + rng.Intn(3))}})
						}
					}
				}
				if rng.Intn(3) == 0 {
					time.Sleep(4 * time.Millisecond) // let some locks pass
				}
				if len(acks) > 0 {
					_ = sp.Acknowledge(ctx, name, time.Now(), acks, false)
				}
				if rng.Intn(10) == 0 {
					_ = sp.ReleaseMember(ctx, name, time.Now())
				}
			}
		}()
	}
	members.Wait()
	close(stop)
	wg.Wait()
	finishing.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n < 50 {
		t.Fatalf("only %d writes: the run did not exercise the writes", p.n)
	}
	if len(p.bad) > 0 {
		t.Fatalf("%d violations, first: %s", len(p.bad), p.bad[0])
	}
}
