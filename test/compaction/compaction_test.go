// Package compaction runs a real three-process sluice cluster with an RF 3
// compacted topic (tiny segment.ms and dirty ratio), produces keyed data
// and tombstones with franz-go (acks=all) and kcat, SIGKILLs the leader in
// the middle of it (while its cleaner runs) and restarts it, and then
// checks, on each replica's own log: every live key's latest acknowledged
// value at its acknowledged offset, at most about one record per key below
// the active segment, tombstoned keys gone after delete.retention.ms, and
// all three replicas agreeing. A compact-only topic with a short
// retention.ms keeps every key (Kafka Connect's topics).
//
// Run: go test ./test/compaction -v -count=1
package compaction

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
	"github.com/sluice-io/sluice/internal/vfs"
)

func TestMain(m *testing.M) { testproc.Main(m) }

var props = map[string]string{
	"default.replication.factor":      "3",
	"min.insync.replicas":             "2",
	"replica.lag.time.max.ms":         "3000",
	"broker.session.timeout.ms":       "3000",
	"broker.heartbeat.interval.ms":    "500",
	"auto.leader.rebalance.enable":    "false",
	"log.cleaner.backoff.ms":          "50",
	"log.retention.check.interval.ms": "100",
	// Slow passes (the logs are a few hundred KB), so that the leader is
	// killed in the middle of one.
	"log.cleaner.io.max.bytes.per.second": "100000",
}

type value struct {
	off   int64
	value string // "" for a tombstone
}

