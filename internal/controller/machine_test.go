package controller

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
)

// machineCluster registers and unfences brokers 1..n on a new Machine.
func machineCluster(t *testing.T, n int32, knobs Knobs) (*Machine, *time.Time, map[int32]int64) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMachine(MachineOptions{Now: func() time.Time { return now }, Seed: 1, Knobs: knobs})
	epochs := map[int32]int64{}
	for id := int32(1); id <= n; id++ {
		ep, err := m.Register(metadata.Broker{ID: id, Host: "h", Port: 9092, Incarnation: "i"}, -1)
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = ep
	}
	for id := int32(1); id <= n; id++ {
		r, err := m.Heartbeat(id, epochs[id], m.Image().Offset, false)
		if err != nil || r.Fenced {
			t.Fatalf("heartbeat %d: %+v %v", id, r, err)
		}
	}
	return m, &now, epochs
}

func TestMachineFencesOnSessionExpiry(t *testing.T) {
	m, now, epochs := machineCluster(t, 3, Knobs{})
	if err := m.CreateTopic("t", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	leader := m.Image().Topics["t"].Partitions[0].Leader
	*now = now.Add(5 * time.Second)
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			m.Heartbeat(id, epochs[id], m.Image().Offset, false)
		}
	}
	m.Tick()
	if m.Image().Brokers[leader].Fenced {
		t.Fatalf("broker %d fenced before its session expired", leader)
	}
	*now = now.Add(5 * time.Second)
	m.Tick()
	im := m.Image()
	p := im.Topics["t"].Partitions[0]
	if !im.Brokers[leader].Fenced || p.Leader == leader || p.Leader < 0 {
		t.Fatalf("after 10 s without heartbeats: broker %+v, partition %+v", im.Brokers[leader], p)
	}
}

// TestMachineShutdownWaitsForOthers: a controlled shutdown is granted only
// once every other active broker has applied it; the knob grants it early.
func TestMachineShutdownWaitsForOthers(t *testing.T) {
	for _, early := range []bool{false, true} {
		m, _, epochs := machineCluster(t, 3, Knobs{GrantShutdownEarly: early})
		if err := m.CreateTopic("t", 3, 3, nil); err != nil {
			t.Fatal(err)
		}
		before := m.Image().Offset
		r, err := m.Heartbeat(1, epochs[1], before, true)
		if err != nil || !r.ShuttingDown {
			t.Fatalf("shutdown heartbeat: %+v %v", r, err)
		}
		// Brokers 2 and 3 have applied only what came before it.
		r, _ = m.Heartbeat(1, epochs[1], m.Image().Offset, true)
		if r.ShouldShutDown != early {
			t.Fatalf("early=%v: granted %v before the others applied the shutdown", early, r.ShouldShutDown)
		}
		for _, id := range []int32{2, 3} {
			m.Heartbeat(id, epochs[id], m.Image().Offset, false)
		}
		r, _ = m.Heartbeat(1, epochs[1], m.Image().Offset, true)
		if !r.ShouldShutDown || r.CatchUp < before {
			t.Fatalf("not granted once the others applied it: %+v", r)
		}
		for _, p := range m.Image().Topics["t"].Partitions {
			if p.Leader == 1 || has(p.ISR, 1) {
				t.Fatalf("shut-down broker still in %+v", p)
			}
		}
	}
}
