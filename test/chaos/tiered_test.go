package chaos

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/chaos"
	"github.com/sluice-io/sluice/internal/testproc"
)

// requestsMeanwhile finds, in an objstore fault's detail, how many
// requests reached the object store's proxy while it was in place.
var requestsMeanwhile = regexp.MustCompile(`\((\d+) requests meanwhile\)`)

// TestChaosTieredShort runs the queue workload on a tiered topic (the S3
// test server behind the fault proxy) through a SIGKILL, a SIGSTOP, an
// isolated leader and the object store's three troubles (slow, 5xx,
// outage), and requires zero anomalies and a run that really tiered:
// remote segments in the object store and a final read that started
// below the local log start, i.e. read from the remote log. About 90 s;
// skipped with -short.
//
//	go test ./test/chaos -run TestChaosTieredShort -v
func TestChaosTieredShort(t *testing.T) {
	if testing.Short() {
		t.Skip("tiered chaos run takes ~90 s; skipped with -short")
	}
	out := os.Getenv("SLUICE_CHAOS_OUT")
	if out == "" {
		d, err := os.MkdirTemp("", "sluice-chaos-tiered-")
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
	if _, err := testproc.BuildS3Server(); err != nil {
		t.Fatal(err)
	}
	o := chaos.Options{
		Nodes: 3, Duration: 62 * time.Second, Seed: 3, Out: out, MinISR: 2, Unclean: false,
		Faults: []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultIsolate, chaos.FaultObjStore},
		Binary: bin, Rate: 200, Recovery: 4 * time.Second, Tiered: true,
		Logf: func(format string, args ...any) { t.Logf(format, args...) },
	}
	// The object store's mode is the partition draw modulo 3: slow,
	// failing, outage. The first segments roll (and are copied) about
	// 12 s in, so the object store faults start after that.
	o.Plan = []chaos.Fault{
		{AtMs: 18000, Kind: chaos.FaultObjStore, Partition: 0, DurMs: 4000},
		{AtMs: 25000, Kind: chaos.FaultKill, Target: "leader", Partition: 0, Node: 1, DurMs: 3000},
		{AtMs: 31000, Kind: chaos.FaultObjStore, Partition: 1, DurMs: 4000},
		{AtMs: 38000, Kind: chaos.FaultPause, Target: "leader", Partition: 1, Node: 2, DurMs: 3000},
		{AtMs: 44000, Kind: chaos.FaultObjStore, Partition: 2, DurMs: 4000},
		{AtMs: 51000, Kind: chaos.FaultIsolate, Target: "leader", Partition: 2, Node: 3, DurMs: 4000},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("chaos run: %v (output in %s)", err, out)
	}
	report := filepath.Join(out, "report.html")
	storeRequests := 0
	t.Logf("sends ok=%d fail=%d info=%d reads=%d final=%d", res.Stats.OK, res.Stats.Fail, res.Stats.Info, res.Stats.Reads, res.Stats.FinalRead)
	for _, e := range res.Timeline {
		t.Logf("  %6.1fs-%6.1fs %-8s %v %s %s", e.StartMs/1000, e.EndMs/1000, e.Kind, e.Nodes, e.Detail, e.Err)
		if e.Err != "" {
			t.Errorf("fault %s %v: %s", e.Kind, e.Nodes, e.Err)
		}
		if m := requestsMeanwhile.FindStringSubmatch(e.Detail); e.Kind == chaos.FaultObjStore && m != nil {
			n, _ := strconv.Atoi(m[1])
			storeRequests += n
		}
	}
	if storeRequests == 0 {
		t.Errorf("no object store request arrived during the objstore faults: they tested nothing")
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
		t.Fatalf("%d anomalies on a tiered topic; report %s", res.Anomalies(), report)
	}
	for _, c := range res.Crashes {
		t.Errorf("broker crash: %s", c)
	}
	if !res.Valid || len(res.Notes) > 0 {
		t.Fatalf("run not clean: valid=%v notes %v; report %s", res.Valid, res.Notes, report)
	}
	if res.Stats.OK < 1000 {
		t.Fatalf("only %d acknowledged sends; report %s", res.Stats.OK, report)
	}
	ts := res.Tiered
	if ts == nil {
		t.Fatalf("a tiered run reported no tiered state; report %s", report)
	}
	segs := 0
	for _, n := range ts.RemoteSegments {
		segs += n
	}
	t.Logf("remote segments %v, log start %v, local start %v, tiered end %v", ts.RemoteSegments, ts.LogStart, ts.LocalStart, ts.TieredEnd)
	if segs == 0 || len(ts.ReadFromRemote) == 0 {
		t.Fatalf("the run did not tier: %d remote segments, final read from the remote log on partitions %v; report %s", segs, ts.ReadFromRemote, report)
	}
	if os.Getenv("SLUICE_CHAOS_OUT") == "" && !t.Failed() {
		os.RemoveAll(out)
	}
}
