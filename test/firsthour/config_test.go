package firsthour

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// runServe runs `sluice serve args...` expecting it to stop by itself
// within 20 s, and returns its exit code and stderr.
func runServe(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testproc.Build(t), append([]string{"serve"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("sluice serve %v still running after 20 s:\n%s", args, out.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInvalidConfigStops: a bad value of each type, in --config or in a
// flag, stops `sluice serve` with a non-zero status and a message naming
// the key, the value and what is expected; nothing is listened on or
// written.
func TestInvalidConfigStops(t *testing.T) {
	ports, err := testproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(ports[0])
	cases := []struct {
		props string
		flags []string
		want  string
	}{
		{props: "log.retention.ms=abc\n", want: `invalid value "abc" for log.retention.ms: expected a long`},
		{props: "num.partitions=0\n", want: `invalid value "0" for num.partitions: expected an int at least 1`},
		{props: "log.cleaner.min.cleanable.ratio=lots\n", want: `invalid value "lots" for log.cleaner.min.cleanable.ratio: expected a double`},
		{props: "auto.create.topics.enable=yes\n", want: `invalid value "yes" for auto.create.topics.enable: expected a boolean`},
		{props: "process.roles=broker,leader\n", want: `invalid value "broker,leader" for process.roles: expected a list of broker, controller`},
		{props: "compression.type=brotli\n", want: `invalid value "brotli" for compression.type: expected one of`},
		{props: "log.segment.bytes=1GB\n", want: `invalid value "1GB" for log.segment.bytes: expected an int`},
		{props: "listeners=localhost:9092\n", want: `invalid value "localhost:9092" for listeners: expected a list of NAME://host:port`},
		{flags: []string{"--node-id", "-3"}, want: `invalid value "-3" for node.id: expected an int at least 0`},
		{flags: []string{"--log-level", "loud"}, want: `invalid value "loud" for --log-level`},
		{flags: []string{"--http", "nowhere"}, want: `invalid value "nowhere" for --http: expected host:port`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		args := []string{"--listen", listen, "--data-dir", dir}
		if c.props != "" {
			args = append(args, "--config", writeFile(t, "server.properties", c.props))
		}
		args = append(args, c.flags...)
		code, out := runServe(t, args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%q %v: exit %d, want non-zero with %q; output:\n%s", c.props, c.flags, code, c.want, out)
		}
		if strings.Contains(out, "sluice serving") {
			t.Errorf("%q %v: served before failing:\n%s", c.props, c.flags, out)
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("%q %v: wrote into the data directory before failing: %v", c.props, c.flags, ents)
		}
	}
}

// TestHelpExitsZero: `serve --help` prints usage and exits 0.
func TestHelpExitsZero(t *testing.T) {
	code, out := runServe(t, "--help")
	if code != 0 || !strings.Contains(out, "usage: sluice serve") || !strings.Contains(out, "-node-id") {
		t.Fatalf("serve --help: exit %d, output:\n%s", code, out)
	}
}

// TestUnknownKeyWarns: an unknown key is a warning in Kafka's words and the
// node serves.
func TestUnknownKeyWarns(t *testing.T) {
	cfg := writeFile(t, "server.properties", "bogus.setting=1\nnum.partitions=2\n")
	p := testproc.Start(t, testproc.Options{ExtraArgs: []string{"--config", cfg}})
	produceAndRead(t, p, "unknown-key")
	log := p.LogTail(1000)
	if !strings.Contains(log, "The configuration 'bogus.setting' was supplied but isn't a known config.") || !strings.Contains(log, "level=WARN") {
		t.Fatalf("no warning for bogus.setting:\n%s", log)
	}
}

// TestKafkaServerPropertiesStarts: Kafka 4.0's stock server.properties
// (KRaft combined mode), with its ports moved to free ones and its data
// directory overridden by flags, starts a node that serves (nothing in it
// is refused), with no unknown-key warning and no warning of ignored
// settings: every setting it moves off its default (the share
// coordinator's state topic among them) is implemented.
func TestKafkaServerPropertiesStarts(t *testing.T) {
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	stock, err := os.ReadFile(filepath.Join(root, "internal", "config", "testdata", "kafka-4.0-server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	ports, err := testproc.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(":9092", fmt.Sprintf(":%d", ports[0]), ":9093", fmt.Sprintf(":%d", ports[1])).Replace(string(stock))
	text = strings.ReplaceAll(text, "localhost:", "127.0.0.1:")
	cfg := writeFile(t, "server.properties", text)
	p := testproc.Start(t, testproc.Options{ListenPort: ports[0], HTTPPort: ports[2], ExtraArgs: []string{"--config", cfg}})
	produceAndRead(t, p, "stock-kafka")
	log := p.LogTail(1000)
	if strings.Contains(log, "isn't a known config") || strings.Contains(log, "level=ERROR") {
		t.Fatalf("warnings or errors for Kafka's own file:\n%s", log)
	}
	if strings.Contains(log, `msg="settings ignored by sluice`) {
		t.Fatalf("a setting of Kafka's own file is ignored:\n%s", log)
	}
}

// produceAndRead produces one record with acks=all to an auto-created
// topic and reads it back.
func produceAndRead(t *testing.T, p *testproc.Proc, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v\n%s", err, p.LogTail(40))
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record read back: %v", err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) == "hello" {
				return
			}
		}
	}
}
