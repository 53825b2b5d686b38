package sim

import (
	"flag"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	flagSeed  = flag.Uint64("seed", 0, "replay one seed with a full trace")
	flagSeeds = flag.Int("seeds", 2000, "number of seeds TestSeeds runs")
	flagSteps = flag.Int("steps", 12000, "events per seed before settling")
	flagSoak  = flag.Duration("soak", 0, "TestSoak: run fresh seeds for this long")
)

// TestSeeds runs seeds 1..-seeds (CI), or replays -seed=N verbosely.
func TestSeeds(t *testing.T) {
	if *flagSeed != 0 {
		res := Run(Options{Seed: *flagSeed, Steps: *flagSteps, Verbose: true})
		for _, l := range res.Trace {
			t.Log(l)
		}
		t.Logf("seed %d: %d steps, stats %+v", res.Seed, res.Steps, res.Stats)
		if res.Failed() {
			t.Fatalf("seed %d: %s", res.Seed, res.Violation)
		}
		return
	}
	n := *flagSeeds
	if testing.Short() {
		n = min(n, 200)
	}
	start := time.Now()
	total := runSeeds(t, func(i uint64) (uint64, bool) { return i + 1, int(i) < n })
	t.Logf("%d seeds in %v; totals %+v", n, time.Since(start).Round(time.Millisecond), total)
}

// TestSoak runs fresh seeds for -soak (e.g. go test ./internal/sim -run
// TestSoak -soak=10m). It is skipped without the flag.
func TestSoak(t *testing.T) {
	if *flagSoak == 0 {
		t.Skip("run with -soak=DURATION")
	}
	deadline := time.Now().Add(*flagSoak)
	base := uint64(time.Now().UnixNano())
	t.Logf("soak: seeds from %d", base)
	var count atomic.Int64
	total := runSeeds(t, func(i uint64) (uint64, bool) {
		if time.Now().After(deadline) {
			return 0, false
		}
		count.Add(1)
		return base + i, true
	})
	t.Logf("soak: %d seeds in %v; totals %+v", count.Load(), time.Since(deadline.Add(-*flagSoak)).Round(time.Second), total)
}

// runSeeds runs seeds from next in parallel; the first failure is reported
// with its trace.
func runSeeds(t *testing.T, next func(i uint64) (uint64, bool)) Stats {
	var (
		mu     sync.Mutex
		i      uint64
		total  Stats
		failed bool
		wg     sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seed, ok := next(i)
				i++
				stop := failed
				mu.Unlock()
				if !ok || stop {
					return
				}
				res := Run(Options{Seed: seed, Steps: *flagSteps})
				mu.Lock()
				add(&total, res.Stats)
				if res.Failed() && !failed {
					failed = true
					t.Error(res.Report())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return total
}

func add(t *Stats, s Stats) {
	t.Crashes += s.Crashes
	t.Shutdowns += s.Shutdowns
	t.Partitions += s.Partitions
	t.Elections += s.Elections
	t.UncleanElections += s.UncleanElections
	t.ISRChanges += s.ISRChanges
	t.AckedAll += s.AckedAll
	t.AckedOne += s.AckedOne
	t.Consumed += s.Consumed
	t.Truncations += s.Truncations
	t.Diverging += s.Diverging
	t.LostCommittedUnclean += s.LostCommittedUnclean
}
