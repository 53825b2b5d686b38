package sim

import (
	"flag"
	"strings"
	"testing"
)

var flagBugScan = flag.Int("bugscan", 0, "TestOldBugsAreCaught: scan seeds 1..N with each old bug and report which fail")

// oldBugs are broker bugs the chaos harness found in the real binary, fixed
// since; Options.bugs restores each. Every one must stay findable: the
// first seed of 1..oldBugSeeds that fails with it fails on the named
// invariant, and passes without it.
var oldBugs = []struct {
	name string
	bugs bugs
	want string // in the violation
}{
	{"controlled shutdown granted before the survivors applied it (1cf2b54)",
		bugs{earlyShutdownGrant: true}, "when its controlled shutdown completes"},
	{"restarting broker acts on replayed metadata (3369e98)",
		bugs{actOnReplayedMetadata: true}, "two leaders in epoch"},
	{"ISR proposal made while one is in flight dropped (1cf2b54)",
		bugs{dropQueuedISR: true}, "liveness:"},
}

// oldBugSeeds bounds the seeds TestOldBugsAreCaught tries per bug.
const oldBugSeeds = 400

func TestOldBugsAreCaught(t *testing.T) {
	for _, b := range oldBugs {
		t.Run(b.name, func(t *testing.T) {
			if *flagBugScan > 0 {
				scanBug(t, b.bugs, *flagBugScan)
				return
			}
			for seed := uint64(1); seed <= oldBugSeeds; seed++ {
				with := Run(Options{Seed: seed, Steps: *flagSteps, bugs: b.bugs})
				if !with.Failed() {
					continue
				}
				if !strings.Contains(with.Violation, b.want) {
					t.Fatalf("seed %d fails with the bug, but not on %q: %s", seed, b.want, with.Violation)
				}
				if without := Run(Options{Seed: seed, Steps: *flagSteps}); without.Failed() {
					t.Fatalf("seed %d fails without the bug:\n%s", seed, without.Report())
				}
				t.Logf("first failing seed %d", seed)
				return
			}
			t.Fatalf("no seed of 1..%d fails with the bug", oldBugSeeds)
		})
	}
}

// scanBug runs seeds 1..n with the bug and logs the failures by invariant.
func scanBug(t *testing.T, b bugs, n int) {
	byKind := map[string][]uint64{}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		res := Run(Options{Seed: seed, Steps: *flagSteps, bugs: b})
		if !res.Failed() {
			continue
		}
		kind := res.Violation
		for _, k := range []string{"controlled shutdown completes", "two leaders in epoch", "liveness:"} {
			if strings.Contains(kind, k) {
				kind = k
			}
		}
		byKind[kind] = append(byKind[kind], seed)
	}
	total := 0
	for k, seeds := range byKind {
		total += len(seeds)
		t.Logf("%4d seeds: %s (first %v)", len(seeds), k, seeds[:min(len(seeds), 5)])
	}
	t.Logf("%d of %d seeds fail with the bug", total, n)
}