func TestCompactedTopicRF3(t *testing.T) {
	kcat := testproc.RequireTool(t, "kcat")
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	const topic = "changelog"
	c.CreateTopic(topic, 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "300",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000", "min.insync.replicas": "2"}, nil)
	c.WaitTopicReady(topic, 1, 20*time.Second)
	// A Connect-style topic: compact only, with retention.ms set short.
	c.CreateTopic("connect-offsets", 1, 3, map[string]string{"cleanup.policy": "compact", "retention.ms": "500",
		"retention.bytes": "100", "segment.bytes": "1024", "segment.ms": "100"}, nil)
	c.WaitTopicReady("connect-offsets", 1, 20*time.Second)

	latest := map[string]value{}
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20), kgo.RetryTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produce := func(round int, tombstones bool) {
		t.Helper()
		var rs []*kgo.Record
		for k := 0; k < 100; k++ {
			v := fmt.Sprintf("r%d-%s", round, strings.Repeat("x", 40))
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%03d", k)), Value: []byte(v)}
			if tombstones && k%10 == 0 {
				r.Value, v = nil, ""
			}
			rs = append(rs, r)
		}
		for _, r := range cl.ProduceSync(ctx, rs...) {
			if r.Err != nil {
				t.Fatalf("round %d: %v", round, r.Err)
			}
			latest[string(r.Record.Key)] = value{r.Record.Offset, string(r.Record.Value)}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for round := 0; round < 15; round++ {
		produce(round, false)
	}
	// SIGKILL the leader in the middle of a cleaning pass (the I/O
	// throttle makes a pass take a while; the leader's gauge says when one
	// runs; new rounds keep rolling dirty segments), go on producing on
	// the new leader, restart it.
	meta, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Node(meta[0].Leader)
	killed := false
	for round := 15; round < 60 && !killed; round++ {
		produce(round, false)
		for i := 0; i < 50 && !killed; i++ {
			if metric(t, leader.HTTPAddr(), "sluice_log_cleaner_running_passes") > 0 {
				leader.Kill()
				killed = true
				t.Logf("killed leader %d in the middle of a cleaning pass, after round %d", meta[0].Leader, round)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !killed {
		t.Fatal("no cleaning pass seen running on the leader in 45 rounds")
	}
	for round := 60; round < 70; round++ {
		produce(round, false)
	}
	leader.Restart()
	// kcat writes keys of its own; their values are read back too.
	var lines []string
	for k := 0; k < 20; k++ {
		lines = append(lines, fmt.Sprintf("kcat-%02d:from-kcat-%d", k, k))
	}
	runTool(t, kcat, strings.Join(lines, "\n")+"\n", "-b", strings.Join(c.Addrs(true), ","), "-t", topic, "-P", "-K:",
		"-X", "request.required.acks=all")
	for round := 70; round < 75; round++ {
		produce(round, round == 74) // the last round deletes every tenth key
	}
	// Roll the active segment past the tombstones.
	time.Sleep(400 * time.Millisecond)
	produce(75, false)
	for k := 0; k < 100; k += 10 { // round 75 rewrote the deleted keys: delete them again
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%03d", k))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		latest[string(r.Key)] = value{r.Offset, ""}
	}
	time.Sleep(400 * time.Millisecond)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("roll"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "connect-offsets", Key: []byte(fmt.Sprintf("conn-%d", i)), Value: []byte("offset")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Every replica cleans on its own; wait until the tombstones' horizon
	// passed and the cleaners ran (the leader's read shows no tombstone).
	testcluster.WaitFor(t, 60*time.Second, "the leader's log compacted", func() (bool, string) {
		recs := readTopic(t, c, topic)
		tomb := 0
		for _, r := range recs {
			if r.Value == nil {
				tomb++
			}
		}
		return tomb == 0 && len(recs) <= 100-10+20+1+5, fmt.Sprintf("%d records, %d tombstones", len(recs), tomb)
	})
	// Every replica caught up (the restarted one may still be fetching on
	// a loaded machine), then give the followers' cleaners time.
	testcluster.WaitFor(t, 60*time.Second, "all three replicas in the ISR", func() (bool, string) {
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		return len(m[0].ISR) == 3, m[0].String()
	})
	time.Sleep(3 * time.Second)
	for _, p := range c.Nodes() {
		p.Stop() // SIGTERM: flushed logs, read below
	}
	// Each replica's own log, read from its data directory.
	var logs [][]rec
	for _, p := range c.Nodes() {
		recs := readLog(t, filepath.Join(p.DataDir(), topic+"-0"))
		logs = append(logs, recs)
		got := map[string]rec{}
		count := map[string]int{}
		for _, r := range recs {
			got[r.key] = r
			count[r.key]++
		}
		for k, want := range latest {
			r, ok := got[k]
			switch {
			case want.value == "" && ok && r.value != nil:
				t.Fatalf("node %d: deleted key %s has value %q at %d", p.NodeID(), k, r.value, r.off)
			case want.value == "" && ok:
				t.Errorf("node %d: tombstone of %s at %d still there after delete.retention.ms", p.NodeID(), k, r.off)
			case want.value != "" && (!ok || r.off != want.off || string(r.value) != want.value):
				t.Fatalf("node %d: key %s = %q at %d, acknowledged %q at %d", p.NodeID(), k, r.value, r.off, want.value, want.off)
			}
		}
		for k := 0; k < 20; k++ {
			if r := got[fmt.Sprintf("kcat-%02d", k)]; string(r.value) != fmt.Sprintf("from-kcat-%d", k) {
				t.Fatalf("node %d: kcat key %d = %q", p.NodeID(), k, r.value)
			}
		}
		dups := 0
		for _, n := range count {
			dups += n - 1
		}
		t.Logf("node %d: %d records for %d keys (%d older versions left)", p.NodeID(), len(recs), len(got), dups)
		if dups > 10 {
			t.Errorf("node %d: %d older versions left below the active segment", p.NodeID(), dups)
		}
		conn := readLog(t, filepath.Join(p.DataDir(), "connect-offsets-0"))
		if len(conn) != 60 || conn[0].off != 0 {
			t.Fatalf("node %d: compact-only connect-offsets kept %d of 60 records (first %v)", p.NodeID(), len(conn), conn[0])
		}
	}
	// The replicas agree on every live key's value and offset.
	for i := 1; i < len(logs); i++ {
		a, b := latestOf(logs[0]), latestOf(logs[i])
		for k, r := range a {
			if r.value != nil && (b[k].off != r.off || !bytes.Equal(b[k].value, r.value)) {
				t.Fatalf("replicas disagree on %s: %d=%q vs %d=%q", k, r.off, r.value, b[k].off, b[k].value)
			}
		}
	}
}

type rec struct {
	off   int64
	key   string
	value []byte
}

func latestOf(recs []rec) map[string]rec {
	m := map[string]rec{}
	for _, r := range recs {
		m[r.key] = r
	}
	return m
}

// readLog opens a stopped replica's log directory and reads every record.
func readLog(t *testing.T, dir string) []rec {
	t.Helper()
	cfg := storage.DefaultConfig()
	cfg.Delete, cfg.Compact = false, true
	l, err := storage.Open(vfs.Default, dir, cfg, time.Now())
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer l.Close()
	var out []rec
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		sl, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := sl.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, one, rest, err := batch.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			batch.Records(one, func(r batch.Record) bool {
				out = append(out, rec{h.BaseOffset + int64(r.OffsetDelta), string(r.Key), bytes.Clone(r.Value)})
				return true
			})
			off = h.NextOffset()
			b = rest
		}
	}
	return out
}

// readTopic reads partition 0 from the start to the high watermark.
func readTopic(t *testing.T, c *testcluster.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := c.Admin()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v", topic, ctx.Err())
		}
		for _, r := range fs.Records() {
			out = append(out, r)
			if r.Offset+1 >= end.Offset {
				return out
			}
		}
	}
}

func runTool(t *testing.T, name, stdin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
