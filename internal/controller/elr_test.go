package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// elrWorld is a Machine with brokers 1..5 and topic "e" on replicas
// [3,4,5] with min.insync.replicas 2 (the KIP-966 scenario).
type elrWorld struct {
	t      *testing.T
	m      *Machine
	now    *time.Time
	epochs map[int32]int64
}

func newELRWorld(t *testing.T, brokerProps map[string]string, topicConfigs map[string]string) *elrWorld {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := config.Defaults()
	for k, v := range brokerProps {
		cfg.Props[k] = v
	}
	w := &elrWorld{t: t, now: &now, epochs: map[int32]int64{}}
	w.m = NewMachine(MachineOptions{Broker: cfg, Now: func() time.Time { return *w.now }, Seed: 1})
	for id := int32(1); id <= 5; id++ {
		w.register(id, -1)
		w.beat(id)
	}
	cfgs := map[string]string{"min.insync.replicas": "2"}
	for k, v := range topicConfigs {
		cfgs[k] = v
	}
	if _, err := w.m.call(opCreateTopic, createTopicReq{Name: "e", Assignment: [][]int32{{3, 4, 5}}, Configs: cfgs}, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// register registers a new incarnation of id whose disk recorded
// previousEpoch.
func (w *elrWorld) register(id int32, previousEpoch int64) {
	w.t.Helper()
	ep, err := w.m.Register(metadata.Broker{ID: id, Host: "h", Port: 9092, Incarnation: w.now.String() + string(rune('a'+id)), DirectoryID: "dir"}, previousEpoch)
	if err != nil {
		w.t.Fatal(err)
	}
	w.epochs[id] = ep
}

// restart registers id again as its own disk would (previous epoch = its
// last one) and unfences it.
func (w *elrWorld) restart(id int32) {
	w.t.Helper()
	w.register(id, w.epochs[id])
	w.beat(id)
}

func (w *elrWorld) beat(id int32) {
	w.t.Helper()
	if _, err := w.m.Heartbeat(id, w.epochs[id], w.m.Image().Offset, false); err != nil {
		w.t.Fatal(err)
	}
}

// kill lets id's session expire while the others heartbeat.
func (w *elrWorld) kill(id int32, alive ...int32) {
	w.t.Helper()
	for i := 0; i < 3; i++ {
		*w.now = w.now.Add(4 * time.Second)
		for _, o := range alive {
			w.beat(o)
		}
		w.m.Tick()
	}
	if !w.m.Image().Brokers[id].Fenced {
		w.t.Fatalf("broker %d not fenced", id)
	}
}

func (w *elrWorld) part() metadata.Partition { return w.m.Image().Topics["e"].Partitions[0] }

// shrink has the leader propose ISR isr.
func (w *elrWorld) shrink(isr ...int32) {
	w.t.Helper()
	p := w.part()
	resp, err := w.m.AlterPartition(metadata.AlterPartitionRequest{Topic: "e", BrokerID: p.Leader, BrokerEpoch: w.epochs[p.Leader],
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr})
	if err != nil || resp.Error != 0 {
		w.t.Fatalf("AlterPartition %v: %+v %v", isr, resp, err)
	}
}

func (w *elrWorld) expect(leader int32, isr, elr, lastKnown []int32) {
	w.t.Helper()
	p := w.part()
	if p.Leader != leader || !sameSet(p.ISR, isr) || !sameSet(p.ELR, elr) || !slices.Equal(p.LastKnownELR, lastKnown) {
		w.t.Fatalf("partition %+v; want leader %d ISR %v ELR %v last known %v", p, leader, isr, elr, lastKnown)
	}
}

// TestELRScenario is issue's five-node course: [3,4,5], min ISR 2; 5
// dies (ISR {3,4}, no ELR: the HW still moves), 4 dies (ISR {3}, ELR
// {4}), 3 dies (ISR {}, ELR {3,4}, last known leader 3); 4 alone
// returns and leads, then 3 and 5 return.
func TestELRScenario(t *testing.T) {
	w := newELRWorld(t, nil, nil)
	w.expect(3, []int32{3, 4, 5}, nil, nil)
	w.kill(5, 1, 2, 3, 4)
	w.expect(3, []int32{3, 4}, nil, nil)
	w.kill(4, 1, 2, 3)
	w.expect(3, []int32{3}, []int32{4}, nil)
	w.kill(3, 1, 2)
	w.expect(-1, nil, []int32{3, 4}, []int32{3})
	w.restart(4)
	w.expect(4, []int32{4}, []int32{3}, nil)
	w.restart(3)
	w.restart(5)
	w.expect(4, []int32{4}, []int32{3}, nil)
	w.shrink(4, 3) // 3 caught up: back at min ISR, the ELR is cleared
	w.expect(4, []int32{4, 3}, nil, nil)
}

// TestELRShrinkBelowMinISR: an AlterPartition shrinking the ISR below min
// ISR puts the removed replicas in the ELR; one at min ISR does not.
func TestELRShrinkBelowMinISR(t *testing.T) {
	w := newELRWorld(t, nil, nil)
	w.shrink(3, 4)
	w.expect(3, []int32{3, 4}, nil, nil)
	w.shrink(3)
	w.expect(3, []int32{3}, []int32{4}, nil)
}

// TestELRUncleanRegistrationLeavesELR: a broker whose registration cannot
// show the epoch of the one it replaces (a wiped or replaced disk) is
// taken out of every ELR and is not elected; a clean one is.
func TestELRUncleanRegistrationLeavesELR(t *testing.T) {
	for _, tc := range []struct {
		name string
		prev func(w *elrWorld) int64
		dir  string
	}{
		{"no epoch file", func(*elrWorld) int64 { return -1 }, "dir"},
		{"old epoch file", func(w *elrWorld) int64 { return w.epochs[4] - 1 }, "dir"},
		{"new directory id", func(w *elrWorld) int64 { return w.epochs[4] }, "other-dir"},
		{"kept directory with a new id", func(*elrWorld) int64 { return PreviousEpochKept }, "other-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newELRWorld(t, nil, nil)
			w.kill(5, 1, 2, 3, 4)
			w.kill(4, 1, 2, 3)
			w.kill(3, 1, 2)
			w.expect(-1, nil, []int32{3, 4}, []int32{3})
			ep, err := w.m.Register(metadata.Broker{ID: 4, Host: "h", Port: 9092, Incarnation: "wiped", DirectoryID: tc.dir}, tc.prev(w))
			if err != nil {
				t.Fatal(err)
			}
			w.epochs[4] = ep
			w.beat(4)
			w.expect(-1, nil, []int32{3}, []int32{3})
			// 3 comes back clean and leads.
			w.restart(3)
			w.expect(3, []int32{3}, nil, nil)
		})
	}
}

// TestELRKeptDirectoryStays: a registration from the directory an
// earlier binary ran on (its meta.properties kept, no broker epoch file:
// PreviousEpochKept) is not unclean: the broker stays in the ELR and is
// elected, as a restart with its epoch file is.
func TestELRKeptDirectoryStays(t *testing.T) {
	w := newELRWorld(t, nil, nil)
	w.kill(5, 1, 2, 3, 4)
	w.kill(4, 1, 2, 3)
	w.kill(3, 1, 2)
	w.expect(-1, nil, []int32{3, 4}, []int32{3})
	ep, err := w.m.Register(metadata.Broker{ID: 4, Host: "h", Port: 9092, Incarnation: "upgraded", DirectoryID: "dir"}, PreviousEpochKept)
	if err != nil {
		t.Fatal(err)
	}
	w.epochs[4] = ep
	w.beat(4)
	w.expect(4, []int32{4}, []int32{3}, nil)
}

// TestELRMinISRChangeClears: changing the topic's min.insync.replicas
// clears its ELR and last known leader.
func TestELRMinISRChangeClears(t *testing.T) {
	w := newELRWorld(t, nil, nil)
	w.shrink(3)
	w.expect(3, []int32{3}, []int32{4, 5}, nil)
	if err := w.m.AlterTopicConfigs("e", []metadata.ConfigOp{{Name: "retention.ms", Value: "1000"}}); err != nil {
		t.Fatal(err)
	}
	w.expect(3, []int32{3}, []int32{4, 5}, nil) // another config keeps it
	if err := w.m.AlterTopicConfigs("e", []metadata.ConfigOp{{Name: "min.insync.replicas", Value: "1"}}); err != nil {
		t.Fatal(err)
	}
	w.expect(3, []int32{3}, nil, nil)
	// 3 dies: with min ISR 1 its HW moved alone, 4 may lack records, so
	// nothing but 3 may lead.
	w.kill(3, 1, 2, 4, 5)
	w.expect(-1, nil, []int32{3}, []int32{3})
}

// TestELRElectionOrder: the ISR first, then the ELR once the ISR is
// empty; the last known leader and any replica only with unclean
// election enabled.
func TestELRElectionOrder(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		w := newELRWorld(t, nil, nil)
		w.shrink(3)
		w.kill(3, 1, 2, 4, 5)
		// 4 and 5 are in the ELR and active: 4 (first in replica
		// order) is elected at once.
		w.expect(4, []int32{4}, []int32{3, 5}, nil)
	})
	t.Run("last known leader only when unclean", func(t *testing.T) {
		for _, unclean := range []bool{false, true} {
			w := newELRWorld(t, nil, map[string]string{"unclean.leader.election.enable": "false"})
			w.kill(5, 1, 2, 3, 4)
			w.kill(4, 1, 2, 3)
			w.kill(3, 1, 2)
			// 3 (the last leader) returns wiped: out of the ELR, still
			// the last known leader; 5 (not in the ELR) returns clean.
			ep, err := w.m.Register(metadata.Broker{ID: 3, Host: "h", Port: 9092, Incarnation: "wiped", DirectoryID: "new"}, -1)
			if err != nil {
				t.Fatal(err)
			}
			w.epochs[3] = ep
			w.beat(3)
			w.restart(5)
			w.expect(-1, nil, []int32{4}, []int32{3})
			if unclean {
				if err := w.m.AlterTopicConfigs("e", []metadata.ConfigOp{{Name: "unclean.leader.election.enable", Value: "true"}}); err != nil {
					t.Fatal(err)
				}
				p := w.part()
				if p.Leader != 3 || !p.Recovering || len(p.ELR) != 0 || len(p.LastKnownELR) != 0 {
					t.Fatalf("unclean election: want the last known leader 3, recovering, ELR cleared: %+v", p)
				}
			}
		}
	})
}

