package sim

import (
	"flag"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/controller"
)

var (
	flagRealSeed  = flag.Uint64("real.seed", 0, "TestRealSeeds: replay one seed of the real-broker world with a full trace")
	flagRealSeeds = flag.Int("real.seeds", 2000, "number of seeds TestRealSeeds runs")
	flagRealSteps = flag.Int("real.steps", 3000, "steps per real-broker seed before settling")
	flagRealShare = flag.Bool("real.share", false, "TestRealSeeds: run the share and classic groups (realshare.go, realclassic.go) in every seed, not only in every fifth")
	flagRealTier  = flag.Bool("real.tiered", false, "TestRealSeeds: run tiered storage (realtier.go) in every seed, not only in every thirteenth")
)

// realTiered reports whether seed runs tiered storage: the seeds
// divisible by realTieredSeeds, or all with -real.tiered.
func realTiered(seed uint64) bool { return *flagRealTier || seed%realTieredSeeds == 0 }

// realShare reports whether seed runs the share group: every fifth seed
// (those divisible by 5), or all with -real.share.
func realShare(seed uint64) bool { return *flagRealShare || seed%5 == 0 }

// TestRealSeeds runs seeds 1..-real.seeds of the real-broker world (CI),
// or replays -real.seed=N verbosely.
func TestRealSeeds(t *testing.T) {
	if *flagRealSeed != 0 {
		res := RunReal(RealOptions{Seed: *flagRealSeed, Steps: *flagRealSteps, Verbose: true, Share: realShare(*flagRealSeed), Tiered: realTiered(*flagRealSeed)})
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
	total, failed := runSeeds(uint64(*flagRealSeeds), func(seed uint64) RealOptions {
		return RealOptions{Seed: seed, Steps: *flagRealSteps, Share: realShare(seed), Tiered: realTiered(seed)}
	})
	if failed != nil {
		t.Fatal(failed.Report())
	}
	el := time.Since(start)
	t.Logf("%d seeds in %v (%.1f seeds/s); totals %+v", *flagRealSeeds, el.Round(time.Millisecond),
		float64(*flagRealSeeds)/el.Seconds(), total)
	for _, seed := range realRegressionSeeds {
		if res := RunReal(RealOptions{Seed: seed, Steps: *flagRealSteps}); res.Violation != "" {
			t.Fatalf("regression seed %d: %s", seed, res.Report())
		}
	}
	for _, seed := range realTieredRegressionSeeds {
		if res := RunReal(RealOptions{Seed: seed, Steps: *flagRealSteps, Tiered: true}); res.Violation != "" {
			t.Fatalf("tiered regression seed %d: %s", seed, res.Report())
		}
	}
	if total.Crashes == 0 || total.Acked == 0 || total.ISRChanges == 0 || total.ShareAccepted == 0 || total.ShareCrashes == 0 ||
		total.RemoteSteps == 0 || total.RemoteReads == 0 || total.StoreFaults == 0 {
		t.Fatalf("the runs exercised too little: %+v", total)
	}
}

// TestRealOneWriter: in the real-broker world every change of a
// partition's log — appends, truncations, retention, flush completions,
// the cleaner's swaps — runs as a step of the partition's owner
// (broker.Options.CheckWriters; docs/storage.md, "One writer").
func TestRealOneWriter(t *testing.T) {
	var cleans, retained, crashes int
	// 2500 steps: with 1000, the 20 runs end before any retention pass
	// deletes a segment (retention.ms is 2 s of the simulated clock).
	for seed := uint64(1); seed <= 20; seed++ {
		res := RunReal(RealOptions{Seed: seed, Steps: 2500, CheckWriters: true})
		if res.Violation != "" {
			t.Fatal(res.Report())
		}
		cleans, retained, crashes = cleans+res.Stats.Cleans, retained+res.Stats.Retained, crashes+res.Stats.Crashes
	}
	if cleans == 0 || retained == 0 || crashes == 0 {
		t.Fatalf("the runs exercised too little: %d cleaner passes, %d retention passes, %d crashes", cleans, retained, crashes)
	}
	// Tiered storage: the remote log managers' local retention on
	// leaders and followers, and the follower's rebuild from the remote
	// log, change logs too.
	remoteReads := 0
	for seed := uint64(realTieredSeeds); seed <= 3*realTieredSeeds; seed += realTieredSeeds {
		res := RunReal(RealOptions{Seed: seed, Steps: 2500, CheckWriters: true, Tiered: true})
		if res.Violation != "" {
			t.Fatal(res.Report())
		}
		remoteReads += res.Stats.RemoteReads
	}
	if remoteReads == 0 {
		t.Fatal("the tiered runs read nothing from the remote log")
	}
}

// realRegressionSeeds are soak seeds (TestRealSoak) that found bugs, run
// with every TestRealSeeds: 1796181980161591760, a replica that copied a
// cleaned log missing an epoch (the cleaner now keeps each epoch's first
// batch); 1796183001364535630, an ISR expansion decided on a follower's
// earlier incarnation committed below an answered DeleteRecords (the
// follower's Fetch now carries its broker epoch, KIP-903).
var realRegressionSeeds = []uint64{1796181980161591760, 1796183001364535630}

// realTieredRegressionSeeds are seeds of -real.tiered that found bugs,
// run tiered with every TestRealSeeds: 156, a leader back from a crash
// answered OFFSET_OUT_OF_RANGE below its local log start before reading
// its remote log metadata; 225, a new leader deleted as dangling a
// deposed leader's copy that finished meanwhile (docs/replication.md).
var realTieredRegressionSeeds = []uint64{156, 225}

// runSeeds runs seeds 1..n, one worker per CPU (the worlds share
// nothing), and returns the totals and the lowest failing seed's result.
func runSeeds(n uint64, opts func(seed uint64) RealOptions) (RealStats, *RealResult) {
	var (
		mu     sync.Mutex
		total  RealStats
		failed *RealResult
		next   atomic.Uint64
		wg     sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1)
				if seed > n {
					return
				}
				mu.Lock()
				stop := failed != nil && failed.Seed < seed
				mu.Unlock()
				if stop {
					return
				}
				res := RunReal(opts(seed))
				mu.Lock()
				total.add(res.Stats)
				if res.Violation != "" && (failed == nil || res.Seed < failed.Seed) {
					failed = res
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return total, failed
}

// TestRealDeterminism: a seed run twice gives the same trace, line for
// line, and the same counts (the object store's faults among them: they
// are drawn in the order of the store's calls).
func TestRealDeterminism(t *testing.T) {
	// 26, 65, 143 and 364 are tiered (realTiered), 65 with the share group
	// too; 143 and 364 delete several dangling copies of one range in a
	// pass, whose order must not follow a map's.
	for _, seed := range []uint64{7, 11, 12345, 99, 2026, 31337, 35, 60, 26, 65, 143, 364} {
		checkDeterministic(t, seed)
	}
}

func checkDeterministic(t *testing.T, seed uint64) {
	a := RunReal(RealOptions{Seed: seed, Steps: 3000, Verbose: true, Share: realShare(seed), Tiered: realTiered(seed)})
	b := RunReal(RealOptions{Seed: seed, Steps: 3000, Verbose: true, Share: realShare(seed), Tiered: realTiered(seed)})
	if !slices.Equal(a.Trace, b.Trace) {
		for i := range min(len(a.Trace), len(b.Trace)) {
			if a.Trace[i] != b.Trace[i] {
				t.Fatalf("seed %d: traces differ at line %d:\n%q\n%q", seed, i, a.Trace[i], b.Trace[i])
			}
		}
		t.Fatalf("seed %d: traces differ in length: %d and %d lines", seed, len(a.Trace), len(b.Trace))
	}
	if a.Stats != b.Stats {
		t.Fatalf("seed %d: the counts differ:\n%+v\n%+v", seed, a.Stats, b.Stats)
	}
	if len(a.Trace) < 100 {
		t.Fatalf("seed %d: a trace of %d lines", seed, len(a.Trace))
	}
}

// TestRealOldBugsAreCaught: a bug of the real driver or controller, put
// back behind its knob, makes a seed of the CI's (-real.seeds) fail, on
// the expected invariant; the first such seed passes without it.
func TestRealOldBugsAreCaught(t *testing.T) {
	for _, b := range []struct {
		name     string
		knobs    sbroker.Knobs
		ctlKnobs controller.Knobs
		want     []string // the violation names one of these
		// tiered runs the CI's tiered seeds only (realTiered).
		tiered bool
	}{
		{"ISR proposal made while one is in flight dropped (1cf2b54)", sbroker.Knobs{DropQueuedISR: true}, controller.Knobs{}, []string{"after settling", "unsent"}, false},
		{"restarting broker acts on replayed metadata (3369e98)", sbroker.Knobs{ActOnReplayedMetadata: true}, controller.Knobs{}, []string{"both lead", "acknowledged", "a consumer read", "twice", "committed there before", "a read_committed consumer was shown"}, false},
		{"machine keeps its producer state after a truncation", sbroker.Knobs{KeepMachineProducers: true}, controller.Knobs{}, []string{"open transactions", "read_committed"}, false},
		{"a late transaction version 2 marker is accepted", sbroker.Knobs{AcceptLateMarkers: true}, controller.Knobs{}, []string{"read_committed", "missing from a read_committed"}, false},
		{"DeleteRecords answered before the followers raised their log start", sbroker.Knobs{AnswerDeleteRecordsEarly: true}, controller.Knobs{}, []string{"below the answered DeleteRecords"}, false},
		{"the LSO passes a transaction whose marker is above the HW", sbroker.Knobs{StableUnreplicatedTxns: true}, controller.Knobs{}, []string{"a read_committed consumer was shown"}, false},
		{"controlled shutdown granted before the others applied it (1cf2b54)", sbroker.Knobs{}, controller.Knobs{GrantShutdownEarly: true}, []string{"controlled shutdown completes"}, false},
		{"a wiped broker kept in the ELR (KIP-966)", sbroker.Knobs{}, controller.Knobs{KeepELRAfterUncleanRegistration: true}, []string{"below the HW", "without acknowledged record", "where a consumer read", "in the ELR", "below the acknowledged commit"}, false},
		{"local retention deletes a segment whose copy is not finished", sbroker.Knobs{DeleteLocalBeforeCopyFinished: true}, controller.Knobs{}, []string{"deleted r0-0 below its local log start", "in any tier"}, true},
		{"a segment not wholly below the HW copied", sbroker.Knobs{CopyAboveHW: true}, controller.Knobs{}, []string{"the highest HW its leaders had", "in any tier", "reads"}, true},
	} {
		t.Run(b.name, func(t *testing.T) {
			n, opts := uint64(*flagRealSeeds), func(seed uint64) RealOptions {
				return RealOptions{Seed: seed, Steps: *flagRealSteps, knobs: b.knobs, ctlKnobs: b.ctlKnobs}
			}
			if b.tiered {
				n = n / realTieredSeeds
				opts = func(i uint64) RealOptions {
					return RealOptions{Seed: i * realTieredSeeds, Steps: *flagRealSteps, knobs: b.knobs, Tiered: true}
				}
			}
			_, with := runSeeds(n, opts)
			if with == nil {
				t.Fatalf("no seed of the %d CI seeds fails with the bug", *flagRealSeeds)
			}
			seed := with.Seed
			if !slices.ContainsFunc(b.want, func(w string) bool { return strings.Contains(with.Violation, w) }) {
				t.Fatalf("seed %d fails with the bug, but not on %q: %s", seed, b.want, with.Violation)
			}
			if without := RunReal(RealOptions{Seed: seed, Steps: *flagRealSteps, Tiered: b.tiered}); without.Violation != "" {
				t.Fatalf("seed %d fails without the bug:\n%s", seed, without.Report())
			}
			t.Logf("first failing seed %d: %s", seed, with.Violation)
		})
	}
}

var flagRealSoak = flag.Duration("real.soak", 0, "TestRealSoak: run fresh seeds of the real-broker world for this long")

// TestRealSoak runs fresh seeds of the real-broker world for -real.soak
// (e.g. go test ./internal/sim -run TestRealSoak -real.soak=30m -v
// -timeout 0). It is skipped without the flag.
func TestRealSoak(t *testing.T) {
	if *flagRealSoak == 0 {
		t.Skip("run with -real.soak=DURATION")
	}
	start := time.Now()
	base := uint64(start.UnixNano())
	t.Logf("soak: seeds from %d", base)
	var total RealStats
	n := 0
	for time.Since(start) < *flagRealSoak {
		seed := base + uint64(n)
		res := RunReal(RealOptions{Seed: seed, Steps: *flagRealSteps})
		n++
		if res.Violation != "" {
			t.Fatal(res.Report())
		}
		total.add(res.Stats)
	}
	t.Logf("soak: %d seeds in %v; totals %+v", n, time.Since(start).Round(time.Second), total)
}
