package broker_test

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// openSyncFS opens a single-node broker on fsys whose flusher uses one
// syncfs for any flush round of minParts partitions or more, with topic
// "t" of n partitions.
func openSyncFS(t *testing.T, fsys vfs.FS, minParts, n int) (*broker.Broker, chan error) {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = "/data"
	cfg.Listen = "127.0.0.1:1"
	cfg.Props["sluice.log.flush.syncfs.min.partitions"] = fmt.Sprint(minParts)
	fatal := make(chan error, 10)
	b, err := broker.Open(broker.Options{Config: cfg, FS: fsys, OnFatal: func(err error) { fatal <- err }})
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		if err := b.CreateTopic("t", int32(n), 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	return b, fatal
}

func leaders(t *testing.T, b *broker.Broker, n int) []*broker.Partition {
	t.Helper()
	var ps []*broker.Partition
	for i := range n {
		p, err := b.Leader("t", int32(i))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestSyncFSRoundSurvivesCrash: with every flush round made durable by one
// syncfs (min partitions 1), what acks=1 acknowledged across many
// partitions survives a power loss at any point after, and the HW counted
// it.
func TestSyncFSRoundSurvivesCrash(t *testing.T) {
	const n = 12
	mem := vfs.NewMem()
	b, _ := openSyncFS(t, mem, 1, n)
	ps := leaders(t, b, n)
	acked := make([]int64, n) // per partition, the end acknowledged
	for round := range 5 {
		var chs []<-chan replica.ProduceResult
		for i, p := range ps {
			chs = append(chs, produce(t, p, 1, fmt.Sprintf("r%d-p%d", round, i)))
		}
		for i, ch := range chs {
			r := result(t, ch)
			if r.Error != 0 {
				t.Fatalf("partition %d: %v", i, kerr.ErrorForCode(r.Error))
			}
			acked[i] = r.LastOffset + 1
		}
	}
	for i, p := range ps {
		if st := p.Status(nil); st.FlushedOffset < acked[i] || st.HW < acked[i] {
			t.Fatalf("partition %d: flushed %d, HW %d below the acknowledged end %d", i, st.FlushedOffset, st.HW, acked[i])
		}
	}
	rounds, parts := b.SyncFSRounds()
	t.Logf("%d syncfs rounds covered %d partition rounds", rounds, parts)
	if rounds == 0 {
		t.Fatal("no syncfs round ran")
	}
	for seed := int64(0); seed < 5; seed++ {
		c := mem.Crash(rand.New(rand.NewSource(seed)))
		b2, _ := openSyncFS(t, c, 1, 0)
		for i, p := range leaders(t, b2, n) {
			if leo := p.Status(nil).LEO; leo < acked[i] {
				t.Errorf("seed %d: partition %d recovered to %d, below the acknowledged end %d", seed, i, leo, acked[i])
			}
		}
		b2.Close()
	}
	b.Close()
}

// TestSyncFSFailureFlushesNothing: a failed syncfs fails every partition
// of its round as a failed fsync does: the broker halts, no acks=1
// request of the round is acknowledged, and no partition's flushed offset
// or HW passes what it had before.
func TestSyncFSFailureFlushesNothing(t *testing.T) {
	const n = 6
	rule := &vfs.Rule{Ops: []vfs.Op{vfs.OpSyncFS}, Err: errors.New("EIO")}
	rule.Disable()
	b, fatal := openSyncFS(t, vfs.WithFaults(vfs.NewMem(), rule), 1, n)
	defer b.Close()
	ps := leaders(t, b, n)
	before := make([]broker.Status, n)
	for i, p := range ps {
		if r := result(t, produce(t, p, 1, "before")); r.Error != 0 {
			t.Fatalf("partition %d before the fault: %v", i, kerr.ErrorForCode(r.Error))
		}
		before[i] = p.Status(nil)
	}
	rule.Enable()
	var chs []<-chan replica.ProduceResult
	for _, p := range ps {
		chs = append(chs, produce(t, p, 1, "during"))
	}
	err := waitFatal(t, fatal)
	if !errors.Is(err, storage.ErrFailed) || !strings.Contains(err.Error(), "syncfs") {
		t.Fatalf("OnFatal(%v): want a storage.ErrFailed from the syncfs", err)
	}
	for i, ch := range chs {
		if r := result(t, ch); r.Error == 0 {
			t.Errorf("partition %d: acks=1 request acknowledged at %d after a failed syncfs", i, r.BaseOffset)
		}
	}
	for i, p := range ps {
		st := p.Status(nil)
		if st.FlushedOffset > before[i].FlushedOffset || st.HW > before[i].HW {
			t.Errorf("partition %d: flushed %d HW %d after the failed syncfs, before it %d and %d", i, st.FlushedOffset, st.HW, before[i].FlushedOffset, before[i].HW)
		}
	}
	if rule.Fired() == 0 {
		t.Error("the fault never fired")
	}
}

// TestSyncFSThreshold: fewer dirty partitions than the threshold are
// fsynced one by one; the threshold 0 never uses syncfs.
func TestSyncFSThreshold(t *testing.T) {
	for _, c := range []struct{ min, parts int }{{0, 8}, {1000, 8}} {
		b, _ := openSyncFS(t, vfs.NewMem(), c.min, c.parts)
		for i, p := range leaders(t, b, c.parts) {
			if r := result(t, produce(t, p, 1, "x")); r.Error != 0 {
				t.Fatalf("partition %d: %v", i, kerr.ErrorForCode(r.Error))
			}
		}
		if rounds, _ := b.SyncFSRounds(); rounds != 0 {
			t.Errorf("min %d, %d partitions: %d syncfs rounds", c.min, c.parts, rounds)
		}
		b.Close()
	}
}

// TestSyncFSDefault: the broker's default threshold is the one the
// configuration table documents.
func TestSyncFSDefault(t *testing.T) {
	d, ok := config.BrokerDef("sluice.log.flush.syncfs.min.partitions")
	if !ok || d.Default != fmt.Sprint(broker.DefaultSyncFSMinPartitions) {
		t.Fatalf("table default %q (%v), broker default %d", d.Default, ok, broker.DefaultSyncFSMinPartitions)
	}
}
