package handler

// Produce, versions 0-12, record batch v2 only: v0-2 carry message sets (magic
// 0/1), which get UNSUPPORTED_FOR_MESSAGE_FORMAT. v0 is advertised because
// librdkafka before 2.6 compresses gzip/snappy/lz4 only when it is.
//
// Each partition's records must be exactly one v2 batch. It is validated
// (size against max.message.bytes -> MESSAGE_TOO_LARGE, structure and CRC
// -> CORRUPT_MESSAGE, more than one batch or a control batch ->
// INVALID_RECORD), appended in request order on the connection's reader
// goroutine through the partition's replica machine, and acknowledged only
// once durable (the durability rule, docs/architecture.md): acks=1 once fsynced on the leader,
// acks=all once the high watermark covers it (fsynced on every ISR member,
// at least min.insync.replicas of them; NOT_ENOUGH_REPLICAS before the
// append when the ISR is too small). The wait happens in Reply.Await, so
// pipelined requests and other connections share fsyncs (group commit).
// A produce to a partition led elsewhere gets NOT_LEADER_OR_FOLLOWER. Idempotent producers are checked against the
// last five batches (duplicates get their original offsets,
// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH). acks=0 gets no
// response; an error then closes the connection, as Kafka does.
//
// A request with transactional batches needs its transactional id and
// WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a transactional
// batch opens its producer's transaction on the partition, which its
// coordinator's marker (WriteTxnMarkers) ends; read_committed consumers
// read below the first offset of the oldest one still open.
//
// Timestamps, as Kafka's leader applies them (LogValidator), in place in the
// request's buffer before the append: on a message.timestamp.type=
// LogAppendTime topic the batch gets the timestamp-type attribute bit and
// the broker's clock as its max timestamp (CRC recomputed; record deltas
// untouched; consumers report that time for every record), and the response
// carries it as LogAppendTime (-1 for CreateTime topics; a duplicate gets
// its original batch's time). On a CreateTime topic a record timestamped
// more than message.timestamp.before.max.ms in the past or after.max.ms in
// the future (message.timestamp.difference.max.ms standing in for an unset
// one) fails the partition with INVALID_TIMESTAMP, nothing appended; a
// producer's max timestamp that is not its records' largest is corrected.
// A producer may not set the LogAppendTime bit itself (INVALID_TIMESTAMP,
// unless it is a CreateTime topic and the batch has a max timestamp). A
// keyless record on a compacted topic fails the partition with
// INVALID_RECORD. These are per-record checks (produce_records.go): the
// response names every failing record in RecordErrors (v8+, KIP-467).
//
// A partition that fails once its leader is found carries its log start
// offset in LogStartOffset, as from Kafka, except for the errors Kafka
// answers with -1 (failedLogStartOffset); one that fails before (not
// authorized, unknown, led elsewhere, transaction verification) has -1.
//
// compression.type (topic; broker default compression.type), as Kafka's
// leader applies it: with "producer" (the default), or when the batch's
// codec already is the topic's ("uncompressed" is none), the batch is kept
// byte for byte. Otherwise it is rebuilt with the topic's codec
// (batch.Rebuild: same header fields, records and sequence numbers; new
// length, codec bits and CRC) after it is validated and its timestamps
// checked, before the append; the LogAppendTime stamp is then put on the
// rebuilt batch. The rebuilt size is checked again: above
// max.message.bytes MESSAGE_TOO_LARGE, above segment.bytes
// RECORD_LIST_TOO_LARGE (a batch to be rebuilt is held to segment.bytes
// only after the rebuild, as in Kafka). An idempotent retry is rebuilt
// too and then answered as a duplicate. Levels: gzip 6 and zstd about 3
// (Kafka's defaults), lz4's fast mode; the KIP-390 compression.*.level
// settings are not served.

import (
	"errors"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
)

// maxProduceTimeout caps a produce request's TimeoutMillis.
const maxProduceTimeout = 5 * time.Minute

// produceCommit is an appended partition awaiting its acknowledgement: the
// response slot at resp.Topics[ti].Partitions[pi] and the channel that
// delivers the replica machine's result.
type produceCommit struct {
	ti, pi int
	p      *broker.Partition
	result <-chan replica.ProduceResult
	slot   *kmsg.ProduceResponseTopicPartition
	// bytes and records are the batch's size and record count, added to
	// the topic's produce counters once appended.
	bytes, records int64
	// logAppendTime is the time stamped on the batch (LogAppendTime
	// topics), else -1.
	logAppendTime int64
}

