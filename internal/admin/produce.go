package admin

// sluice produce and sluice consume: Kafka's kafka-console-producer.sh and
// kafka-console-consumer.sh, on kgo.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceUsage is the usage text of `sluice produce`.
const produceUsage = `usage:
  sluice produce --topic T [--key-separator SEP] [--acks all|1|0]

Reads lines from standard input and produces one record per line (the line
without its end-of-line). With --key-separator, the text before the first
SEP is the record's key and the rest its value (Kafka's parse.key and
key.separator); a line without SEP is an error. Exits once every record is
acknowledged (--acks all by default: by every in-sync replica).

A record may be as large as --command-config's max.request.size (Kafka's
default, 1048576 bytes, if not set); a larger one is an error that names
it. The topic's max.message.bytes bounds records on the broker.
`

// consumeUsage is the usage text of `sluice consume`.
const consumeUsage = `usage:
  sluice consume --topic T [--from-beginning] [--group G] [--max-messages N] [--print-key] [--timeout 30s]

Prints each record's value on its own line (with --print-key: the key, a
tab, the value). Without --group it reads every partition, from the end (or
the beginning with --from-beginning) and commits nothing. With --group it
joins consumer group G, starts from the group's committed offsets (or, where
there are none, the end, or the beginning with --from-beginning) and commits
what it printed. Exits after --max-messages records, when no record has
come for --timeout, or on Ctrl-C. --json prints one document of records at
the end.
`

func (c *cli) produceCmd(args []string) error {
	fs, o := c.newFlags("produce", produceUsage)
	topic := fs.String("topic", "", "topic to produce to")
	sep := fs.String("key-separator", "", "split each line into key SEP value")
	acks := fs.String("acks", "all", "acknowledgement: all, 1 or 0")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *topic == "" {
		return usageErrorf(produceUsage, "produce needs --topic and no arguments")
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(*topic), kgo.ProducerLinger(5 * time.Millisecond)}
	switch *acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return usageErrorf(produceUsage, "invalid value %q for --acks: expected all, 1 or 0", *acks)
	}
	// max.request.size bounds a record as Kafka's producer bounds it
	// (KafkaProducer.ensureValidRecordSize): checked here, so that the
	// message names the property, and given to kgo.
	props, err := readCommandConfig(o.commandConfig)
	if err != nil {
		return err
	}
	limit, sizeOpts, err := maxRequestSize(props)
	if err != nil {
		return fmt.Errorf("--command-config %s: %v", o.commandConfig, err)
	}
	opts = append(opts, sizeOpts...)
	// The whole input may take longer than --timeout: only the connection
	// and each record's delivery (kgo.RecordDeliveryTimeout) are bounded.
	o.clientOpts = append(opts, kgo.RecordDeliveryTimeout(o.timeout))
	o.streaming = true
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := requireTopicsWithin(ctx, o, adm, *topic); err != nil {
			return err
		}
		var (
			mu       sync.Mutex
			firstErr error
			acked    int
		)
		done := func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				acked++
			}
		}
		in := bufio.NewReaderSize(o.stdin, 64<<10)
		n := 0
		var readErr error
		for {
			line, err := in.ReadBytes('\n')
			if len(line) > 0 {
				line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
				n++
				r := &kgo.Record{Value: line}
				if *sep != "" {
					k, v, ok := bytes.Cut(line, []byte(*sep))
					if !ok {
						readErr = fmt.Errorf("line %d has no key separator %q", n, *sep)
						break
					}
					r.Key, r.Value = k, v
				}
				if size := recordSizeUpperBound(r); size > int64(limit) {
					readErr = fmt.Errorf("line %d: the record is %d bytes when serialized, larger than max.request.size (%d bytes): raise max.request.size in --command-config (and the topic's max.message.bytes, if the record is larger than it)", n, size, limit)
					break
				}
				cl.Produce(ctx, r, done)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				readErr = fmt.Errorf("reading standard input: %v", err)
				break
			}
			if ctx.Err() != nil {
				break
			}
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("waiting for acknowledgements: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil {
			return fmt.Errorf("producing to %s: %d of %d records acknowledged: %v", *topic, acked, n, firstErr)
		}
		if readErr != nil {
			return fmt.Errorf("%v (the %d lines before it were produced)", readErr, acked)
		}
		out := struct {
			Topic   string `json:"topic"`
			Records int    `json:"records"`
		}{*topic, acked}
		if o.json {
			return o.emit(out, nil)
		}
		fmt.Fprintf(o.stderr, "Produced %d records to %s.\n", acked, *topic)
		return nil
	})
}

