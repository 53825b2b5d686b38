package handler

// The share groups' dead-letter queue (KIP-1191; Kafka's
// ShareGroupDLQStateManager): a share partition whose group names a
// dead-letter topic (errors.deadletterqueue.topic.name, share.version 2)
// hands the records a member rejected, and those archived at
// share.delivery.count.limit, to the deadLetterWriter of this node (a
// share.DeadLetterSink). The writer copies each run to the topic through
// the broker's own Produce path (acks=all, to the partition's leader over
// the inter-broker peer clients, this node included), retrying, and then
// archives the run in its share partition (share.Partition.FinishArchiving).
// The share partition holds the records Archiving meanwhile, persisted, so
// SPSO waits for the copy and a new leader copies them again: the copy is
// at least once, and a retried produce whose first answer was lost may
// write a record twice (the produce is not idempotent, as Kafka's is not).

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/share"
)

// The dead-letter context headers of Kafka's ShareGroupDLQStateManager.
const (
	dlqHeaderTopic         = "__dlq.errors.topic"
	dlqHeaderPartition     = "__dlq.errors.partition"
	dlqHeaderOffset        = "__dlq.errors.offset"
	dlqHeaderGroup         = "__dlq.errors.group"
	dlqHeaderDeliveryCount = "__dlq.errors.delivery.count"
	dlqHeaderMessage       = "__dlq.errors.message"
)

const (
	// deadLetterQueueSize bounds the runs waiting for the writer; a run
	// that finds the queue full is archived without a copy (logged and
	// counted). Kafka's queue is unbounded; sluice bounds the memory.
	deadLetterQueueSize = 1024
	// deadLetterAttempts, deadLetterBackoff and deadLetterMaxBackoff are
	// the retries of one run: Kafka's ShareGroupDLQStateManager
	// MAX_REQUEST_ATTEMPTS, REQUEST_BACKOFF_MS and REQUEST_BACKOFF_MAX_MS
	// (5 attempts, 1 s doubling to 30 s).
	deadLetterAttempts   = 5
	deadLetterBackoff    = time.Second
	deadLetterMaxBackoff = 30 * time.Second
	// deadLetterReadBytes is the most read from the source log at a time
	// to copy records (Kafka's DLQ_MAX_FETCH_BYTES).
	deadLetterReadBytes = 1 << 20
	// deadLetterClientID is the peer client id of the writer's produces.
	deadLetterClientID = "sluice-share-dlq"
)

// DeadLetterStats counts the dead-letter writer's work.
type DeadLetterStats struct {
	// Records is the records written to dead-letter topics.
	Records int64
	// Produces is the produce requests that wrote them.
	Produces int64
	// Failed is the records archived without a copy after the checks or
	// the retries failed.
	Failed int64
	// Dropped is the records archived without a copy because the queue
	// was full.
	Dropped int64
}

// deadLetterWriter is this node's share.DeadLetterSink: one goroutine,
// started on the first run, writes the queued runs one at a time.
type deadLetterWriter struct {
	h     *Handlers
	start sync.Once
	queue chan share.DeadLetter
	stop  chan struct{}
	done  chan struct{}
	// ctx ends at close, cutting a produce short.
	ctx    context.Context
	cancel context.CancelFunc
	// backoff is the first retry's wait (deadLetterBackoff; tests shorten it).
	backoff                            time.Duration
	records, produces, failed, dropped atomic.Int64
}

func newDeadLetterWriter(h *Handlers) *deadLetterWriter {
	ctx, cancel := context.WithCancel(context.Background())
	return &deadLetterWriter{h: h, queue: make(chan share.DeadLetter, deadLetterQueueSize),
		stop: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel, backoff: deadLetterBackoff}
}