// produceConfig is what a produce applies of a topic's configuration.
type produceConfig struct {
	maxBytes, segmentBytes int64
	logAppendTime          bool
	// beforeMs and afterMs bound CreateTime record timestamps around the
	// broker's clock.
	beforeMs, afterMs int64
	// codec is the codec batches are stored with when setCodec
	// (compression.type other than producer).
	codec    batch.Codec
	setCodec bool
	// compacted: cleanup.policy contains compact, so every record needs a
	// key (Kafka's LogValidator.validateKey).
	compacted bool
	// topic and partition name the partition in per-record error
	// messages (set by appendOne).
	topic     string
	partition int32
}

func produceConfigOf(tc config.TopicConfig) produceConfig {
	typ, _ := tc.Get("message.timestamp.type")
	compression, _ := tc.Get("compression.type")
	codec, setCodec := codecOf(compression)
	_, compacted := tc.CleanupPolicy()
	return produceConfig{
		compacted:     compacted,
		maxBytes:      tc.Int64("max.message.bytes"),
		segmentBytes:  tc.Int64("segment.bytes"),
		logAppendTime: typ == "LogAppendTime",
		beforeMs:      timestampBound(tc, "message.timestamp.before.max.ms"),
		afterMs:       timestampBound(tc, "message.timestamp.after.max.ms"),
		codec:         codec,
		setCodec:      setCodec,
	}
}

// codecOf maps a compression.type value to the codec it stores batches
// with; false for "producer" (keep the producer's codec).
func codecOf(compressionType string) (batch.Codec, bool) {
	switch compressionType {
	case "uncompressed":
		return batch.None, true
	case "gzip":
		return batch.Gzip, true
	case "snappy":
		return batch.Snappy, true
	case "lz4":
		return batch.LZ4, true
	case "zstd":
		return batch.Zstd, true
	}
	return batch.None, false
}

// timestampBound is the effective message.timestamp.before.max.ms or
// after.max.ms: its value when set (on the topic or the broker) to less
// than Long.MAX_VALUE; otherwise message.timestamp.difference.max.ms if
// that is set, as Kafka 3.6-3.9 do for the deprecated setting; otherwise
// its default.
func timestampBound(tc config.TopicConfig, name string) int64 {
	const diff = "message.timestamp.difference.max.ms"
	n := tc.Int64(name)
	if _, src := tc.Get(name); src != config.SourceDefault && n != math.MaxInt64 {
		return n
	}
	if _, src := tc.Get(diff); src != config.SourceDefault {
		return tc.Int64(diff)
	}
	return n
}

