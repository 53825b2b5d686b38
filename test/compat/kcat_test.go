package compat

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// kcat is librdkafka's command-line client. Its -P reads one record per
// line (key and value split by -K), -H sets the same headers on every
// record, and -C -f prints each consumed record in a format we parse.

const kcatFormat = `%p\t%o\t%k\t%s\t%h\n`

// kcatBase are the options every kcat run gets: bounded timeouts and
// librdkafka's own logs on stderr for failure messages.
func kcatBase(addr string) []string {
	return []string{"-b", addr,
		"-X", "socket.timeout.ms=10000",
		"-X", "message.timeout.ms=20000",
		"-X", "topic.metadata.refresh.interval.ms=1000",
	}
}

// kcatProduce runs kcat -P and returns its stderr, which holds
// librdkafka's "msg" debug log (one line per produce request).
func kcatProduce(t *testing.T, kcat, addr, topic, codec string, w want, extra ...string) string {
	t.Helper()
	var in strings.Builder
	for i := range w.N {
		fmt.Fprintf(&in, "%s:%s\n", w.key(i), w.value(i))
	}
	args := append(kcatBase(addr), "-P", "-t", topic, "-K", ":", "-z", codec,
		"-X", "linger.ms=5", "-X", "acks=all", "-X", "debug=msg")
	for _, h := range w.headers(0) {
		args = append(args, "-H", h.Key+"="+h.Value)
	}
	args = append(args, extra...)
	_, stderr := run2(t, 60*time.Second, in.String(), kcat, args...)
	return stderr
}

// librdkafkaFallback explains why librdkafka would send codec
// uncompressed to a broker advertising versions, or returns "" if it has
// no reason to. librdkafka before the fix for its issue #4956 (early 2025;
// Debian bookworm ships 2.0.2) only compresses with gzip/snappy/lz4 when
// the broker's Produce range includes v0, only with lz4 when FindCoordinator
// is advertised (its "LZ4" feature), and only with zstd when Produce v7 and
// Fetch v10 are in range.
func librdkafkaFallback(codec string, versions map[int16][2]int16) string {
	in := func(key, v int16) bool {
		r, ok := versions[key]
		return ok && r[0] <= v && v <= r[1]
	}
	var why []string
	switch codec {
	case "gzip", "snappy", "lz4":
		if !in(0, 0) {
			why = append(why, fmt.Sprintf("broker advertises Produce %v, not v0", versions[0]))
		}
		if _, ok := versions[10]; codec == "lz4" && !ok {
			why = append(why, "broker does not advertise FindCoordinator (librdkafka's LZ4 feature depends on it)")
		}
	case "zstd":
		if !in(0, 7) || !in(1, 10) {
			why = append(why, fmt.Sprintf("broker advertises Produce %v / Fetch %v, not Produce v7 and Fetch v10", versions[0], versions[1]))
		}
	}
	return strings.Join(why, "; ")
}

// parseKcat parses kcatFormat lines: partition, offset, key, value,
// headers (k=v,k=v).
func parseKcat(t *testing.T, out string) []msg {
	t.Helper()
	var got []msg
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("kcat -C: unparsable line %q", line)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat -C: bad partition/offset in %q", line)
		}
		m := msg{Partition: int32(p), Offset: o, Key: f[2], Value: f[3], Codec: -1}
		if f[4] != "" {
			for kv := range strings.SplitSeq(f[4], ",") {
				k, v, _ := strings.Cut(kv, "=")
				m.Headers = append(m.Headers, hdr{k, v})
			}
		}
		got = append(got, m)
	}
	return got
}

// byPartition reorders records so each partition's records are together,
// keeping their consumed order (kcat interleaves partitions).
func byPartition(got []msg) []msg {
	out := make([]msg, 0, len(got))
	parts := map[int32][]msg{}
	var order []int32
	for _, m := range got {
		if _, ok := parts[m.Partition]; !ok {
			order = append(order, m.Partition)
		}
		parts[m.Partition] = append(parts[m.Partition], m)
	}
	for _, p := range order {
		out = append(out, parts[p]...)
	}
	return out
}

