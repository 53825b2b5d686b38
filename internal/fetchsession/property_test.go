package fetchsession

import (
	"math/rand/v2"
	"testing"
)

// FuzzSessionAgreement drives a Client against a Cache through random
// rounds (partitions added, dropped, fetch offsets moving, leader high
// watermarks moving, lost responses, evictions by other sessions) and
// checks the KIP-227 contract after every answered round: the leader reads
// every wanted partition with the fetcher's current request, and a
// fetcher that applies only the partitions sent knows every wanted
// partition's current high watermark, as a full fetch would tell it.
func FuzzSessionAgreement(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42, 1000, 31337} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		c := New(Config{Slots: 1 + rng.IntN(3), MaxPartitions: 6})
		var cl Client
		hw := map[Key]int64{}     // the leader's
		known := map[Key]int64{}  // the fetcher's view
		want := map[Key]Request{} // the fetcher's next request
		const universe = 8
		for round := 0; round < 300; round++ {
			// Mutate the world.
			for i := 0; i < 3; i++ {
				k := Key{Topic: "t", Partition: int32(rng.IntN(universe))}
				switch rng.IntN(5) {
				case 0:
					if _, ok := want[k]; ok {
						delete(want, k)
					} else {
						want[k] = Request{FetchOffset: int64(rng.IntN(5)), MaxBytes: 100}
					}
				case 1:
					if r, ok := want[k]; ok {
						r.FetchOffset++
						want[k] = r
					}
				case 2:
					hw[k]++
				case 3:
					// Another fetcher takes slots (may evict ours).
					c.Create(rng.IntN(2) == 0, false, []Entry{{Key: k}})
				}
			}
			if len(want) == 0 {
				continue
			}
			plan := cl.Build(want)
			if rng.IntN(10) == 0 {
				cl.HandleError() // the request or its response was lost
				continue
			}
			answer := func(k Key) Result { return Result{HighWatermark: hw[k], LastStableOffset: hw[k]} }
			if plan.Epoch == 0 || plan.Epoch == -1 {
				if plan.SessionID != 0 {
					c.Remove(plan.SessionID)
				}
				var es []Entry
				for _, k := range plan.Send {
					es = append(es, Entry{Key: k, Request: want[k], Result: answer(k)})
					known[k] = hw[k]
				}
				if len(plan.Send) != len(want) {
					t.Fatalf("round %d: full fetch sends %d of %d partitions", round, len(plan.Send), len(want))
				}
				cl.HandleResponse(0, c.Create(false, false, es))
				continue
			}
			var ups []Entry
			for _, k := range plan.Send {
				ups = append(ups, Entry{Key: k, Request: want[k]})
			}
			tx, code := c.Incremental(plan.SessionID, plan.Epoch, false, ups, plan.Forget)
			if code != 0 || tx == nil {
				cl.HandleResponse(code, 0)
				if tx == nil && code == 0 {
					cl.Reset()
				}
				continue
			}
			if tx.Len() != len(want) {
				t.Fatalf("round %d: session holds %d partitions, fetcher wants %d", round, tx.Len(), len(want))
			}
			res := make([]Result, tx.Len())
			for i := range res {
				k, r := tx.Partition(i)
				if w, ok := want[k]; !ok || w != r {
					t.Fatalf("round %d: leader reads %v with %+v, fetcher wants %+v (%v)", round, k, r, w, ok)
				}
				res[i] = answer(k)
			}
			inc, ok := tx.Commit(res)
			if !ok {
				t.Fatalf("round %d: commit failed", round)
			}
			for i, in := range inc {
				if in {
					k, _ := tx.Partition(i)
					known[k] = hw[k]
				}
			}
			cl.HandleResponse(0, plan.SessionID)
			for k := range want {
				if known[k] != hw[k] {
					t.Fatalf("round %d: fetcher knows HW %d of %v, leader has %d", round, known[k], k, hw[k])
				}
			}
		}
	})
}