// recordSizeUpperBound is the largest size r can take in a record batch of
// its own: Kafka's AbstractRecords.estimateSizeInBytesUpperBound for magic
// v2 (the batch header, 61 bytes, and a record's largest overhead, 21
// bytes, besides the key, value and headers).
func recordSizeUpperBound(r *kgo.Record) int64 {
	n := int64(61 + 21 + len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(5 + len(h.Key) + 5 + len(h.Value))
	}
	return n
}

// consumedRecord is one record in `consume --json` output.
type consumedRecord struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp_ms"`
	Key       string `json:"key,omitempty"`
	Value     string `json:"value"`
}

func (c *cli) consumeCmd(args []string) error {
	fs, o := c.newFlags("consume", consumeUsage)
	topic := fs.String("topic", "", "topic to consume")
	fromBeginning := fs.Bool("from-beginning", false, "start from the log start where no offset is committed")
	group := fs.String("group", "", "consumer group to join (commits what is printed)")
	maxMessages := fs.Int("max-messages", 0, "exit after this many records (0: no limit)")
	printKey := fs.Bool("print-key", false, "print key<TAB>value")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *topic == "" {
		return usageErrorf(consumeUsage, "consume needs --topic and no arguments")
	}
	if *maxMessages < 0 {
		return usageErrorf(consumeUsage, "--max-messages must not be negative")
	}
	reset := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		reset = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(reset)}
	if *group != "" {
		// Commit only what was printed: marks, committed every 5 s, at
		// a rebalance and at the end.
		opts = append(opts, kgo.ConsumerGroup(*group), kgo.AutoCommitMarks())
	}
	o.clientOpts = opts
	o.streaming = true
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := requireTopicsWithin(ctx, o, adm, *topic); err != nil {
			return err
		}
		out := bufio.NewWriter(o.stdout)
		var recs []consumedRecord
		n := 0
		var fetchErr error
	poll:
		for *maxMessages == 0 || n < *maxMessages {
			pctx, pcancel := context.WithTimeout(ctx, o.timeout)
			fetches := cl.PollRecords(pctx, *maxMessages-n)
			idle := pctx.Err() != nil
			pcancel()
			for _, fe := range fetches.Errors() {
				if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) && !errors.Is(fe.Err, kgo.ErrClientClosed) {
					fetchErr = fmt.Errorf("fetching %s-%d: %v", fe.Topic, fe.Partition, fe.Err)
					break poll
				}
			}
			for _, r := range fetches.Records() {
				if *maxMessages > 0 && n >= *maxMessages {
					break
				}
				n++
				if o.json {
					cr := consumedRecord{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Value: string(r.Value)}
					if *printKey {
						cr.Key = string(r.Key)
					}
					recs = append(recs, cr)
				} else {
					if *printKey {
						out.Write(r.Key)
						out.WriteByte('\t')
					}
					out.Write(r.Value)
					out.WriteByte('\n')
				}
				if *group != "" {
					cl.MarkCommitRecords(r)
				}
			}
			out.Flush()
			if idle || ctx.Err() != nil {
				break
			}
		}
		if *group != "" {
			cctx, ccancel := context.WithTimeout(context.Background(), o.timeout)
			err := cl.CommitMarkedOffsets(cctx)
			ccancel()
			if err != nil && fetchErr == nil {
				fetchErr = fmt.Errorf("committing the offsets of group %s: %v", *group, err)
			}
		}
		if o.json {
			if recs == nil {
				recs = []consumedRecord{}
			}
			doc := struct {
				Topic   string           `json:"topic"`
				Records []consumedRecord `json:"records"`
			}{*topic, recs}
			if err := o.emit(doc, func(*tabwriter.Writer) {}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(o.stderr, "Processed a total of %d messages\n", n)
		}
		return fetchErr
	})
}
