// Package chaos runs a short fault-injection schedule against a real
// 3-node sluice cluster (internal/chaos): SIGKILL, SIGSTOP, isolation,
// one-way drops, a minority split, a slow and a failing disk and a rolling
// SIGTERM restart under an acks=all, idempotent queue workload with
// min.insync.replicas=2 and unclean election off, and requires zero
// anomalies. About 2 minutes; skipped with -short.
//
//	go test ./test/chaos -run TestChaosShort -v
//	SLUICE_CHAOS_SEED=7 SLUICE_CHAOS_OUT=/tmp/c go test ./test/chaos -v
//
// On failure the report (results.json, report.html, node logs) stays in
// the test's output directory, printed in the failure message.
package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/chaos"
)

func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run takes ~2 min; skipped with -short")
	}
	seed := uint64(1)
	if s := os.Getenv("SLUICE_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_SEED: %v", err)
		}
		seed = v
	}
	out := os.Getenv("SLUICE_CHAOS_OUT")
	if out == "" {
		// Not t.TempDir: the report must survive a failed run.
		d, err := os.MkdirTemp("", "sluice-chaos-test-")
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
	// A fixed, short schedule that always holds one fault of each kind:
	// built from the seed, then pinned so every kind appears.
	o := chaos.Options{
		Nodes: 3, Duration: 78 * time.Second, Seed: seed, Out: out, MinISR: 2, Unclean: false,
		Faults: queueFaults(), Binary: bin, Rate: 150, Recovery: 4 * time.Second,
		Logf: func(format string, args ...any) { t.Logf(format, args...) },
	}
	// One fault of each kind (Partition also picks the direction of a
	// oneway: even outbound, odd inbound).
	o.Plan = []chaos.Fault{
		{AtMs: 4000, Kind: chaos.FaultKill, Target: "leader", Partition: 0, Node: 1, DurMs: 3000},
		{AtMs: 11000, Kind: chaos.FaultPause, Target: "leader", Partition: 1, Node: 2, DurMs: 3000},
		{AtMs: 18000, Kind: chaos.FaultIsolate, Target: "leader", Partition: 2, Node: 3, DurMs: 4000},
		{AtMs: 25000, Kind: chaos.FaultOneWay, Target: "leader", Partition: 0, Node: 1, DurMs: 4000},
		{AtMs: 32000, Kind: chaos.FaultOneWay, Target: "node", Partition: 1, Node: 3, DurMs: 4000},
		{AtMs: 39000, Kind: chaos.FaultSplit, Target: "leader", Partition: 3, Node: 2, DurMs: 4000},
		{AtMs: 46000, Kind: chaos.FaultSlowDisk, Target: "leader", Partition: 1, Node: 1, DurMs: 3000},
		{AtMs: 52000, Kind: chaos.FaultDiskFail, Target: "node", Node: 2, DurMs: 3000},
		{AtMs: 60000, Kind: chaos.FaultTerm},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("chaos run: %v (output in %s)", err, out)
	}
	t.Logf("sends ok=%d fail=%d info=%d reads=%d final=%d faults=%d", res.Stats.OK, res.Stats.Fail, res.Stats.Info, res.Stats.Reads, res.Stats.FinalRead, len(res.Timeline))
	for _, e := range res.Timeline {
		t.Logf("  %6.1fs-%6.1fs %-8s %v %s %s", e.StartMs/1000, e.EndMs/1000, e.Kind, e.Nodes, e.Detail, e.Err)
	}
	for _, n := range res.Notes {
		t.Logf("note: %s", n)
	}
	if res.Anomalies() > 0 {
		for _, k := range chaos.AnomalyNames {
			if n := res.Analysis.Counts[k]; n > 0 {
				t.Errorf("%s: %d, e.g. %v", k, n, res.Analysis.Examples[k])
			}
		}
		t.Fatalf("%d anomalies with acks=all, min.insync.replicas=2, unclean off; report %s", res.Anomalies(), filepath.Join(out, "report.html"))
	}
	for _, c := range res.Crashes {
		t.Errorf("broker crash: %s", c)
	}
	if !res.Valid {
		t.Fatalf("run could not check everything: %v; report %s", res.Notes, filepath.Join(out, "report.html"))
	}
	if res.Stats.OK < 1000 {
		t.Fatalf("only %d acknowledged sends: the workload barely ran; report %s", res.Stats.OK, filepath.Join(out, "report.html"))
	}
	kinds := map[string]bool{}
	for _, e := range res.Timeline {
		if e.Err != "" {
			t.Errorf("fault %s %v: %s", e.Kind, e.Nodes, e.Err)
		}
		kinds[e.Kind] = true
	}
	for _, k := range o.Faults {
		if !kinds[k] {
			t.Errorf("fault %s never ran", k)
		}
	}
	if os.Getenv("SLUICE_CHAOS_OUT") == "" && !t.Failed() {
		os.RemoveAll(out)
	}
}

// queueFaults are the kinds TestChaosShort runs: every kind but
// delay-txn, which TestChaosTxnShort runs against transactions, and
// objstore, which needs a tiered run (TestChaosTieredShort).
func queueFaults() []string {
	var out []string
	for _, k := range chaos.AllFaults {
		if k != chaos.FaultDelayTxn && k != chaos.FaultObjStore {
			out = append(out, k)
		}
	}
	return out
}