func (h *Handlers) produce(r *protocol.Request) protocol.Reply {
	lookup := h.b.LookupDeadline()
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if hasTransactionalBatch(req) {
		// Transactional records need the transactional id and WRITE on
		// it (KafkaApis.handleProduceRequest).
		if req.TransactionID == nil || !h.allowed(r, acl.ResourceTransactionalID, *req.TransactionID, acl.OpWrite) {
			return h.produceError(req, resp, kerr.TransactionalIDAuthorizationFailed)
		}
	}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return h.produceError(req, resp, kerr.InvalidRequiredAcks)
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxProduceTimeout {
		timeout = maxProduceTimeout
	}
	deadline := h.b.Now().Add(timeout)
	img := h.b.Image()
	var commits []produceCommit
	failed := false
	for ti, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		t := img.Topics[rt.Topic]
		var pc produceConfig
		if t != nil {
			pc = produceConfigOf(h.b.TopicConfig(t))
		}
		// WRITE on the topic (KafkaApis.handleProduceRequest), before
		// anything about it is looked up.
		writable := h.allowedTopic(r, rt.Topic, acl.OpWrite)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			var err error
			var p *broker.Partition
			switch {
			case !writable:
				err = kerr.TopicAuthorizationFailed
			case t == nil:
				// Not in this node's metadata: Leader waits briefly for a
				// topic still propagating, and answers NOT_LEADER_OR_FOLLOWER
				// instead of UNKNOWN_TOPIC_OR_PARTITION while this node is
				// not caught up with the metadata log.
				if p, err = h.b.LeaderBy(rt.Topic, rp.Partition, lookup); err == nil {
					if t = h.b.Image().Topics[rt.Topic]; t == nil {
						p, err = nil, kerr.UnknownTopicOrPartition
					} else {
						pc = produceConfigOf(h.b.TopicConfig(t))
					}
				}
			case isInternal(t.Name):
				// Clients may not write internal topics (Kafka's
				// internalTopicsAllowed is false for client produce).
				err = kerr.InvalidTopicException
			default:
				p, err = h.b.LeaderBy(rt.Topic, rp.Partition, lookup)
			}
			var ch <-chan replica.ProduceResult
			logAppendTime := int64(-1)
			var nrec int64
			var guard uint64
			if err == nil {
				guard, err = h.verifyBatch(p, rp.Records, req.TransactionID, req.Version)
			}
			appending := false
			if err == nil {
				appending = true
				ch, logAppendTime, nrec, err = h.appendOne(p, rp.Records, pc, req.Acks, deadline, guard)
			}
			if err == nil && req.Acks == 0 {
				// No result is awaited: count what was handed to the log.
				h.b.CountProduce(rt.Topic, int64(len(rp.Records)), nrec)
			}
			if err != nil {
				sp.ErrorCode = code(err)
				if sp.ErrorCode == kerr.InvalidRecord.Code && req.Version < 8 {
					// INVALID_RECORD came with Produce v8 (KIP-467); older
					// clients get CORRUPT_MESSAGE, as from Kafka.
					sp.ErrorCode = kerr.CorruptMessage.Code
				}
				sp.ErrorMessage = message(err)
				sp.ErrorRecords = errorRecords(err)
				if appending {
					sp.LogStartOffset = failedLogStartOffset(p, code(err))
				}
				failed = true
			} else {
				commits = append(commits, produceCommit{ti: ti, pi: len(st.Partitions), p: p, result: ch, logAppendTime: logAppendTime,
					bytes: int64(len(rp.Records)), records: nrec})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		// The batches are written after this returns (their results come
		// at the append, before the write): the frame is not given back.
		return protocol.Reply{NoResponse: true, Close: failed}
	}
	if len(commits) == 0 {
		// Nothing was handed to a partition.
		r.ReleaseFrame()
		return protocol.Reply{Resp: resp}
	}
	// Point at the response slots only after the slices stop growing.
	for i := range commits {
		commits[i].slot = &resp.Topics[commits[i].ti].Partitions[commits[i].pi]
	}
	return protocol.Reply{Await: func() kmsg.Response {
		timer := h.b.Clock().NewTimer(clock.Until(h.b.Clock(), deadline) + time.Second)
		defer timer.Stop()
		// A partition answers an acks=1 or acks=all batch once it is in
		// the log (after the write, Partition.processReady) or refused:
		// with every answer in, nothing reads the request's records any
		// more and its frame is given back. A timed-out batch may still
		// be queued for its partition: its frame is left to the GC.
		answered := 0
		defer func() {
			if answered == len(commits) {
				r.ReleaseFrame()
			}
		}()
		for _, c := range commits {
			select {
			case res := <-c.result:
				answered++
				c.slot.ErrorCode = res.Error
				if res.Error != 0 {
					c.slot.LogStartOffset = failedLogStartOffset(c.p, res.Error)
					continue
				}
				c.slot.BaseOffset = res.BaseOffset
				if !res.Duplicate {
					h.b.CountProduce(c.p.Topic, c.bytes, c.records)
				}
				c.slot.LogStartOffset = c.p.LogStartOffset()
				c.slot.LogAppendTime = c.logAppendTime
				if res.Duplicate && c.logAppendTime >= 0 {
					// Kafka answers a retry with the original batch's
					// time (its producer state's timestamp).
					if ts, ok := storedMaxTimestamp(c.p, res.BaseOffset); ok {
						c.slot.LogAppendTime = ts
					}
				}
			case <-timer.C():
				// Ambiguous, as in Kafka: the records may still commit.
				c.slot.ErrorCode = kerr.RequestTimedOut.Code
			}
		}
		return resp
	}}
}

