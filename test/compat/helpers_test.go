// Package compat runs real Kafka clients (franz-go, sarama, kafka-go,
// kcat/librdkafka, KafkaJS) against a real `sluice serve` process and checks
// that what they produce comes back intact: every value exactly once,
// keys and headers unchanged, offsets contiguous from 0 per partition.
// The TestTxn* tests run the transactional producers of sarama, librdkafka
// (through confluent-kafka-python) and KafkaJS against a 3-node cluster
// (txn_helpers_test.go).
package compat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// codecs are the compressions every client is tried with, by their usual
// names.
var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func startBroker(t *testing.T) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, testproc.Options{})
}

var topicSeq atomic.Int64

var nonTopicChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// uniqueTopic returns a topic name unique to this test and run.
func uniqueTopic(t *testing.T) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := nonTopicChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 150 {
		name = name[:150]
	}
	return fmt.Sprintf("%s-%d-%s", strings.ToLower(name), topicSeq.Add(1), hex.EncodeToString(b[:]))
}

// createTopic creates a topic with kadm and waits until its metadata shows
// every partition with a leader.
func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopic %s: %v (%s)", topic, resp.Err, resp.ErrMessage)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td, ok := md.Topics[topic]
			if ok && td.Err == nil && len(td.Partitions) == int(partitions) {
				ready := true
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						ready = false
					}
				}
				if ready {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not ready in metadata: %v", topic, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	var perr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && perr == nil {
			perr = fmt.Errorf("partition %d: %w", o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	if perr != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, perr)
	}
	return out
}

// apiVersions returns the broker's advertised [min, max] version per API
// key.
func apiVersions(t *testing.T, addr string) map[int16][2]int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "sluice-compat"
	req.ClientSoftwareVersion = "1.0.0"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error code %d", resp.ErrorCode)
	}
	out := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// msg is one record as a client saw it when consuming.
type msg struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Headers   []hdr
	Codec     int8  // batch compression attribute, -1 if the client does not say
	PID       int64 // producer id of the batch (-1: not idempotent); franz-go only
}

// checkProducerIDs fails unless every record's batch carries a producer id
// (idempotent) or none does.
func checkProducerIDs(t *testing.T, got []msg, idempotent bool) {
	t.Helper()
	pids := map[int64]int{}
	for _, m := range got {
		pids[m.PID]++
	}
	if idempotent {
		if _, ok := pids[-1]; ok || len(pids) != 1 {
			t.Fatalf("idempotent producer: batches carry producer ids (id: records) %v, want one id >= 0", pids)
		}
		return
	}
	if len(pids) != 1 || pids[-1] == 0 {
		t.Fatalf("non-idempotent producer: batches carry producer ids (id: records) %v, want only -1", pids)
	}
}

type hdr struct{ Key, Value string }

// want describes the records a test produced: record i has value
// valueOf(i), key keyOf(i) and headers headersOf(i).
type want struct {
	N         int
	Prefix    string // distinguishes runs sharing a topic; part of every value
	NoKeys    bool
	NoHeaders bool
	// ConstHeaders: every record carries only the header src=Prefix (for
	// tools that set the same headers on every record, like kcat -H).
	ConstHeaders bool
}

func (w want) value(i int) string { return fmt.Sprintf("%s-value-%07d", w.Prefix, i) }
func (w want) key(i int) string {
	if w.NoKeys {
		return ""
	}
	return fmt.Sprintf("key-%07d", i)
}
func (w want) headers(i int) []hdr {
	if w.NoHeaders {
		return nil
	}
	if w.ConstHeaders {
		return []hdr{{"src", w.Prefix}}
	}
	return []hdr{{"idx", strconv.Itoa(i)}, {"src", w.Prefix}}
}

// index parses the record index out of a value produced by want.value.
func (w want) index(v string) (int, bool) {
	s, ok := strings.CutPrefix(v, w.Prefix+"-value-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= w.N {
		return 0, false
	}
	return i, true
}