// Enqueue implements share.DeadLetterSink.
func (w *deadLetterWriter) Enqueue(dl share.DeadLetter) bool {
	w.start.Do(func() { go w.run() })
	select {
	case <-w.stop:
		return false // closing: archived without a copy
	default:
	}
	select {
	case w.queue <- dl:
		return true
	default:
	}
	w.dropped.Add(dl.Last - dl.First + 1)
	metrics.ShareDLQRecords.WithLabelValues("dropped").Add(float64(dl.Last - dl.First + 1))
	w.h.b.Logger().Warn("share dead-letter queue full: records archived without a copy",
		"group", dl.Key.Group, "partition", dl.Key.Partition, "first", dl.First, "last", dl.Last)
	return false
}

// close stops the writer; runs still queued stay Archiving in their share
// partitions (persisted), so the next leader copies them.
func (w *deadLetterWriter) close() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	w.cancel()
	started := true
	w.start.Do(func() { started = false })
	if started {
		<-w.done
	}
}

// stats returns the writer's counters.
func (w *deadLetterWriter) stats() DeadLetterStats {
	return DeadLetterStats{Records: w.records.Load(), Produces: w.produces.Load(), Failed: w.failed.Load(), Dropped: w.dropped.Load()}
}

// run writes the queued runs until close.
func (w *deadLetterWriter) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case dl := <-w.queue:
			if err := w.write(dl); err != nil {
				w.failed.Add(dl.Last - dl.First + 1)
				metrics.ShareDLQRecords.WithLabelValues("failed").Add(float64(dl.Last - dl.First + 1))
				w.h.b.Logger().Warn("share dead-letter copy failed: records archived without a copy",
					"group", dl.Key.Group, "partition", dl.Key.Partition, "first", dl.First, "last", dl.Last, "err", err)
			}
			select {
			case <-w.stop:
				return // the records stay Archiving: the next leader copies them
			default:
			}
			ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
			if err := dl.Partition.FinishArchiving(ctx, dl.First, dl.Last); err != nil {
				w.h.b.Logger().Debug("share dead-letter: archiving not persisted", "group", dl.Key.Group, "err", err)
			}
			cancel()
		}
	}
}

// errDLQConfig is a dead-letter topic the checks refuse: not retried.
var errDLQConfig = errors.New("dead-letter topic")

// write copies dl to its group's dead-letter topic, retrying what may
// pass (Kafka's ProduceRequestHandler): the checks of
// ShareGroupDLQStateManager.validateDlqTopic, the topic's creation when
// errors.deadletterqueue.auto.create.topics.enable, and the produces.
func (w *deadLetterWriter) write(dl share.DeadLetter) error {
	wait := w.backoff
	var err error
	for attempt := 1; ; attempt++ {
		if err = w.writeOnce(dl); err == nil || errors.Is(err, errDLQConfig) || attempt >= deadLetterAttempts {
			return err
		}
		select {
		case <-w.stop:
			return err
		case <-clock.After(w.h.b.Clock(), wait):
		}
		wait = min(2*wait, deadLetterMaxBackoff)
	}
}

// dlqTarget is where one run goes.
type dlqTarget struct {
	topic     string
	partition int32
	leader    int32
	maxBytes  int64
	copy      bool
}