// appendOne validates one partition's records, applies the topic's
// timestamp settings to the batch and hands it to the partition's replica
// machine. It returns the time stamped on the batch (LogAppendTime
// topics), else -1, and the batch's record count.
func (h *Handlers) appendOne(p *broker.Partition, records []byte, pc produceConfig, acks int16, deadline time.Time, guard uint64) (<-chan replica.ProduceResult, int64, int64, error) {
	pc.topic, pc.partition = p.Topic, p.Partition
	b, hdr, logAppendTime, err := prepareBatch(records, pc, h.b.Now().UnixMilli())
	if err != nil {
		return nil, -1, 0, err
	}
	if guard != 0 {
		return p.ProduceVerified(b, hdr, acks, deadline, guard), logAppendTime, int64(hdr.NumRecords), nil
	}
	return p.Produce(b, hdr, acks, deadline), logAppendTime, int64(hdr.NumRecords), nil
}

// prepareBatch validates one partition's records and applies the topic's
// timestamp and compression settings, returning the batch to append (the
// request's bytes, or a rebuilt batch), its header and the log append
// time (-1 for CreateTime topics).
func prepareBatch(records []byte, pc produceConfig, now int64) ([]byte, batch.Header, int64, error) {
	var hdr batch.Header
	if len(records) == 0 {
		return nil, hdr, -1, kerr.InvalidRecord
	}
	if int64(len(records)) > pc.maxBytes {
		// Kafka checks the batch as received too (analyzeAndValidateRecords).
		return nil, hdr, -1, kerr.MessageTooLarge
	}
	h, b, rest, err := batch.Next(records)
	switch {
	case errors.Is(err, batch.ErrMagic):
		return nil, hdr, -1, kerr.UnsupportedForMessageFormat
	case err != nil:
		return nil, hdr, -1, kerr.CorruptMessage
	case len(rest) != 0:
		return nil, hdr, -1, kerr.InvalidRecord
	}
	if pc.setCodec && h.Compression() != pc.codec {
		return rebuildBatch(b, pc, now)
	}
	if int64(len(b)) > pc.segmentBytes {
		// A batch must fit in one segment: Kafka's UnifiedLog.append
		// throws RecordBatchTooLargeException (RECORD_LIST_TOO_LARGE)
		// when it exceeds segment.bytes, before anything is appended.
		return nil, hdr, -1, kerr.RecordListTooLarge
	}
	hdr, ts, err := batch.ValidateTimestamps(b)
	if err != nil {
		return nil, hdr, -1, kerr.CorruptMessage
	}
	if err := checkBatch(hdr); err != nil {
		return nil, hdr, -1, err
	}
	if err := checkRecords(b, hdr, ts, pc, now); err != nil {
		return nil, hdr, -1, err
	}
	hdr, logAppendTime, err := stampTimestamps(b, hdr, ts, pc, now)
	if err != nil {
		return nil, hdr, -1, err
	}
	return b, hdr, logAppendTime, nil
}

// rebuildBatch is prepareBatch for a batch whose codec is not the topic's
// compression.type: validated and checked as prepareBatch does, then
// rebuilt with the topic's codec (Kafka's buildRecordsAndAssignOffsets),
// size-checked again, and stamped.
func rebuildBatch(b []byte, pc produceConfig, now int64) ([]byte, batch.Header, int64, error) {
	// Kafka checks the rebuilt batch again: RecordTooLargeException
	// (MESSAGE_TOO_LARGE) when the validated records' size may have
	// changed, then RecordBatchTooLargeException (RECORD_LIST_TOO_LARGE)
	// against segment.bytes. Rebuild refuses beyond the smaller limit
	// before allocating the batch.
	limit := min(pc.maxBytes, pc.segmentBytes, math.MaxInt32)
	var checkErr error
	out, hdr, ts, err := batch.Rebuild(b, pc.codec, int(max(limit, 1)), func(h batch.Header, ts batch.Timestamps) error {
		// b is validated here: its records parse.
		if checkErr = checkBatch(h); checkErr == nil {
			checkErr = checkRecords(b, h, ts, pc, now)
		}
		return checkErr
	})
	var tooLarge *batch.TooLargeError
	switch {
	case checkErr != nil:
		return nil, hdr, -1, checkErr
	case errors.As(err, &tooLarge) && int64(tooLarge.Size) > pc.maxBytes:
		return nil, hdr, -1, kerr.MessageTooLarge
	case tooLarge != nil:
		return nil, hdr, -1, kerr.RecordListTooLarge
	case err != nil:
		return nil, hdr, -1, kerr.CorruptMessage
	}
	hdr, logAppendTime, err := stampTimestamps(out, hdr, ts, pc, now)
	if err != nil {
		return nil, hdr, -1, err
	}
	return out, hdr, logAppendTime, nil
}

