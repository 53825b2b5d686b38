package share

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
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

// runReloads drives one share partition with random fetches,
// acknowledgements, clock moves, expiry sweeps, failing writes and
// reloads from the persister (leader failovers), and checks each
// delivery: its count is at most the limit, above the previous one
// within a loaded partition, never below the highest seen before
// across reloads, and no confirmed record comes back. It returns the
// first violation.
func runReloads(rng *rand.Rand, steps int, knobs Knobs) string {
	clk := clock.NewManual(time.Unix(1000, 0))
	cfg := Config{LockDuration: 10 * time.Second, DeliveryLimit: 3, MaxInFlight: 20}
	p := &flakyPersister{MemPersister: NewMemPersister()}
	_ = p.Initialize(context.Background(), testKey, 0, 0)
	epoch := int32(0)
	load := func() *Partition {
		sp, err := Load(context.Background(), p, testKey, epoch, cfg, nil)
		if err != nil {
			panic(err)
		}
		sp.knobs = knobs
		return sp
	}
	sp := load()
	log := one(0, 30)
	members := []string{"a", "b", "c"}
	held := map[string]map[int64]bool{}
	maxSeen := map[int64]int16{}
	last := map[int64]int16{}
	confirmed := map[int64]bool{}
	for i := 0; i < steps; i++ {
		m := members[rng.Intn(len(members))]
		p.fail.Store(rng.Intn(8) == 0)
		switch k := rng.Intn(10); {
		case k < 4:
			for _, r := range fetch(sp, m, clk.Now(), log, 1+rng.Intn(4)) {
				for o := r.First; o <= r.Last; o++ {
					n := r.DeliveryCount
					switch {
					case confirmed[o]:
						return fmt.Sprintf("step %d: confirmed offset %d delivered again", i, o)
					case n > cfg.DeliveryLimit:
						return fmt.Sprintf("step %d: offset %d delivered with count %d above the limit", i, o, n)
					case n <= last[o]:
						return fmt.Sprintf("step %d: offset %d delivered with count %d after %d in the same leader", i, o, n, last[o])
					case n < maxSeen[o]:
						return fmt.Sprintf("step %d: offset %d delivered with count %d after %d before a failover", i, o, n, maxSeen[o])
					}
					last[o], maxSeen[o] = n, max(maxSeen[o], n)
					if held[m] == nil {
						held[m] = map[int64]bool{}
					}
					held[m][o] = true
				}
			}
		case k < 6:
			for o := range held[m] {
				t := []int8{AckAccept, AckRelease, AckReject}[rng.Intn(3)]
				err := sp.Acknowledge(context.Background(), m, clk.Now(), []AckBatch{{First: o, Last: o, Types: []int8{t}}}, false)
				delete(held[m], o)
				if err == nil && t != AckRelease {
					confirmed[o] = true
				}
				break
			}
		case k < 8:
			clk.Advance(time.Duration(rng.Intn(8)) * time.Second)
		case k < 9:
			_ = sp.PersistExpired(context.Background(), clk.Now())
		default:
			epoch++
			sp, held, last = load(), map[string]map[int64]bool{}, map[int64]int16{}
		}
	}
	return ""
}

// TestPropertyCountsSurviveReloads runs runReloads over many seeds; with
// Knobs.SkipExpiryPersist (expiry in memory only) a seed fails.
func TestPropertyCountsSurviveReloads(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		if v := runReloads(rand.New(rand.NewSource(seed)), 400, Knobs{}); v != "" {
			t.Fatalf("seed %d: %s", seed, v)
		}
	}
	for seed := int64(0); ; seed++ {
		if seed == 300 {
			t.Fatal("no seed fails with Knobs.SkipExpiryPersist")
		}
		if v := runReloads(rand.New(rand.NewSource(seed)), 400, Knobs{SkipExpiryPersist: true}); v != "" {
			t.Logf("with SkipExpiryPersist, seed %d: %s", seed, v)
			break
		}
	}
}
