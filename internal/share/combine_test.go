package share

import (
	"math/rand"
	"reflect"
	"testing"
)

// bruteCombine is Combine offset by offset: each offset takes the batch of
// highest priority covering it.
func bruteCombine(older, newer []StateBatch, start int64) []StateBatch {
	type st struct {
		s int8
		c int16
	}
	cells := map[int64]st{}
	lo, hi := int64(1<<62), int64(-1)
	for _, b := range append(append([]StateBatch(nil), older...), newer...) {
		for o := max(b.FirstOffset, start); o <= b.LastOffset; o++ {
			cur, ok := cells[o]
			if !ok || higher(StateBatch{DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount}, StateBatch{DeliveryState: cur.s, DeliveryCount: cur.c}) {
				cells[o] = st{b.DeliveryState, b.DeliveryCount}
			}
			lo, hi = min(lo, o), max(hi, o)
		}
	}
	var out []StateBatch
	for o := lo; o <= hi; o++ {
		c, ok := cells[o]
		if !ok {
			continue
		}
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == o && out[n-1].DeliveryState == c.s && out[n-1].DeliveryCount == c.c {
			out[n-1].LastOffset = o
			continue
		}
		out = append(out, StateBatch{FirstOffset: o, LastOffset: o, DeliveryState: c.s, DeliveryCount: c.c})
	}
	return out
}

func TestCombineCases(t *testing.T) {
	b := func(f, l int64, s int8, c int16) StateBatch { return StateBatch{f, l, s, c} }
	for _, tc := range []struct {
		name         string
		older, newer []StateBatch
		start        int64
		want         []StateBatch
	}{
		{"empty", nil, nil, 0, nil},
		{"below start dropped", []StateBatch{b(0, 9, StateAcknowledged, 1)}, nil, 10, nil},
		{"straddling start trimmed", []StateBatch{b(5, 15, StateAvailable, 1)}, nil, 10, []StateBatch{b(10, 15, StateAvailable, 1)}},
		{"newer overrides middle", []StateBatch{b(0, 9, StateAvailable, 1)}, []StateBatch{b(3, 5, StateAcknowledged, 1)}, 0,
			[]StateBatch{b(0, 2, StateAvailable, 1), b(3, 5, StateAcknowledged, 1), b(6, 9, StateAvailable, 1)}},
		{"contiguous same joined", []StateBatch{b(0, 4, StateArchived, 2)}, []StateBatch{b(5, 9, StateArchived, 2)}, 0,
			[]StateBatch{b(0, 9, StateArchived, 2)}},
		{"higher count wins over older", []StateBatch{b(0, 9, StateAvailable, 2)}, []StateBatch{b(0, 9, StateAvailable, 1)}, 0,
			[]StateBatch{b(0, 9, StateAvailable, 2)}},
		{"disjoint kept", []StateBatch{b(0, 1, StateAvailable, 1)}, []StateBatch{b(5, 6, StateAcknowledged, 1)}, 0,
			[]StateBatch{b(0, 1, StateAvailable, 1), b(5, 6, StateAcknowledged, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Combine(tc.older, tc.newer, tc.start)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Combine = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCombineMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	states := []int8{StateAvailable, StateAcknowledged, StateArchived}
	gen := func() []StateBatch {
		var bs []StateBatch
		for range rng.Intn(6) {
			f := rng.Int63n(40)
			bs = append(bs, StateBatch{f, f + rng.Int63n(10), states[rng.Intn(3)], int16(rng.Intn(3))})
		}
		return bs
	}
	for i := range 5000 {
		older, newer, start := gen(), gen(), rng.Int63n(20)
		got, want := Combine(older, newer, start), bruteCombine(older, newer, start)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: Combine(%v, %v, %d) = %v, want %v", i, older, newer, start, got, want)
		}
	}
}
