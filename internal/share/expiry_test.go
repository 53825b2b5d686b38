package share

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
)

// flakyPersister fails its writes while fail is set.
type flakyPersister struct {
	*MemPersister
	fail atomic.Bool
}

func (f *flakyPersister) Write(ctx context.Context, key Key, st State) error {
	if f.fail.Load() {
		return kerr.CoordinatorNotAvailable
	}
	return f.MemPersister.Write(ctx, key, st)
}

// reload loads key's share partition from p again, as the leader of
// leaderEpoch: a leader failover.
func reload(t *testing.T, p Persister, leaderEpoch int32, cfg Config) *Partition {
	t.Helper()
	sp, err := Load(context.Background(), p, testKey, leaderEpoch, cfg, func() (int64, error) {
		t.Fatal("the state was initialized")
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestExpiryPersistedAcrossFailover: the release of an expired lock is
// written (by the fetch path, or by PersistExpired with no fetch), so a
// new leader loading the state goes on from the delivery count reached,
// and a record archived on expiry at the delivery limit stays archived.
func TestExpiryPersistedAcrossFailover(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	cfg := Config{LockDuration: time.Second, DeliveryLimit: 3}
	sp, p := newTestPartition(t, cfg, 0)
	if err := p.Initialize(context.Background(), testKey, 0, 0); err != nil {
		t.Fatal(err)
	}
	log := one(0, 2)
	if got := fetch(sp, "a", clk.Now(), log, 0); count(got) != 2 || got[0].DeliveryCount != 1 {
		t.Fatalf("first delivery: %v", got)
	}
	clk.Advance(time.Second)
	// The next fetch persists the expiry before it acquires again.
	if got := fetch(sp, "b", clk.Now(), log, 1); count(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("second delivery: %v", got)
	}
	clk.Advance(time.Second)
	// No fetch comes: the sweep persists the expiry.
	m := NewManager(p)
	m.parts[testKey] = sp
	if failed := m.PersistExpired(clk.Now(), time.Second); failed != nil {
		t.Fatalf("sweep: %v", failed)
	}

	// Failover: offset 0 was delivered twice, offset 1 once.
	sp = reload(t, p, 1, cfg)
	got := fetch(sp, "c", clk.Now(), log, 0)
	if len(got) != 2 || got[0] != (AcquiredRange{First: 0, Last: 0, DeliveryCount: 3}) || got[1] != (AcquiredRange{First: 1, Last: 1, DeliveryCount: 2}) {
		t.Fatalf("after a failover, delivered %v; want 0 with count 3 and 1 with count 2", got)
	}
	// Offset 0's lock passes at the delivery limit: it is archived, and
	// stays archived after another failover.
	clk.Advance(time.Second)
	m.parts[testKey] = sp
	if failed := m.PersistExpired(clk.Now(), time.Second); failed != nil {
		t.Fatalf("sweep: %v", failed)
	}
	sp = reload(t, p, 2, cfg)
	if start, _ := sp.Offsets(); start != 1 {
		t.Fatalf("after the archive on expiry and a failover, SPSO %d; want 1", start)
	}
	got = fetch(sp, "d", clk.Now(), log, 0)
	if len(got) != 1 || got[0] != (AcquiredRange{First: 1, Last: 1, DeliveryCount: 3}) {
		t.Fatalf("after the second failover, delivered %v; want only 1 with count 3", got)
	}
}

// TestExpiryNotReacquiredUntilDurable: a released record whose release
// could not be written is not delivered again until a write succeeds, so
// no delivery count is handed out above one the state could lose.
func TestExpiryNotReacquiredUntilDurable(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	cfg := Config{LockDuration: time.Second, DeliveryLimit: 5}
	p := &flakyPersister{MemPersister: NewMemPersister()}
	sp, err := Load(context.Background(), p, testKey, 0, cfg, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	log := one(0, 1)
	fetch(sp, "a", clk.Now(), log, 0)
	clk.Advance(time.Second)
	p.fail.Store(true)
	if err := sp.PersistExpired(context.Background(), clk.Now()); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("PersistExpired with a failing persister: %v", err)
	}
	if got := fetch(sp, "b", clk.Now(), log, 0); len(got) != 0 {
		t.Fatalf("delivered %v while its release is not durable", got)
	}
	if w := sp.Window(clk.Now()); len(w) != 1 || w[0].State != Available || w[0].DeliveryCount != 1 {
		t.Fatalf("window %+v; want offset 0 available, delivered once", w)
	}
	if !sp.ExpiryDue(clk.Now()) {
		t.Fatal("nothing due while a release is not durable")
	}
	p.fail.Store(false)
	if got := fetch(sp, "b", clk.Now(), log, 0); len(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("once the write works, delivered %v; want offset 0 with count 2", got)
	}
	if st, _ := p.Read(context.Background(), testKey, 0); len(st.Batches) != 1 || st.Batches[0].DeliveryCount != 1 {
		t.Fatalf("persisted %+v; want offset 0 available with count 1", st)
	}
	if sp.ExpiryDue(clk.Now()) {
		t.Fatal("due with nothing to write")
	}
}

// TestReleaseMemberNotReacquiredUntilDurable: the same for a session's
// release whose write failed.
func TestReleaseMemberNotReacquiredUntilDurable(t *testing.T) {
	now := time.Unix(1, 0)
	p := &flakyPersister{MemPersister: NewMemPersister()}
	sp, err := Load(context.Background(), p, testKey, 0, Config{}, func() (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	fetch(sp, "a", now, one(0, 2), 0)
	p.fail.Store(true)
	if err := sp.ReleaseMember(context.Background(), "a", now); err == nil {
		t.Fatal("ReleaseMember with a failing persister succeeded")
	}
	if got := fetch(sp, "b", now, one(0, 2), 0); len(got) != 0 {
		t.Fatalf("delivered %v while the release is not durable", got)
	}
	p.fail.Store(false)
	if got := fetch(sp, "b", now, one(0, 2), 0); count(got) != 2 || got[0].DeliveryCount != 2 {
		t.Fatalf("once the write works, delivered %v", got)
	}
}