// TestKcat: kcat -P with every codec (and with idempotence), read back
// with kcat -C -e -o beginning -f ..., cross-checked with franz-go.
func TestKcat(t *testing.T) {
	kcat := testproc.RequireTool(t, "kcat")
	for l := range strings.Lines(run(t, 10*time.Second, "", kcat, "-V")) {
		if strings.HasPrefix(l, "Version") {
			t.Logf("kcat %s", strings.TrimSpace(l))
		}
	}
	b := startBroker(t)
	for _, idem := range []bool{false, true} {
		for _, codec := range codecs {
			name := codec
			var extra []string
			if idem {
				name = "idempotent/" + codec
				extra = []string{"-X", "enable.idempotence=true"}
			}
			t.Run(name, func(t *testing.T) {
				topic := uniqueTopic(t)
				createTopic(t, b.Addr(), topic, 3)
				w := want{N: 2000, Prefix: "kcat-" + strings.ReplaceAll(name, "/", "-"), ConstHeaders: true}
				dbg := kcatProduce(t, kcat, b.Addr(), topic, codec, w, extra...)
				stored := codec
				if strings.Contains(dbg, "Broker does not support compression type "+codec) {
					// librdkafka decided not to compress. Accept that only
					// for its known reason; the batches must then be stored
					// uncompressed, exactly as sent.
					why := librdkafkaFallback(codec, apiVersions(t, b.Addr()))
					if why == "" {
						t.Fatalf("librdkafka sent %s batches uncompressed (\"Broker does not support compression type %s\") although the broker's ApiVersions give it no known reason to", codec, codec)
					}
					t.Logf("COMPAT GAP (not failing): librdkafka sent %s batches UNCOMPRESSED: %s (librdkafka issue #4956, fixed in newer librdkafka)", codec, why)
					stored = "none"
				}

				// 2000 records take well under a second; -e exits once every
				// partition reports end-of-partition.
				out := run(t, 20*time.Second, "", kcat, append(kcatBase(b.Addr()),
					"-C", "-t", topic, "-e", "-q", "-o", "beginning", "-f", kcatFormat)...)
				got := byPartition(parseKcat(t, out))
				verify(t, w, got)

				fr := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
				verify(t, w, fr)
				checkCodec(t, fr, stored)
				checkProducerIDs(t, fr, idem)
			})
		}
	}
}

// kcatMetadata is the JSON of kcat -L -J.
type kcatMetadata struct {
	OriginatingBroker struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"originating_broker"`
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Err        string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Err       string `json:"error"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestKcatMetadata: kcat -L (text) and -L -J (JSON) list the broker at the
// address it listens on and the topic with its partitions, leaders and ISR.
func TestKcatMetadata(t *testing.T) {
	kcat := testproc.RequireTool(t, "kcat")
	b := startBroker(t)
	topic := uniqueTopic(t)
	createTopic(t, b.Addr(), topic, 3)
	id := int32(b.NodeID())

	text := run(t, 30*time.Second, "", kcat, append(kcatBase(b.Addr()), "-L")...)
	for _, s := range []string{
		fmt.Sprintf("broker %d at %s", id, b.Addr()),
		fmt.Sprintf("topic \"%s\" with 3 partitions:", topic),
		fmt.Sprintf("partition 0, leader %d, replicas: %d, isrs: %d", id, id, id),
		fmt.Sprintf("partition 2, leader %d, replicas: %d, isrs: %d", id, id, id),
	} {
		if !strings.Contains(text, s) {
			t.Errorf("kcat -L output lacks %q:\n%s", s, text)
		}
	}

	js := run(t, 30*time.Second, "", kcat, append(kcatBase(b.Addr()), "-L", "-J", "-t", topic)...)
	var md kcatMetadata
	if err := json.Unmarshal([]byte(js), &md); err != nil {
		t.Fatalf("kcat -L -J: bad JSON: %v\n%s", err, js)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != id || md.Brokers[0].Name != b.Addr() {
		t.Errorf("kcat -L -J brokers = %+v, want one broker %d at %s", md.Brokers, id, b.Addr())
	}
	if md.ControllerID != id {
		t.Errorf("kcat -L -J controllerid = %d, want %d", md.ControllerID, id)
	}
	if md.OriginatingBroker.ID != id {
		t.Errorf("kcat -L -J originating_broker = %+v, want id %d", md.OriginatingBroker, id)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic || md.Topics[0].Err != "" {
		t.Fatalf("kcat -L -J topics = %+v, want only %s without error\n%s", md.Topics, topic, js)
	}
	parts := md.Topics[0].Partitions
	if len(parts) != 3 {
		t.Fatalf("kcat -L -J: %d partitions, want 3\n%s", len(parts), js)
	}
	seen := map[int32]bool{}
	for _, p := range parts {
		seen[p.Partition] = true
		if p.Leader != id || p.Err != "" || len(p.Replicas) != 1 || p.Replicas[0].ID != id || len(p.ISRs) != 1 || p.ISRs[0].ID != id {
			t.Errorf("kcat -L -J partition %+v: want leader %d, replicas [%d], isrs [%d], no error", p, id, id, id)
		}
	}
	if !seen[0] || !seen[1] || !seen[2] {
		t.Errorf("kcat -L -J partitions %v, want 0, 1, 2", seen)
	}
}

// TestKcatConsumesCodecs: batches written by franz-go with every codec are
// read back by kcat -C (librdkafka's decompression of what the broker
// serves), whatever codecs librdkafka itself chooses to produce with.
func TestKcatConsumesCodecs(t *testing.T) {
	kcat := testproc.RequireTool(t, "kcat")
	b := startBroker(t)
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := uniqueTopic(t)
			createTopic(t, b.Addr(), topic, 3)
			w := want{N: 2000, Prefix: "kcat-consume-" + codec}
			produceFranz(t, b.Addr(), topic, w, 30*time.Second,
				kgo.ProducerBatchCompression(franzCodec(codec)))
			fr := consumeFranz(t, b.Addr(), topic, 3, w.N, 30*time.Second)
			checkCodec(t, fr, codec)

			out := run(t, 20*time.Second, "", kcat, append(kcatBase(b.Addr()),
				"-C", "-t", topic, "-e", "-q", "-o", "beginning", "-f", kcatFormat)...)
			got := byPartition(parseKcat(t, out))
			verify(t, w, got)
		})
	}
}
