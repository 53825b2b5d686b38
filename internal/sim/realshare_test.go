package sim

import (
	"flag"
	"testing"
	"time"
)

var flagShareSeeds = flag.Int("real.share.seeds", 50, "number of seeds TestRealShareSeeds runs")

// TestRealShareSeeds runs seeds 1..-real.share.seeds of the real-broker
// world with its share group (realshare.go), or replays -real.seed=N.
func TestRealShareSeeds(t *testing.T) {
	if *flagRealSeed != 0 {
		res := RunReal(RealOptions{Seed: *flagRealSeed, Steps: *flagRealSteps, Verbose: true, Share: true})
		for _, l := range res.Trace {
			t.Log(l)
		}
		t.Logf("seed %d: stats %+v", res.Seed, res.Stats)
		if res.Violation != "" {
			t.Fatalf("seed %d: %s", res.Seed, res.Violation)
		}
		return
	}
	start := time.Now()
	total, failed := runSeeds(uint64(*flagShareSeeds), func(seed uint64) RealOptions {
		return RealOptions{Seed: seed, Steps: *flagRealSteps, Share: true}
	})
	if failed != nil {
		t.Fatal(failed.Report())
	}
	el := time.Since(start)
	t.Logf("%d share seeds in %v (%.1f seeds/s); totals %+v", *flagShareSeeds, el.Round(time.Millisecond),
		float64(*flagShareSeeds)/el.Seconds(), total)
}
