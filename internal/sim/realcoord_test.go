package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/txn"
)

// TestRealTxnBugsAreCaught: a bug of the transaction coordinator, put in
// behind its knob (txn.Knobs), makes a seed of the CI's (-real.seeds)
// fail on the expected invariant; the first such seed passes without it.
func TestRealTxnBugsAreCaught(t *testing.T) {
	for _, b := range []struct {
		name  string
		knobs txn.Knobs
		want  []string // the violation names one of these
	}{
		{"EndTxn answered before PrepareCommit is committed", txn.Knobs{AnswerEndTxnEarly: true}, []string{"answered by coordinator", "missing from a read_committed", "torn"}},
		{"answers read from records loaded above the HW", txn.Knobs{ReadUncommitted: true}, []string{"answered by coordinator", "missing from a read_committed", "torn", "read_committed"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			_, with := runSeeds(uint64(*flagRealSeeds), func(seed uint64) RealOptions {
				return RealOptions{Seed: seed, Steps: *flagRealSteps, txnKnobs: b.knobs}
			})
			if with == nil {
				t.Fatalf("no seed of the %d CI seeds fails with the bug", *flagRealSeeds)
			}
			seed := with.Seed
			if !slices.ContainsFunc(b.want, func(w string) bool { return strings.Contains(with.Violation, w) }) {
				t.Fatalf("seed %d fails with the bug, but not on %q: %s", seed, b.want, with.Violation)
			}
			if without := RunReal(RealOptions{Seed: seed, Steps: *flagRealSteps}); without.Violation != "" {
				t.Fatalf("seed %d fails without the bug:\n%s", seed, without.Report())
			}
			t.Logf("first failing seed %d: %s", seed, with.Violation)
		})
	}
}
