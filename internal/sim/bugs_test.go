package sim

import (
	"flag"
	"strings"
	"testing"
)

var flagBugScan = flag.Int("bugscan", 0, "TestOldBugsAreCaught: scan seeds 1..N with each old bug and report which fail")

// oldBugs are broker bugs the chaos harness found in the real binary, fixed
// since; Options.bugs restores each. Every one must stay findable: its
// seeds fail with the bug, on the named invariant, and pass without it.
var oldBugs = []struct {
	name  string
	bugs  bugs
	seeds []uint64
	want  string // in the violation
}{
	{"controlled shutdown granted before the survivors applied it (1cf2b54)",
		bugs{earlyShutdownGrant: true}, []uint64{1, 2, 4}, "when its controlled shutdown completes"},
	{"restarting broker acts on replayed metadata (3369e98)",
		bugs{actOnReplayedMetadata: true}, []uint64{1, 2, 3}, "two leaders in epoch"},
	{"ISR proposal made while one is in flight dropped (1cf2b54)",
		bugs{dropQueuedISR: true}, []uint64{20, 28, 48}, "liveness:"},
}

func TestOldBugsAreCaught(t *testing.T) {
	for _, b := range oldBugs {
		t.Run(b.name, func(t *testing.T) {
			if *flagBugScan > 0 {
				scanBug(t, b.bugs, *flagBugScan)
				return
			}
			for _, seed := range b.seeds {
				with := Run(Options{Seed: seed, Steps: *flagSteps, bugs: b.bugs})
				if !with.Failed() {
					t.Errorf("seed %d: no longer fails with the bug", seed)
				} else if !strings.Contains(with.Violation, b.want) {
					t.Errorf("seed %d: fails with the bug, but not on %q: %s", seed, b.want, with.Violation)
				}
				if without := Run(Options{Seed: seed, Steps: *flagSteps}); without.Failed() {
					t.Errorf("seed %d fails without the bug:\n%s", seed, without.Report())
				}
			}
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
