// Package partitions tests one `sluice serve` node holding many partitions:
// a topic of thousands of partitions is created, written and read on every
// partition, survives a restart, and a request for more than the node can
// hold is refused without harm. The CI size runs the broker under a low
// open-file limit, so descriptors must stay bounded; -partitions.full runs
// issue-sized figures (10,000 partitions at the machine's limit) and logs
// restart time, resident memory and idle CPU.
package partitions

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

var full = flag.Bool("partitions.full", false, "10,000 partitions at the machine's open-file limit (several minutes)")

func TestMain(m *testing.M) { testproc.Main(m) }

// size is the partition count and the broker's log.max.open.files (0:
// its default, a quarter of the open-file limit).
func size() (parts, maxOpenFiles int) {
	if *full {
		return 10000, 0
	}
	return 3000, 200
}

// slackFDs is what a broker holds open besides segment files: listeners,
// client and raft connections, the data-dir lock, checkpoints being
// written.
const slackFDs = 100

// options are the broker's options for a log.max.open.files of n.
func options(t *testing.T, n int) testproc.Options {
	if n == 0 {
		return testproc.Options{}
	}
	cfg := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("log.max.open.files=%d\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return testproc.Options{ExtraArgs: []string{"--config", cfg}}
}

// procStat returns a process's resident bytes and CPU seconds so far.
func procStat(t *testing.T, pid int) (rss int64, cpu float64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields after the command: state is [0]; utime [11], stime [12],
	// rss (pages) [21].
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	pages, _ := strconv.ParseInt(fields[21], 10, 64)
	return pages * int64(os.Getpagesize()), (ut + st) / 100 // USER_HZ
}

// openFDs counts a process's open descriptors.
func openFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitAllLed waits until the node leads every partition of topic and
// returns how long that took.
func waitAllLed(t *testing.T, adm *kadm.Client, topic string, parts int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		td, err := adm.ListTopics(ctx, topic)
		cancel()
		if err == nil {
			if d, ok := td[topic]; ok && d.Err == nil && len(d.Partitions) == parts {
				led := 0
				for _, p := range d.Partitions {
					if p.Leader >= 0 && p.Err == nil {
						led++
					}
				}
				if led == parts {
					return time.Since(start)
				}
			}
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not every partition led after %v (last err %v)", topic, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logPhases logs the broker's own account of its last start: when it
// served, opened its partitions and took leadership.
func logPhases(t *testing.T, p *testproc.Proc) {
	t.Helper()
	lines := strings.Split(p.LogTail(40), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "=== testproc: start") {
			lines = lines[i:]
			break
		}
	}
	for _, l := range lines {
		for _, k := range []string{"sluice serving", "partitions opened", "leadership changed"} {
			if strings.Contains(l, k) {
				t.Log(strings.TrimSpace(l))
			}
		}
	}
}

// produceEach writes one record to every partition and checks each
// acknowledgement.
func produceEach(t *testing.T, cl *kgo.Client, topic string, parts int, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, parts)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i), Value: []byte(tag + strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", tag, err)
	}
}

// consumeAll reads want records per partition from every partition and
// checks each partition's values.
func consumeAll(t *testing.T, addr, topic string, parts int, tags []string) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for i := range parts {
		offsets[int32(i)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got := make([][]string, parts)
	n, want := 0, parts*len(tags)
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", n, want, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p, vals := range got {
		if len(vals) != len(tags) {
			t.Fatalf("partition %d: %d records %q, want %d", p, len(vals), vals, len(tags))
		}
		for i, tag := range tags {
			if w := tag + strconv.Itoa(p); vals[i] != w {
				t.Fatalf("partition %d record %d = %q, want %q", p, i, vals[i], w)
			}
		}
	}
}

// TestManyPartitionsOneNode: one CreateTopics for thousands of
// partitions on a node whose open-file limit is far below three files per
// partition; every partition takes a write and serves it back; the node
// restarts (SIGKILL, and again after a clean stop) and serves them all;
// descriptors stay bounded throughout.
func TestManyPartitionsOneNode(t *testing.T) {
	parts, maxOpen := size()
	p := testproc.Start(t, options(t, maxOpen))
	cl := p.Client(t, kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(parts+1))
	adm := kadm.NewClient(cl)
	const topic = "big"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	resp, err := adm.CreateTopic(ctx, int32(parts), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %d partitions: %v", parts, err)
	}
	led := waitAllLed(t, adm, topic, parts, 5*time.Minute)
	t.Logf("created %d partitions: %v (all led after %v more)", parts, time.Since(t0).Round(time.Millisecond), led.Round(time.Millisecond))
	produceEach(t, cl, topic, parts, "a")
	consumeAll(t, p.Addr(), topic, parts, []string{"a"})

	// 20,000 more in one request: refused whole (more than a request may
	// create), nothing created, and the node keeps serving.
	const more = 20000
	resp, err = adm.CreateTopic(ctx, more, 1, nil, "bigger")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("create %d more partitions: %v, want POLICY_VIOLATION", more, err)
	}
	if td, err := adm.ListTopics(ctx, "bigger"); err != nil || td.Has("bigger") {
		t.Fatalf("refused topic listed: %v %v", td, err)
	}
	fds := openFDs(t, p.Pid())
	t.Logf("open descriptors after writing and reading every partition: %d", fds)
	if maxOpen > 0 && fds > maxOpen+slackFDs {
		t.Fatalf("%d descriptors open with log.max.open.files=%d", fds, maxOpen)
	}
	cl.Close()

	// Idle: resident memory and CPU over a few seconds.
	rss, cpu0 := procStat(t, p.Pid())
	idle := 5 * time.Second
	time.Sleep(idle)
	_, cpu1 := procStat(t, p.Pid())
	t.Logf("idle with %d partitions: rss %d MiB, cpu %.2f%% of a core over %v", parts, rss>>20, 100*(cpu1-cpu0)/idle.Seconds(), idle)

	// SIGKILL and restart: recovery of every partition.
	p.Kill()
	t0 = time.Now()
	p.Restart()
	cl = p.Client(t, kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(parts+1))
	adm = kadm.NewClient(cl)
	waitAllLed(t, adm, topic, parts, 5*time.Minute)
	t.Logf("restart after SIGKILL to every partition led: %v", time.Since(t0).Round(time.Millisecond))
	logPhases(t, p)
	produceEach(t, cl, topic, parts, "b")
	cl.Close()

	// Clean stop and restart: clean-shutdown markers skip recovery.
	t1 := time.Now()
	p.Stop()
	t.Logf("clean stop (SIGTERM to exit): %v", time.Since(t1).Round(time.Millisecond))
	t0 = time.Now()
	p.Restart()
	cl = p.Client(t)
	adm = kadm.NewClient(cl)
	waitAllLed(t, adm, topic, parts, 5*time.Minute)
	t.Logf("restart after a clean stop to every partition led: %v", time.Since(t0).Round(time.Millisecond))
	logPhases(t, p)
	consumeAll(t, p.Addr(), topic, parts, []string{"a", "b"})
	rss, _ = procStat(t, p.Pid())
	fds = openFDs(t, p.Pid())
	t.Logf("after restart: rss %d MiB, %d descriptors", rss>>20, fds)
	if maxOpen > 0 && fds > maxOpen+slackFDs {
		t.Fatalf("%d descriptors open with log.max.open.files=%d", fds, maxOpen)
	}
}
