package controller

import (
	"fmt"
	"testing"
	"time"
)

// TestClockJumpElectsNoReplicaMissingRecords: the controller's session
// clock jumps forward past every broker's session at once (a process
// paused for longer than broker.session.timeout.ms, or a clock stepped
// under a controller that measured sessions on it) and every broker is
// fenced in one tick, though all are alive. The fencing takes the ISR
// members out one at a time: the first (3) while the other two still met
// min ISR, so it may lack records they acknowledged after, and it must
// never be elected; the others go into the ELR (KIP-966). Whichever
// broker heartbeats first afterwards, only an ELR member leads.
func TestClockJumpElectsNoReplicaMissingRecords(t *testing.T) {
	for _, order := range [][]int32{{3, 1, 2, 4, 5}, {5, 4, 3, 1, 2}, {4, 3, 5, 1, 2}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			w := newELRWorld(t, nil, nil)
			w.expect(3, []int32{3, 4, 5}, nil, nil)
			*w.now = w.now.Add(time.Hour)
			w.m.Tick()
			for id := int32(1); id <= 5; id++ {
				if !w.m.Image().Brokers[id].Fenced {
					t.Fatalf("broker %d not fenced after the jump", id)
				}
			}
			w.expect(-1, nil, []int32{4, 5}, []int32{5})
			for _, id := range order {
				w.beat(id)
				w.m.Tick()
				p := w.part()
				if p.Leader == 3 || (p.Leader < 0 && (id == 4 || id == 5)) {
					t.Fatalf("after broker %d's heartbeat: %+v (ISR before the jump [3 4 5]; 3 left it first, 4 and 5 hold every acknowledged record)", id, p)
				}
				if p.Leader > 0 {
					if p.Leader != id && w.m.Image().Brokers[p.Leader].Fenced {
						t.Fatalf("fenced broker %d elected: %+v", p.Leader, p)
					}
					return
				}
			}
			t.Fatalf("no leader after every broker's heartbeat: %+v", w.part())
		})
	}
}
