// Command sluice-bench measures produce and consume throughput and produce
// latency against a running Kafka-compatible broker, with franz-go.
//
//	sluice-bench --brokers 127.0.0.1:9092 --records 1000000 --size 100 --acks 1
//
// It creates a fresh topic (or uses --topic), produces --records records of
// --size bytes as fast as the client allows (or at --rate records/s),
// recording each record's time from Produce to acknowledgement, then
// consumes them all back (with --share: by a classic group, then by a
// share group acknowledging every record; share.go). Results are printed as text and, with --json, as
// one JSON object. Run it against Kafka and sluice in the same session to
// get a ratio: these machines are shared and absolute numbers drift.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	Records          int     `json:"records"`
	RecordBytes      int     `json:"recordBytes"`
	Acks             string  `json:"acks"`
	Partitions       int     `json:"partitions"`
	Compression      string  `json:"compression"`
	ProduceSeconds   float64 `json:"produceSeconds"`
	ProduceRecPerSec float64 `json:"produceRecordsPerSec"`
	ProduceMBPerSec  float64 `json:"produceMBPerSec"`
	LatencyP50Ms     float64 `json:"latencyP50Ms"`
	LatencyP99Ms     float64 `json:"latencyP99Ms"`
	LatencyP999Ms    float64 `json:"latencyP999Ms"`
	LatencyMaxMs     float64 `json:"latencyMaxMs"`
	Errors           int64   `json:"errors"`
	ConsumeSeconds   float64 `json:"consumeSeconds"`
	ConsumeRecPerSec float64 `json:"consumeRecordsPerSec"`
	ConsumeMBPerSec  float64 `json:"consumeMBPerSec"`
	LoopbackMBPerSec float64 `json:"loopbackMBPerSec,omitempty"`
}

func main() {
	run()
	os.Exit(exitCode)
}