// TestELRFeatureOff: at eligible.leader.replicas.version 0 (a cluster
// upgraded from a binary without ELR) the ISR keeps its last member and
// no ELR is kept.
func TestELRFeatureOff(t *testing.T) {
	w := newELRWorld(t, nil, nil)
	if got := w.m.Image().FeatureLevel(metadata.FeatureELRVersion); got != 1 {
		t.Fatalf("a new cluster's %s is %d, want 1", metadata.FeatureELRVersion, got)
	}
	errs, err := w.m.UpdateFeatures([]metadata.FeatureUpdate{{Name: metadata.FeatureELRVersion, Level: 0, Downgrade: true}})
	if err != nil || len(errs) > 0 {
		t.Fatalf("downgrade: %v %v", errs, err)
	}
	w.shrink(3)
	w.expect(3, []int32{3}, nil, nil)
	w.kill(3, 1, 2, 4, 5)
	w.expect(-1, []int32{3}, nil, nil)
}

// TestELRClusterMinISR: a change of the cluster-default
// min.insync.replicas clears the ELR of the topics that take it (not of
// those with their own), and a per-broker value is refused while ELR is
// on, so that the controller and every leader agree on it.
func TestELRClusterMinISR(t *testing.T) {
	w := newELRWorld(t, map[string]string{"min.insync.replicas": "2"}, nil)
	if _, err := w.m.call(opCreateTopic, createTopicReq{Name: "d", Assignment: [][]int32{{3, 4, 5}}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"e", "d"} {
		p := w.m.Image().Topics[name].Partitions[0]
		resp, err := w.m.AlterPartition(metadata.AlterPartitionRequest{Topic: name, BrokerID: 3, BrokerEpoch: w.epochs[3],
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{3}})
		if err != nil || resp.Error != 0 {
			t.Fatalf("shrink %s: %+v %v", name, resp, err)
		}
		if p := w.m.Image().Topics[name].Partitions[0]; len(p.ELR) != 2 {
			t.Fatalf("%s below min ISR 2 (server.properties): %+v", name, p)
		}
	}
	set := func(broker string) error {
		_, err := w.m.call(opAlterResConfigs, resConfigReq{Resource: metadata.ConfigResource{Type: metadata.ResourceBroker, Name: broker},
			Ops: []metadata.ConfigOp{{Name: "min.insync.replicas", Value: "1"}}}, nil)
		return err
	}
	if err := set("3"); err == nil || !strings.Contains(err.Error(), "KIP-966") {
		t.Fatalf("a per-broker min.insync.replicas with ELR on: %v", err)
	}
	if err := set(""); err != nil {
		t.Fatal(err)
	}
	im := w.m.Image()
	if e, d := im.Topics["e"].Partitions[0], im.Topics["d"].Partitions[0]; len(e.ELR) != 2 || len(d.ELR) != 0 {
		t.Fatalf("after the cluster default changed: e (own min ISR) %+v, d (the default) %+v", e, d)
	}
}