// verify checks that got holds every wanted value exactly once, with its
// key and headers, and that each partition's offsets run 0, 1, 2, ... in
// the order consumed. It reports at most a handful of problems of each
// kind, then fails the test.
func verify(t *testing.T, w want, got []msg) {
	t.Helper()
	const maxReports = 5
	problems := 0
	report := func(format string, args ...any) {
		problems++
		if problems <= 3*maxReports {
			t.Errorf(format, args...)
		}
	}
	seen := make([]int, w.N)
	next := map[int32]int64{}
	for _, m := range got {
		if exp := next[m.Partition]; m.Offset != exp {
			report("partition %d: offset %d where %d was expected (offsets not contiguous from 0)", m.Partition, m.Offset, exp)
		}
		next[m.Partition] = m.Offset + 1
		i, ok := w.index(m.Value)
		if !ok {
			report("p%d@%d: unexpected value %q", m.Partition, m.Offset, trunc(m.Value))
			continue
		}
		seen[i]++
		if m.Key != w.key(i) {
			report("p%d@%d (record %d): key %q, want %q", m.Partition, m.Offset, i, m.Key, w.key(i))
		}
		if wh := w.headers(i); !slices.Equal(m.Headers, wh) {
			report("p%d@%d (record %d): headers %v, want %v", m.Partition, m.Offset, i, m.Headers, wh)
		}
	}
	missing, dup := 0, 0
	for i, c := range seen {
		switch {
		case c == 0:
			missing++
			if missing <= maxReports {
				report("record %d (%s) never consumed", i, w.value(i))
			}
		case c > 1:
			dup++
			if dup <= maxReports {
				report("record %d consumed %d times", i, c)
			}
		}
	}
	if problems > 0 {
		t.Fatalf("%d problems in %d consumed records (want %d): %d missing, %d duplicated", problems, len(got), w.N, missing, dup)
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// consumeFranz reads topic from the start of every partition with franz-go
// (no group) until n records have arrived, then checks that nothing more
// is in the log (end offsets sum to n).
func consumeFranz(t *testing.T, addr, topic string, partitions int32, n int, timeout time.Duration) []msg {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range partitions {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := make([]msg, 0, n)
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consume %s: got %d of %d records before timeout %v", topic, len(out), n, timeout)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Errorf("franz-go fetch %s[%d]: %v", tp, p, err)
		})
		if t.Failed() {
			t.FailNow()
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	checkEnd(t, addr, topic, n)
	return out
}

// checkEnd fails if the topic's end offsets do not add up to n.
func checkEnd(t *testing.T, addr, topic string, n int) {
	t.Helper()
	var sum int64
	ends := endOffsets(t, addr, topic)
	for _, o := range ends {
		sum += o
	}
	if sum != int64(n) {
		t.Fatalf("topic %s end offsets %v add up to %d records, want %d", topic, ends, sum, n)
	}
}

func fromKgo(r *kgo.Record) msg {
	m := msg{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
		Codec: int8(r.Attrs.CompressionType()), PID: r.ProducerID}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, hdr{h.Key, string(h.Value)})
	}
	return m
}

// run executes a command with a deadline and returns its stdout; stderr
// is included in the failure message.
func run(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	out, _ := run2(t, timeout, stdin, name, args...)
	return out
}

// run2 is run returning stderr too.
func run2(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 2 * time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var outb, errb strings.Builder
	cmd.Stdout = &outb
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v after %v (ctx: %v)\nstderr (last 4000 bytes):\n%s\nstdout (first 2000 bytes):\n%s",
			name, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), ctx.Err(),
			tail4000(errb.String()), trunc2000(outb.String()))
	}
	return outb.String(), errb.String()
}

func tail4000(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

func trunc2000(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// topicID returns a topic's id (Fetch v13+ names topics by id, KIP-516).
func topicID(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic id of %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}
