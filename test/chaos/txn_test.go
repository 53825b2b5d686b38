package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/chaos"
)

// TestChaosTxnShort runs the transactional workload (transactions of 1-4
// sends, 20% aborted, read_committed consumers) on 3 nodes for about a
// minute under SIGKILL, SIGSTOP and delay-txn (two Produce requests and an
// EndTxn held at the proxy around the client's timeout and delivered late,
// the KAFKA-17754 class), and requires zero anomalies. The producers use
// the transaction version franz-go negotiates: 2 (KIP-890 part 2, an epoch
// bump at every EndTxn, which fences the late EndTxn). Skipped with
// -short.
//
//	go test ./test/chaos -run 'TestChaosTxnShort$' -v
func TestChaosTxnShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run takes ~2 min; skipped with -short")
	}
	runTxnShort(t, 0, true)
}

// TestChaosTxnShortV1 is TestChaosTxnShort with the producers kept on
// transaction version 1 and Produce requests held only: under version 1 a
// late EndTxn carries the producer id and epoch of the producer's next
// transaction and ends it early, as in Kafka (docs/chaos.md, findings).
// It runs with SLUICE_CHAOS_TXN_V1=1.
func TestChaosTxnShortV1(t *testing.T) {
	if os.Getenv("SLUICE_CHAOS_TXN_V1") != "1" {
		t.Skip("transaction version 1 run: set SLUICE_CHAOS_TXN_V1=1")
	}
	runTxnShort(t, 1, false)
}

// runTxnShort runs the short transactional schedule with producers on
// transaction version txnVersion (0: negotiated); endTxn makes the second
// delay-txn hold an EndTxn instead of a Produce.
func runTxnShort(t *testing.T, txnVersion int, endTxn bool) {
	out := os.Getenv("SLUICE_CHAOS_OUT")
	if out == "" {
		d, err := os.MkdirTemp("", "sluice-chaos-txn-test-")
		if err != nil {
			t.Fatal(err)
		}
		out = d
	}
	bin := os.Getenv("SLUICE_BIN")
	if bin == "" {
		var err error
		if bin, err = chaos.BuildBinary(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	} else if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	o := chaos.Options{
		Nodes: 3, Duration: 55 * time.Second, Seed: 1, Out: out, MinISR: 2,
		Workload: chaos.WorkloadTxn, TxnVersion: txnVersion, Faults: []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultDelayTxn},
		Binary: bin, Rate: 150, Recovery: 4 * time.Second,
		Logf: func(format string, args ...any) { t.Logf(format, args...) },
	}
	// Partition picks what delay-txn holds: even a Produce to the
	// target, odd an EndTxn to any node. Holds are DurMs + 2 s.
	second := chaos.Fault{AtMs: 26000, Kind: chaos.FaultDelayTxn, Target: "leader", Partition: 0, Node: 1, DurMs: 4000}
	if endTxn {
		second.Target, second.Partition = "node", 1
	}
	o.Plan = []chaos.Fault{
		{AtMs: 4000, Kind: chaos.FaultKill, Target: "leader", Partition: 0, Node: 1, DurMs: 3000},
		{AtMs: 11000, Kind: chaos.FaultDelayTxn, Target: "leader", Partition: 0, Node: 1, DurMs: 3000},
		{AtMs: 19000, Kind: chaos.FaultPause, Target: "leader", Partition: 1, Node: 2, DurMs: 3000},
		second,
		{AtMs: 35000, Kind: chaos.FaultKill, Target: "node", Node: 2, DurMs: 3000},
		{AtMs: 42000, Kind: chaos.FaultDelayTxn, Target: "leader", Partition: 2, Node: 3, DurMs: 5000},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("chaos run: %v (output in %s)", err, out)
	}
	ts := res.TxnStats
	if ts == nil {
		t.Fatal("no transaction stats")
	}
	t.Logf("transactions %d: committed %d, aborted %d (%d on purpose), indeterminate %d; reads %d, final %d; %d reads in transactions, %d write-read dependencies",
		ts.Txns, ts.Committed, ts.Aborted, ts.AbortIntended, ts.Info, res.Stats.Reads, res.Stats.FinalRead, ts.Reads, ts.ReadDeps)
	for _, e := range res.Timeline {
		t.Logf("  %6.1fs-%6.1fs %-9s %v %s %s", e.StartMs/1000, e.EndMs/1000, e.Kind, e.Nodes, e.Detail, e.Err)
	}
	for _, n := range res.Notes {
		t.Logf("note: %s", n)
	}
	if res.Anomalies() > 0 {
		for _, k := range res.Analysis.Kinds() {
			if n := res.Analysis.Counts[k]; n > 0 {
				t.Errorf("%s: %d, e.g. %v", k, n, res.Analysis.Examples[k])
			}
		}
		t.Fatalf("%d anomalies; report %s", res.Anomalies(), filepath.Join(out, "report.html"))
	}
	for _, c := range res.Crashes {
		t.Errorf("broker crash: %s", c)
	}
	if !res.Valid {
		t.Fatalf("run could not check everything: %v; report %s", res.Notes, filepath.Join(out, "report.html"))
	}
	if ts.ReadDeps == 0 {
		t.Fatalf("no transaction read another's value (%d reads): the G1c check saw no dependency; report %s", ts.Reads, filepath.Join(out, "report.html"))
	}
	if ts.Committed < 200 || ts.AbortIntended == 0 {
		t.Fatalf("only %d committed and %d aborted transactions: the workload barely ran; report %s", ts.Committed, ts.AbortIntended, filepath.Join(out, "report.html"))
	}
	held := 0
	for _, e := range res.Timeline {
		if e.Err != "" {
			t.Errorf("fault %s %v: %s", e.Kind, e.Nodes, e.Err)
		}
		if e.Kind == chaos.FaultDelayTxn && !strings.Contains(e.Detail, "no matching") {
			held++
		}
	}
	if held == 0 {
		t.Error("delay-txn never held a request")
	}
	if os.Getenv("SLUICE_CHAOS_OUT") == "" && !t.Failed() {
		os.RemoveAll(out)
	}
}