// target checks group's dead-letter settings against the metadata, in
// Kafka's order and with its messages, creating a missing topic when the
// cluster allows it.
func (w *deadLetterWriter) target(group string, sourcePartition int32) (dlqTarget, error) {
	b := w.h.b
	im := b.Image()
	if im.ShareVersion() < metadata.ShareVersionDLQ {
		return dlqTarget{}, fmt.Errorf("%w: share.version %d has no dead-letter queues", errDLQConfig, im.ShareVersion())
	}
	topic, _ := b.GroupConfig(group, config.DLQTopicNameConfig)
	topic = strings.TrimSpace(topic)
	if topic == "" {
		return dlqTarget{}, fmt.Errorf("%w: Configured DLQ topic name in share group: %s is empty.", errDLQConfig, group)
	}
	if err := metadata.CheckDLQTopic(im, group, topic, metadata.DLQTopicPrefix(im, b.Config())); err != nil {
		return dlqTarget{}, fmt.Errorf("%w: %v", errDLQConfig, err)
	}
	cp, _ := b.GroupConfig(group, config.DLQCopyRecordConfig)
	t := im.Topics[topic]
	if t == nil {
		auto, ok := im.BrokerConfigs[""][config.DLQAutoCreateConfig]
		if !ok {
			auto, _, _ = b.Config().Lookup(config.DLQAutoCreateConfig)
		}
		if !strings.EqualFold(strings.TrimSpace(auto), "true") {
			return dlqTarget{}, fmt.Errorf("%w: DLQ topic does not exist and auto create is disabled on cluster for share group: %s, topic: %s.", errDLQConfig, group, topic)
		}
		// Kafka creates it with the default partitions and replication
		// factor, open to groups, its timestamps the writer's.
		err := b.CreateTopic(topic, -1, -1, map[string]string{config.DLQGroupEnableConfig: "true", "message.timestamp.type": "CreateTime"}, false)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return dlqTarget{}, fmt.Errorf("creating %s: %w", topic, err)
		}
		if t = b.Image().Topics[topic]; t == nil {
			return dlqTarget{}, fmt.Errorf("%s: %w", topic, kerr.UnknownTopicOrPartition)
		}
	}
	if len(t.Partitions) == 0 {
		return dlqTarget{}, fmt.Errorf("%s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	// Kafka's partition: the source partition modulo the topic's count.
	p := sourcePartition % int32(len(t.Partitions))
	leader := t.Partitions[p].Leader
	if leader < 0 {
		return dlqTarget{}, fmt.Errorf("%s/%d: %w", topic, p, kerr.LeaderNotAvailable)
	}
	return dlqTarget{topic: topic, partition: p, leader: leader, maxBytes: b.TopicConfig(t).Int64("max.message.bytes"),
		copy: strings.EqualFold(strings.TrimSpace(cp), "true")}, nil
}

// writeOnce makes one attempt at writing dl.
func (w *deadLetterWriter) writeOnce(dl share.DeadLetter) error {
	tg, err := w.target(dl.Key.Group, dl.Key.Partition)
	if err != nil {
		return err
	}
	b := w.h.b
	source, ok := b.TopicName(metadata.UUID(dl.Key.TopicID))
	if !ok {
		source = base64.RawURLEncoding.EncodeToString(dl.Key.TopicID[:]) // as Kafka prints a Uuid
	}
	var kvs map[int64]batch.KV
	if tg.copy && ok {
		kvs = w.sourceRecords(source, dl)
	}
	recs := make([]kmsg.Record, 0, dl.Last-dl.First+1)
	for o := dl.First; o <= dl.Last; o++ {
		r := kmsg.NewRecord()
		if kv, ok := kvs[o]; ok {
			r.Key, r.Value = kv.Key, kv.Value
		}
		hd := func(k, v string) { r.Headers = append(r.Headers, kmsg.Header{Key: k, Value: []byte(v)}) }
		hd(dlqHeaderTopic, source)
		hd(dlqHeaderPartition, strconv.Itoa(int(dl.Key.Partition)))
		hd(dlqHeaderOffset, strconv.FormatInt(o, 10))
		hd(dlqHeaderGroup, dl.Key.Group)
		hd(dlqHeaderDeliveryCount, strconv.Itoa(int(dl.DeliveryCount)))
		if m := dl.Cause.Message(); m != "" {
			hd(dlqHeaderMessage, m)
		}
		recs = append(recs, r)
	}
	for _, bt := range encodeDeadLetters(recs, b.Now().UnixMilli(), tg.maxBytes) {
		if err := w.produce(tg, bt); err != nil {
			return err
		}
		w.produces.Add(1)
		metrics.ShareDLQProduces.Inc()
	}
	w.records.Add(int64(len(recs)))
	metrics.ShareDLQRecords.WithLabelValues("written").Add(float64(len(recs)))
	return nil
}

// produce sends one batch to the target partition's leader, acks=all.
func (w *deadLetterWriter) produce(tg dlqTarget, records []byte) error {
	cl, err := w.h.b.Peer(tg.leader, deadLetterClientID)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tg.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = tg.partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(w.ctx, 40*time.Second)
	defer cancel()
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return err
	}
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			if p.Partition == tg.partition {
				return kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return kerr.UnknownServerError
}

// sourceRecords reads the keys and values of dl's offsets from the source
// partition on this node (its leader): offsets no longer in the log
// (retention passed them) are left out, and their dead-letter records
// carry the headers only, as Kafka's.
func (w *deadLetterWriter) sourceRecords(topic string, dl share.DeadLetter) map[int64]batch.KV {
	p, err := w.h.b.Partition(topic, dl.Key.Partition)
	if err != nil {
		return nil
	}
	out := map[int64]batch.KV{}
	for from := dl.First; from <= dl.Last; {
		res, slice, err := p.Fetch(replica.FetchRequest{ReplicaID: -1, BrokerEpoch: -1, CurrentLeaderEpoch: -1,
			FetchOffset: from, LastFetchedEpoch: -1, LogStartOffset: -1}, deadLetterReadBytes, true)
		if err != nil || res.Error != 0 || slice.Size == 0 {
			return out
		}
		data, err := slice.AppendTo(nil)
		if err != nil {
			return out
		}
		next := from
		for rest := data; len(rest) > 0; {
			hd, bt, more, err := batch.Next(rest)
			if err != nil {
				break
			}
			rest = more
			next = max(next, hd.NextOffset())
			if hd.IsControl() {
				continue
			}
			_ = batch.Records(bt, func(r batch.Record) bool {
				if o := hd.BaseOffset + int64(r.OffsetDelta); o >= dl.First && o <= dl.Last {
					out[o] = batch.KV{Key: clone(r.Key), Value: clone(r.Value)}
				}
				return true
			})
		}
		if next <= from {
			return out
		}
		from = next
	}
	return out
}

// clone copies b, keeping nil.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// encodeDeadLetters packs recs into uncompressed v2 batches of no
// producer, timestamped ts, each at most maxBytes unless one record alone
// is larger (it goes alone, and the leader answers for it), as Kafka's
// topicProduceData splits a run over several produce requests.
func encodeDeadLetters(recs []kmsg.Record, ts int64, maxBytes int64) [][]byte {
	const overhead = 61 // a v2 batch's header
	var out [][]byte
	var cur []kmsg.Record
	size := int64(overhead)
	flush := func() {
		if len(cur) > 0 {
			out = append(out, encodeBatch(cur, ts))
		}
		cur, size = nil, overhead
	}
	// sized sets r's offset delta and its length, the size of its body.
	sized := func(r *kmsg.Record, delta int) int64 {
		r.OffsetDelta, r.Length = int32(delta), 0
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		return int64(len(r.AppendTo(nil)))
	}
	for _, r := range recs {
		n := sized(&r, len(cur))
		if len(cur) > 0 && size+n > maxBytes {
			flush()
			n = sized(&r, 0)
		}
		cur = append(cur, r)
		size += n
	}
	flush()
	return out
}

// encodeBatch builds one batch of recs (their offset deltas and lengths
// set), as batch.Encode does for records without headers.
func encodeBatch(recs []kmsg.Record, ts int64) []byte {
	var raw []byte
	for _, r := range recs {
		raw = r.AppendTo(raw)
	}
	bt := kmsg.NewRecordBatch()
	bt.Magic = 2
	bt.LastOffsetDelta = int32(len(recs) - 1)
	bt.FirstTimestamp, bt.MaxTimestamp = ts, ts
	bt.ProducerID, bt.ProducerEpoch, bt.FirstSequence = -1, -1, -1
	bt.NumRecords = int32(len(recs))
	bt.Records = raw
	out := bt.AppendTo(nil)
	// The batch length (after the base offset) and the CRC (from the
	// attributes on) of the v2 format.
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], batch.ComputeCRC(out))
	return out
}