func run() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	tlsCA := flag.String("tls-ca", "", "PEM CA file: connect over TLS (an SSL listener) trusting these certificates")
	topic := flag.String("topic", "", "topic (default: a new sluice-bench-<time> topic, deleted at the end unless --keep-topic); a named topic that does not exist is created with --partitions and --replication-factor and kept")
	partitions := flag.Int("partitions", 3, "partitions of a created topic")
	rf := flag.Int("replication-factor", 1, "replication factor of a created topic")
	records := flag.Int("records", 1_000_000, "records to produce")
	size := flag.Int("size", 100, "record value size in bytes")
	acks := flag.String("acks", "1", "acks: 0, 1 or all")
	compression := flag.String("compression", "none", "none, gzip, snappy, lz4 or zstd")
	lingerMs := flag.Int("linger-ms", 0, "producer linger in ms")
	batchBytes := flag.Int("batch-bytes", 1<<20, "max producer batch bytes")
	idempotent := flag.Bool("idempotent", false, "idempotent producer (requires acks=all)")
	rate := flag.Int("rate", 0, "records per second to produce (0: as fast as possible); latency is only meaningful below saturation")
	consume := flag.Bool("consume", true, "consume the records back and measure")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	timeout := flag.Duration("timeout", 10*time.Minute, "overall time limit")
	keepTopic := flag.Bool("keep-topic", false, "keep the topic this run created (by default it is deleted at the end)")
	rawFetch := flag.Bool("raw-fetch", false, "consume with plain Fetch requests, counting batches without decoding records (what the broker serves, not what franz-go parses)")
	loopback := flag.Bool("loopback", false, "also measure this machine's loopback TCP rate (MB/s), the ceiling for consume throughput")
	warmup := flag.Int("warmup", 0, "records produced (and acknowledged) before the timed run, so that a new topic's first writes do not count; the consume phase reads them too")
	txnRecords := flag.Int("txn-records", 0, "records per transaction: produce with a transactional producer (acks=all), committing every N records (0: not transactional)")
	shareBench := flag.Bool("share", false, "consume the records produced with a classic consumer group of --group-members members, then with a share group (KIP-932) of as many members acknowledging every record (accept), and print both rates (from the first record received to the last) and their ratio")
	groupMembers := flag.Int("group-members", 3, "members of each group with --share")
	ctp := flag.Bool("ctp", false, "measure end-to-end consume-transform-produce latency instead (records at --rate through a GroupTransactSession; docs/transactions.md)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	seeds := strings.Split(*brokers, ",")
	if *tlsCA != "" {
		cfg, err := tlsConfig(*tlsCA)
		check(err)
		clientTLS = cfg
		dialOpts = append(dialOpts, kgo.DialTLSConfig(cfg))
	}
	if *topic == "" {
		*topic = fmt.Sprintf("sluice-bench-%d", time.Now().UnixNano())
		createTopic(ctx, seeds, *topic, *partitions, *rf)
		if !*keepTopic {
			defer deleteTopic(seeds, *topic)
		}
	} else if !topicExists(ctx, seeds, *topic) {
		// A named topic that does not exist is created with --partitions
		// and --replication-factor and kept: measuring against a missing
		// topic would only count UNKNOWN_TOPIC_OR_PARTITION errors.
		createTopic(ctx, seeds, *topic, *partitions, *rf)
	}
	if *ctp {
		if *rate <= 0 {
			*rate = 1000
		}
		value := make([]byte, *size)
		r, err := consumeTransformProduce(ctx, append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, dialOpts...), *partitions, *records, *rate, value)
		check(err)
		if *asJSON {
			json.NewEncoder(os.Stdout).Encode(r)
			return
		}
		fmt.Printf("consume-transform-produce: %d records at %d/s: end-to-end latency p50 %.2f ms p99 %.2f ms max %.2f ms\n",
			r.Records, r.Rate, r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs)
		return
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(*topic),
		kgo.ProducerLinger(time.Duration(*lingerMs) * time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(*batchBytes)),
		kgo.MaxBufferedRecords(1 << 20),
		kgo.ProducerBatchCompression(codec(*compression)),
	}
	base := append([]kgo.Opt(nil), opts...) // before the acks options
	switch *acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if !*idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	default:
		check(fmt.Errorf("bad --acks %q", *acks))
	}
	cl, err := kgo.NewClient(append(opts, dialOpts...)...)
	check(err)
	defer cl.Close()

	res := result{Records: *records, RecordBytes: *size, Acks: *acks, Partitions: *partitions, Compression: *compression}
	value := make([]byte, *size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	if *warmup > 0 {
		for i := 0; i < *warmup; i++ {
			cl.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		check(cl.Flush(ctx))
	}
	if *txnRecords > 0 {
		el, tl, err := produceTransactional(ctx, append(base, dialOpts...), *records, *txnRecords, value)
		check(err)
		res.Acks = fmt.Sprintf("all, transactions of %d", *txnRecords)
		res.ProduceSeconds = el.Seconds()
		res.ProduceRecPerSec = float64(*records) / res.ProduceSeconds
		res.ProduceMBPerSec = float64(*records) * float64(*size) / res.ProduceSeconds / 1e6
		sort.Slice(tl, func(a, b int) bool { return tl[a] < tl[b] })
		pct := func(p float64) float64 { return float64(tl[int(p*float64(len(tl)-1))].Microseconds()) / 1000 }
		res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyP999Ms, res.LatencyMaxMs = pct(0.5), pct(0.99), pct(0.999), pct(1)
		if *asJSON {
			json.NewEncoder(os.Stdout).Encode(res)
			return
		}
		fmt.Printf("produce: %d records of %d B, acks=%s, %s: %.0f rec/s, %.1f MB/s, latency p50 %.2f ms p99 %.2f ms\n",
			res.Records, res.RecordBytes, res.Acks, res.Compression, res.ProduceRecPerSec, res.ProduceMBPerSec, res.LatencyP50Ms, res.LatencyP99Ms)
		return
	}
	lat := make([]time.Duration, *records)
	var errs int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(*records)
	start := time.Now()
	for i := 0; i < *records; i++ {
		if *rate > 0 {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(*rate))); d > 0 {
				time.Sleep(d)
			}
		}
		sent := time.Now()
		i := i
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(sent)
			if err != nil {
				mu.Lock()
				errs++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	res.ProduceSeconds = time.Since(start).Seconds()
	res.Errors = errs
	res.ProduceRecPerSec = float64(*records) / res.ProduceSeconds
	res.ProduceMBPerSec = float64(*records) * float64(*size) / res.ProduceSeconds / 1e6
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyP999Ms, res.LatencyMaxMs = pct(0.5), pct(0.99), pct(0.999), pct(1)

	if *shareBench {
		defer func() {
			if errs > 0 {
				fmt.Fprintf(os.Stderr, "sluice-bench: %d of %d records failed; first error: %v\n", errs, *records, firstErr)
				exitCode = 1
			}
		}()
		sr, err := benchShare(ctx, append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, dialOpts...), *topic, *warmup+*records-int(errs), *groupMembers)
		check(err)
		if *asJSON {
			json.NewEncoder(os.Stdout).Encode(struct {
				result
				Share shareResult `json:"share"`
			}{res, sr})
			return
		}
		fmt.Printf("produce: %d records of %d B, acks=%s: %.0f rec/s\n", res.Records, res.RecordBytes, res.Acks, res.ProduceRecPerSec)
		fmt.Printf("classic group, %d members: %.0f rec/s (%.2f s after the first record, which took %.2f s)\n",
			sr.Members, sr.ClassicRecPerSec, sr.ClassicSeconds, sr.ClassicFirstSecs)
		fmt.Printf("share group, %d members, an accept per record: %.0f rec/s (%.2f s after the first record, which took %.2f s; %d redelivered, %d acknowledgement errors)\n",
			sr.Members, sr.ShareRecPerSec, sr.ShareSeconds, sr.ShareFirstSecs, sr.ShareRedeliveries, sr.ShareAckErrors)
		fmt.Printf("share / classic: %.2f\n", sr.ShareOverClassic)
		return
	}
	if *consume && *rawFetch {
		got, bytes, secs, err := rawConsume(ctx, seeds, *topic, *warmup+*records-int(errs))
		check(err)
		res.ConsumeSeconds = secs
		res.ConsumeRecPerSec = float64(got) / secs
		res.ConsumeMBPerSec = float64(bytes) / secs / 1e6
	} else if *consume {
		cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(*topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(16 << 20)}, dialOpts...)...)
		check(err)
		want := *warmup + *records - int(errs)
		got := 0
		start := time.Now()
		for got < want && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachError(func(t string, p int32, err error) { fmt.Fprintln(os.Stderr, "fetch error:", t, p, err) })
			got += fs.NumRecords()
		}
		res.ConsumeSeconds = time.Since(start).Seconds()
		res.ConsumeRecPerSec = float64(got) / res.ConsumeSeconds
		res.ConsumeMBPerSec = float64(got) * float64(*size) / res.ConsumeSeconds / 1e6
		cons.Close()
	}
	if *loopback {
		res.LoopbackMBPerSec, err = loopbackMBPerSec(2 * time.Second)
		check(err)
	}
	defer func() {
		// A run with failed records is no measurement: say why and exit
		// non-zero (after the deferred topic deletion).
		if errs > 0 {
			fmt.Fprintf(os.Stderr, "sluice-bench: %d of %d records failed; first error: %v\n", errs, *records, firstErr)
			exitCode = 1
		}
	}()
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	fmt.Printf("produce: %d records of %d B, acks=%s, %s: %.0f rec/s, %.1f MB/s, latency p50 %.2f ms p99 %.2f ms p99.9 %.2f ms max %.2f ms, errors %d\n",
		res.Records, res.RecordBytes, res.Acks, res.Compression, res.ProduceRecPerSec, res.ProduceMBPerSec,
		res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyP999Ms, res.LatencyMaxMs, res.Errors)
	if *consume {
		fmt.Printf("consume: %.0f rec/s, %.1f MB/s\n", res.ConsumeRecPerSec, res.ConsumeMBPerSec)
	}
	if *loopback {
		fmt.Printf("loopback TCP: %.1f MB/s\n", res.LoopbackMBPerSec)
	}
}

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// exitCode is the status main exits with once its deferred cleanup ran.
var exitCode int

// deleteTopic removes the topic a run created (best effort).
// createTopic creates topic with the given partitions and replication
// factor, or exits.
func createTopic(ctx context.Context, seeds []string, topic string, partitions, rf int) {
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, dialOpts...)...)
	check(err)
	defer adm.Close()
	resp, err := kadm.NewClient(adm).CreateTopics(ctx, int32(partitions), int16(rf), nil, topic)
	check(err)
	check(resp[topic].Err)
}

// topicExists reports whether the cluster has topic, or exits if it cannot
// tell.
func topicExists(ctx context.Context, seeds []string, topic string) bool {
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, dialOpts...)...)
	check(err)
	defer adm.Close()
	td, err := kadm.NewClient(adm).ListTopics(ctx, topic)
	check(err)
	return td.Has(topic)
}

func deleteTopic(seeds []string, topic string) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, dialOpts...)...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, topic); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench: deleting topic", topic+":", err)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(1)
	}
}