// The transactional checker catches a planted aborted read (G1a): a
// read_committed consumer returning a value of an aborted transaction,
// and passes the same history without it.
func TestTxnCheckerCatchesAbortedRead(t *testing.T) {
	txns := []chaos.Txn{
		{ID: "t0-0", Intent: "commit", Outcome: chaos.TxnOK, CommitMs: 10, EndMs: 11,
			Writes: []chaos.TxnWrite{{Value: "t0-0-0", Partition: 0, Offset: 0}}},
		{ID: "t1-0", Intent: "abort", Outcome: chaos.TxnFail, EndMs: 12,
			Writes: []chaos.TxnWrite{{Value: "t1-0-0", Partition: 0, Offset: 2}}},
	}
	reads := []chaos.Read{
		{Consumer: "c0", Partition: 0, Offset: 0, Value: "t0-0-0", AtMs: 20},
		{Consumer: "final", Partition: 0, Offset: 0, Value: "t0-0-0", AtMs: 30},
	}
	fr := chaos.FinalRead{Start: map[int32]int64{0: 0}, End: map[int32]int64{0: 4}, Complete: map[int32]bool{0: true}}
	if a := chaos.CheckTxn(txns, reads, fr); a.Total() != 0 {
		t.Fatalf("clean history: %v %v", a.Counts, a.Examples)
	}
	planted := append(reads, chaos.Read{Consumer: "c1", Partition: 0, Offset: 2, Value: "t1-0-0", AtMs: 25})
	a := chaos.CheckTxn(txns, planted, fr)
	if a.Counts[chaos.AnomG1a] != 1 || a.Total() != 1 {
		t.Fatalf("aborted read not caught: %v %v", a.Counts, a.Examples)
	}
}
