package broker_test

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// A transaction whose marker is at or above the high watermark stays
// unstable across a restart: the last stable offset of the reopened
// partition is the transaction's first offset until the HW passes the
// marker (Kafka's ProducerStateManager.unreplicatedTxns, which log
// recovery fills). A new leader may lack the marker and reopen the
// transaction; a read_committed consumer shown an LSO past it would have
// taken it as decided (the simulator's seed 103 did, an ELR member later
// elected holding it open).
func TestTxnAboveHWUnstableAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		hw, want int64
	}{
		{hw: 3, want: 1}, // the marker (offset 3) is not below the HW
		{hw: 4, want: 4}, // it is: the transaction is decided
	} {
		t.Run(fmt.Sprintf("hw=%d", tc.hw), func(t *testing.T) {
			if got := lsoAfterRestart(t, tc.hw); got != tc.want {
				t.Fatalf("LSO after a restart with the HW at %d: %d, want %d", tc.hw, got, tc.want)
			}
		})
	}
}

// lsoAfterRestart opens a broker on a log holding a plain record (0), a
// transaction of producer 7 (1), a plain record (2) and the transaction's
// abort marker (3), with hw as its checkpointed high watermark, leading
// the partition with a follower that never fetches (so the HW stays), and
// returns the partition's last stable offset.
func lsoAfterRestart(t *testing.T, hw int64) int64 {
	q := newFakeQuorum()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := config.Defaults()
	cfg.NodeID = 1
	cfg.DataDir = t.TempDir()
	cfg.Listen = ln.Addr().String()
	self, _ := broker.SelfBroker(cfg)
	n := q.node(self)
	q.node(metadata.Broker{ID: 2, Host: "127.0.0.1", Port: 1})
	if err := n.CreateTopic(nil, "t", 1, 2, nil, nil, false); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	dir := filepath.Join(cfg.DataDir, "t-0")
	l, err := storage.Open(vfs.Default, dir, storage.DefaultConfig(), now)
	if err != nil {
		t.Fatal(err)
	}
	const pid = 7
	for _, b := range [][]byte{
		batchtest.Build(batchtest.Options{}, batchtest.Values("a")),
		batchtest.Build(batchtest.Options{ProducerID: pid, Transactional: true}, batchtest.Values("x")),
		batchtest.Build(batchtest.Options{}, batchtest.Values("b")),
		batch.EncodeMarker(pid, 0, batch.Marker{Commit: false}, now.UnixMilli()),
	} {
		if _, err := l.AppendAssigning(b, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check := fmt.Sprintf("0\n1\nt 0 %d\n", hw)
	if err := vfs.WriteFileAtomic(vfs.Default, filepath.Join(cfg.DataDir, "replication-offset-checkpoint"), []byte(check), true); err != nil {
		t.Fatal(err)
	}

	b, err := broker.Open(broker.Options{Config: cfg, Controller: n, Steps: true, Clock: clock.NewManual(now)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.StepTick()
	p, err := b.PartitionBy("t", 0, time.Time{})
	if err != nil || !p.IsLeader() {
		t.Fatalf("partition t-0: %v, leader %v", err, err == nil && p.IsLeader())
	}
	if p.LogEndOffset() != 4 || p.HighWatermark() != hw {
		t.Fatalf("log end %d HW %d, want 4 and %d", p.LogEndOffset(), p.HighWatermark(), hw)
	}
	return p.LastStableOffset()
}
