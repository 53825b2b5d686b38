package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/share"
)

// TestRealShareBugsAreCaught: a share partition bug, put back behind its
// knob (share.Knobs), makes a seed with the share group fail on the
// expected invariant (realsharecheck.go); that seed passes without it.
func TestRealShareBugsAreCaught(t *testing.T) {
	for _, b := range []struct {
		name  string
		knobs share.Knobs
		want  []string // the violation names one of these
	}{
		{"acknowledgements answered before their state is durable", share.Knobs{AckBeforeDurable: true}, []string{"(b)", "(c)"}},
		{"expired locks kept", share.Knobs{KeepExpiredLocks: true}, []string{"(c)"}},
		{"expired locks released in memory only", share.Knobs{SkipExpiryPersist: true}, []string{"(d)"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			_, with := runSeeds(uint64(*flagRealSeeds), func(seed uint64) RealOptions {
				return RealOptions{Seed: seed, Steps: *flagRealSteps, Share: true, shareKnobs: b.knobs}
			})
			if with == nil {
				t.Fatalf("no seed of %d fails with the bug", *flagRealSeeds)
			}
			if !slices.ContainsFunc(b.want, func(w string) bool { return strings.Contains(with.Violation, w) }) {
				t.Fatalf("seed %d fails with the bug, but not on %q: %s", with.Seed, b.want, with.Violation)
			}
			if without := RunReal(RealOptions{Seed: with.Seed, Steps: *flagRealSteps, Share: true}); without.Violation != "" {
				t.Fatalf("seed %d fails without the bug:\n%s", with.Seed, without.Report())
			}
			t.Logf("first failing seed %d: %s", with.Seed, with.Violation)
		})
	}
}
