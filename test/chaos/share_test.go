package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/chaos"
)

// TestChaosShareShort runs the share workload (a share group whose members
// accept, release and reject per record, stall past their locks, crash
// and leave) through a short schedule of a kill, a pause, an isolation
// and a rolling SIGTERM restart on a 3-node cluster, and requires zero
// anomalies, a complete drain, and that the members did misbehave (so the
// checks cannot pass vacuously). About 2 minutes; skipped with -short.
func TestChaosShareShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run takes ~2 min; skipped with -short")
	}
	out := os.Getenv("SLUICE_CHAOS_OUT")
	if out == "" {
		d, err := os.MkdirTemp("", "sluice-chaos-share-")
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
		Nodes: 3, Duration: 60 * time.Second, Seed: 3, Out: out, MinISR: 2,
		Workload: chaos.WorkloadShare, Faults: []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultIsolate, chaos.FaultTerm},
		Binary: bin, Rate: 150, Recovery: 4 * time.Second,
		Logf: func(format string, args ...any) { t.Logf(format, args...) },
	}
	o.Plan = []chaos.Fault{
		{AtMs: 5000, Kind: chaos.FaultKill, Target: "leader", Partition: 0, Node: 1, DurMs: 3000},
		{AtMs: 15000, Kind: chaos.FaultPause, Target: "leader", Partition: 1, Node: 2, DurMs: 3000},
		{AtMs: 25000, Kind: chaos.FaultIsolate, Target: "leader", Partition: 2, Node: 3, DurMs: 4000},
		{AtMs: 38000, Kind: chaos.FaultTerm},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("chaos run: %v (output in %s)", err, out)
	}
	ss := res.ShareStats
	if ss == nil {
		t.Fatal("no share stats")
	}
	t.Logf("sends ok=%d; share: %d members (%d crashes, %d leaves, %d stalls), %d deliveries (%d redelivered), acks %v, results %v",
		res.Stats.OK, ss.Members, ss.Crashes, ss.Leaves, ss.Stalls, ss.Deliveries, ss.Redelivered, ss.Acks, ss.Results)
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
	if !res.Valid || len(res.Notes) > 0 {
		t.Fatalf("run not clean: valid %v, notes %v; report %s", res.Valid, res.Notes, filepath.Join(out, "report.html"))
	}
	if res.Stats.OK < 1000 || ss.Deliveries < res.Stats.OK {
		t.Fatalf("%d acknowledged sends, %d deliveries: the workload barely ran", res.Stats.OK, ss.Deliveries)
	}
	if ss.Redelivered == 0 || ss.Acks["release"] == 0 || ss.Acks["reject"] == 0 || ss.Stalls == 0 || ss.Crashes+ss.Leaves == 0 {
		t.Fatalf("the members did not misbehave enough to test anything: %+v", ss)
	}
	if len(res.ShareEnd) != 3 {
		t.Fatalf("share partitions described after the drain: %v", res.ShareEnd)
	}
	if os.Getenv("SLUICE_CHAOS_OUT") == "" && !t.Failed() {
		os.RemoveAll(out)
	}
}