// checkBatch refuses what a producer may not append (Kafka's
// LogValidator.validateBatch): control batches, and transactional batches
// without a producer id.
func checkBatch(hdr batch.Header) error {
	if hdr.IsControl() || (hdr.IsTransactional() && hdr.ProducerID < 0) {
		return kerr.InvalidRecord
	}
	return nil
}

// stampTimestamps sets the timestamp type and max timestamp of the
// checked batch b, in place (CRC recomputed), as Kafka's leader does: the
// broker's clock on a LogAppendTime topic, else the records' largest
// timestamp. It returns the updated header and the log append time (-1
// for CreateTime topics).
func stampTimestamps(b []byte, hdr batch.Header, ts batch.Timestamps, pc produceConfig, now int64) (batch.Header, int64, error) {
	if pc.logAppendTime {
		hdr, err := batch.SetMaxTimestamp(b, true, now)
		if err != nil {
			return hdr, -1, kerr.CorruptMessage
		}
		return hdr, now, nil
	}
	// CreateTime: the batch's max timestamp is its records' largest (at
	// least NoTimestamp), whatever the producer wrote.
	maxTs := int64(batch.NoTimestamp)
	if ts.Any && ts.Max > maxTs {
		maxTs = ts.Max
	}
	hdr, err := batch.SetMaxTimestamp(b, false, maxTs)
	if err != nil {
		return hdr, -1, kerr.CorruptMessage
	}
	return hdr, -1, nil
}

// outOfRange reports whether ts is more than beforeMs before now or more
// than afterMs after it, without overflowing on extreme timestamps.
func outOfRange(ts, now, beforeMs, afterMs int64) bool {
	if ts <= now {
		return uint64(now)-uint64(ts) > uint64(beforeMs)
	}
	return uint64(ts)-uint64(now) > uint64(afterMs)
}

// failedLogStartOffset is the LogStartOffset of a partition whose append
// failed with error code ec, as Kafka's ReplicaManager.appendToLocalLog
// answers it: -1 (its UNKNOWN_LOG_APPEND_INFO) for an unknown partition, a
// partition led elsewhere, a batch too large, corrupt bytes or a storage
// error; otherwise, a record validation or producer state error for
// instance, the partition's log start offset. A producer whose sequence
// was refused (OUT_OF_ORDER_SEQUENCE_NUMBER) learns from it that the log's
// prefix, and with it the producer's state, was removed (KIP-360).
func failedLogStartOffset(p *broker.Partition, ec int16) int64 {
	switch ec {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code, kerr.MessageTooLarge.Code,
		kerr.RecordListTooLarge.Code, kerr.CorruptMessage.Code, kerr.KafkaStorageError.Code, kerr.UnknownTopicID.Code:
		return -1
	}
	return p.LogStartOffset()
}

// storedMaxTimestamp reads the max timestamp of the stored batch that
// holds offset (its header only).
func storedMaxTimestamp(p *broker.Partition, offset int64) (int64, bool) {
	sl, err := p.Log().Read(offset, 0, offset+1)
	if err != nil || len(sl.Chunks) == 0 || sl.Chunks[0].Len < batch.HeaderSize {
		return 0, false
	}
	var hb [batch.HeaderSize]byte
	c := sl.Chunks[0]
	if n, _ := c.File.ReadAt(hb[:], c.Pos); n < len(hb) {
		return 0, false
	}
	h, err := batch.ParseHeader(hb[:])
	if err != nil || offset < h.BaseOffset || offset > h.LastOffset() {
		return 0, false
	}
	return h.MaxTimestamp, true
}

// produceError answers every partition with err.
func (h *Handlers) produceError(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, err *kerr.Error) protocol.Reply {
	if req.Acks == 0 {
		return protocol.Reply{NoResponse: true, Close: true}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = err.Code
			sp.BaseOffset = -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}

// hasTransactionalBatch reports whether any partition's records carry the
// transactional attribute.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if h, err := batch.ParseHeader(rp.Records); err == nil && h.IsTransactional() {
				return true
			}
		}
	}
	return false
}

// isInternal reports Kafka's internal topics (Topic.INTERNAL_TOPICS).
func isInternal(topic string) bool {
	return topic == "__consumer_offsets" || topic == "__transaction_state" || topic == "__share_group_state"
}
