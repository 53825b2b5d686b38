package firsthour

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/testproc"
)

// devS3BasePort finds a base port whose +0, +100, +200 and +300 are free.
func devS3BasePort(t *testing.T) int {
	t.Helper()
	for range 200 {
		ps, err := testproc.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		if base0ok(ps[0]) {
			return ps[0]
		}
	}
	t.Fatal("no free base port for sluice dev --s3")
	return 0
}

// base0ok reports whether base+0, +100, +200 and +300 are free.
func base0ok(base int) bool {
	if base+300 > 65535 {
		return false
	}
	for _, off := range []int{0, 100, 200, 300} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+off))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// startDevS3 starts `sluice dev --brokers 1 --s3` on dataDir with the
// broker settings of config and waits until it is ready.
func startDevS3(t *testing.T, base int, dataDir, config string) *devRun {
	t.Helper()
	bin := testproc.Build(t)
	d := &devRun{t: t, out: &syncBuffer{}, done: make(chan error, 1), base: base}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	d.ctx = ctx
	d.cmd = exec.CommandContext(ctx, bin, "dev", "--brokers", "1", "--s3", "--base-port", strconv.Itoa(base), "--data-dir", dataDir, "--config", config)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	stdin, err := d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.stdin = stdin
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sluice dev output (tail):\n%s", d.out.tail(80))
		}
	})
	d.waitOut("ready line", regexp.MustCompile(`sluice dev: ready`), 60*time.Second)
	return d
}

// stop SIGINTs dev and waits for it to exit.
func (d *devRun) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		d.t.Fatal(err)
	}
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Fatalf("sluice dev after SIGINT: %v", err)
		}
	case <-time.After(60 * time.Second):
		d.t.Fatal("sluice dev did not exit 60 s after SIGINT")
	}
}

// TestDevS3: `sluice dev --s3` serves an S3-compatible store and turns
// tiered storage on with it: a topic with remote.storage.enable=true has
// its rolled segments copied to the bucket and deleted locally, a
// consumer reads every record back from offset 0, and after dev stops and
// starts again on the same data directory the remote log is still there
// (the store keeps its objects in the data directory).
func TestDevS3(t *testing.T) {
	dataDir := t.TempDir()
	config := filepath.Join(t.TempDir(), "fast.properties")
	if err := os.WriteFile(config, []byte("remote.log.manager.task.interval.ms=200\nlog.retention.check.interval.ms=200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := devS3BasePort(t)
	d := startDevS3(t, base, dataDir, config)
	m := d.waitOut("S3 line", regexp.MustCompile(`s3: (http://127\.0\.0\.1:\d+) bucket (\S+)`), time.Second)
	endpoint, bucket := m[1], m[2]
	if endpoint != "http://127.0.0.1:"+strconv.Itoa(base+300) {
		t.Fatalf("S3 endpoint %s, want base-port+300", endpoint)
	}
	seed := "127.0.0.1:" + strconv.Itoa(base)
	const topic, n = "tiered", 400
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx := d.ctx
	seg, local := "2048", "2048"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes": &seg, "local.retention.bytes": &local}, topic); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%05d-%s", j, strings.Repeat("x", 60)))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	store, err := objstore.NewS3(objstore.S3Options{Endpoint: endpoint, Bucket: bucket, PathStyle: true,
		AccessKeyID: "sluice-dev", SecretAccessKey: "sluice-dev", RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logs int
	deadline := time.Now().Add(60 * time.Second)
	for {
		keys, err := store.List(ctx, "")
		logs = 0
		for _, k := range keys {
			if strings.HasSuffix(k, ".log") {
				logs++
			}
		}
		lo, lerr := adm.ListOffsetsAfterMilli(ctx, -4, topic) // earliest local (KIP-405)
		localStart := int64(-1)
		if lerr == nil {
			if o, ok := lo.Lookup(topic, 0); ok && o.Err == nil {
				localStart = o.Offset
			}
		}
		if err == nil && logs >= 3 && localStart > 0 {
			t.Logf("%d log objects in the bucket, local log start %d", logs, localStart)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d log objects (%v), local log start %d (%v)", logs, err, localStart, lerr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cl.Close()
	readAll := func() {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for next := int64(0); next < n; {
			fs := c.PollFetches(rctx)
			if rctx.Err() != nil {
				t.Fatalf("read %d records of %d", next, n)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next || !strings.HasPrefix(string(r.Value), fmt.Sprintf("v%05d-", next)) {
					t.Fatalf("offset %d (want %d): %.10q", r.Offset, next, r.Value)
				}
				next++
			})
		}
	}
	readAll()
	// The broker's /metrics (its status listener, base-port+200) has the
	// tiered storage metrics of the topic (Kafka's RemoteStorageMetrics).
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(base+200) + "/metrics"
	// (The gauges are those of the remote log manager's last pass.)
	for _, name := range []string{"sluice_remote_copy_bytes_total", "sluice_remote_copy_requests_total", "sluice_remote_fetch_bytes_total",
		"sluice_remote_fetch_requests_total", "sluice_remote_log_size_bytes", "sluice_remote_log_metadata_count"} {
		v := -1.0
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if v = promValue(t, metricsURL, name+`{topic="`+topic+`"}`); v > 0 {
				break
			}
		}
		if v <= 0 {
			t.Errorf("%s{topic=%q} = %v on %s", name, topic, v, metricsURL)
		}
	}
	if v := promValue(t, metricsURL, "sluice_remote_log_reader_avg_idle_ratio"); v < 0 || v > 1 {
		t.Errorf("sluice_remote_log_reader_avg_idle_ratio = %v", v)
	}

	d.stop()
	d = startDevS3(t, base, dataDir, config)
	readAll()
	d.stop()
}

// promValue returns the value of the series named exactly series (name
// and labels as exposed) at url, -1 if it is not there.
func promValue(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q", series, line)
			}
			return f
		}
	}
	return -1
}
