// Package diskloss runs real `sluice serve` processes whose data
// directories are wiped while they are down, as when a disk is replaced:
// a voter that lost its metadata log must not help elect a controller that
// lacks committed entries, and a broker that lost its partitions rejoins
// every ISR by catching up, losing nothing acknowledged.
package diskloss

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// wipe removes everything in dir, as a replaced disk.
func wipe(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(dir + "/" + e.Name()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWipedVoterDoesNotElectStaleController: voters 1 and 2 commit a
// topic while voter 3 is down; 2 loses its disk and 1 goes down. When 3
// comes back and 2 restarts empty, 2 must not vote 3 (whose log lacks the
// topic) into leadership: an empty log votes for anyone, and 3 would then
// overwrite what 1 and 2 had committed (Raft's disk-loss hazard, which
// Kafka's KIP-853 closes with directory ids). The quorum waits for 1;
// once 1 is back, the topic is there.
func TestWipedVoterDoesNotElectStaleController(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{"auto.create.topics.enable": "false"}})
	n1, n2, n3 := c.Node(1), c.Node(2), c.Node(3)
	// Requests through node 1 only: a paused node holds requests.
	adm := kadm.NewClient(n1.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 2, nil, "before"); err != nil {
		t.Fatal(err)
	}
	// Voter 3 is killed, not paused: a paused process would still
	// read, on resuming, the entries the leader had already sent into
	// its socket.
	n3.Kill()
	// Committed by 1 and 2 only.
	testcluster.WaitFor(t, 30*time.Second, "topic created while voter 3 is down", func() (bool, string) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		r, err := adm.CreateTopic(cctx, 1, 2, nil, "while-down")
		if err == nil && r.Err == nil {
			return true, ""
		}
		return false, errString(err, r.Err)
	})
	n2.Kill()
	wipe(t, n2.DataDir())
	n1.Kill()
	n3.Restart()
	// campaigns counts voter 3's pre-vote rounds that failed since its
	// restart, and whether it won an election; hashicorp/raft logs both
	// ("pre-vote campaign failed", "election won").
	campaigns := func() (failed int, won bool) {
		b, err := os.ReadFile(n3.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		last := b[bytes.LastIndex(b, []byte("=== testproc: start")):]
		return bytes.Count(last, []byte("pre-vote campaign failed")), bytes.Contains(last, []byte("election won"))
	}
	n2.Restart()

	// 3 and the wiped 2 alone: 3 campaigns three times with 2 up (and
	// guarded) and loses each, rather than for a guessed 8 s.
	before, _ := campaigns()
	testcluster.WaitFor(t, 60*time.Second, "voter 3 to lose three campaigns with the wiped 2 up", func() (bool, string) {
		failed, won := campaigns()
		if won {
			t.Fatalf("voter 3, lacking committed entries, won an election with the wiped voter 2:\n%s", n3.LogTail(30))
		}
		return failed >= before+3, fmt.Sprintf("%d failed campaigns since 2 restarted", failed-before)
	})
	n1.Restart()

	for _, p := range []*testproc.Proc{n1, n2, n3} {
		p := p
		testcluster.WaitFor(t, 60*time.Second, "node lists both topics", func() (bool, string) {
			m, err := testcluster.PartitionsFrom(ctx, p.Addr(), "while-down")
			if err != nil {
				return false, err.Error()
			}
			if len(m) != 1 {
				return false, "no partition of while-down"
			}
			return true, ""
		})
	}
	// The wiped voter votes again once it has caught up with node 1.
	testcluster.WaitFor(t, 30*time.Second, "node 2 votes again", func() (bool, string) {
		b, err := os.ReadFile(n2.LogPath())
		if err != nil {
			return false, err.Error()
		}
		last := b[bytes.LastIndex(b, []byte("=== testproc: start")):]
		if !bytes.Contains(last, []byte("controller voter starts without voting")) {
			return false, "node 2 did not start guarded"
		}
		return bytes.Contains(last, []byte(`votes again" component=controller node=2 reason="caught up with the leader"`)), "still guarded"
	})
}

func errString(errs ...error) string {
	for _, err := range errs {
		if err != nil {
			return err.Error()
		}
	}
	return ""
}
