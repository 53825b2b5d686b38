package handler

// Produce, versions 0-9, record batch v2 only: v0-2 carry message sets (magic
// 0/1), which get UNSUPPORTED_FOR_MESSAGE_FORMAT. v0 is advertised because
// librdkafka before 2.6 compresses gzip/snappy/lz4 only when it is.
//
// Each partition's records must be exactly one v2 batch. It is validated
// (size against max.message.bytes -> MESSAGE_TOO_LARGE, structure and CRC
// -> CORRUPT_MESSAGE, more than one batch or a control batch ->
// INVALID_RECORD), appended in request order on the connection's reader
// goroutine through the partition's replica machine, and acknowledged only
// once durable (DESIGN decision 4): acks=1 once fsynced on the leader,
// acks=all once the high watermark covers it (fsynced on every ISR member,
// at least min.insync.replicas of them; NOT_ENOUGH_REPLICAS before the
// append when the ISR is too small). The wait happens in Reply.Await, so
// pipelined requests and other connections share fsyncs (group commit).
// A produce to a partition led elsewhere gets NOT_LEADER_OR_FOLLOWER. Idempotent producers are checked against the
// last five batches (duplicates get their original offsets,
// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH). acks=0 gets no
// response; an error then closes the connection, as Kafka does.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
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
}

func (h *Handlers) produce(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.TransactionID != nil {
		// Transactions are not served yet (no transaction coordinator).
		return h.produceError(req, resp, kerr.TransactionalIDAuthorizationFailed)
	}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return h.produceError(req, resp, kerr.InvalidRequiredAcks)
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxProduceTimeout {
		timeout = maxProduceTimeout
	}
	deadline := time.Now().Add(timeout)
	img := h.b.Image()
	var commits []produceCommit
	failed := false
	for ti, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		t := img.Topics[rt.Topic]
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			var err error
			var p *broker.Partition
			switch {
			case t == nil:
				err = kerr.UnknownTopicOrPartition
			case isInternal(t.Name):
				// Clients may not write internal topics (Kafka's
				// internalTopicsAllowed is false for client produce).
				err = kerr.InvalidTopicException
			default:
				p, err = h.b.Leader(rt.Topic, rp.Partition)
			}
			var ch <-chan replica.ProduceResult
			if err == nil {
				tc := h.b.TopicConfig(t)
				ch, err = h.appendOne(p, rp.Records, tc.Int64("max.message.bytes"), tc.Int64("segment.bytes"), req.Acks, deadline)
			}
			if err != nil {
				sp.ErrorCode = code(err)
				sp.ErrorMessage = message(err)
				failed = true
			} else {
				commits = append(commits, produceCommit{ti: ti, pi: len(st.Partitions), p: p, result: ch})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		return protocol.Reply{NoResponse: true, Close: failed}
	}
	if len(commits) == 0 {
		return protocol.Reply{Resp: resp}
	}
	// Point at the response slots only after the slices stop growing.
	for i := range commits {
		commits[i].slot = &resp.Topics[commits[i].ti].Partitions[commits[i].pi]
	}
	acks := req.Acks
	return protocol.Reply{Await: func() kmsg.Response {
		timer := time.NewTimer(time.Until(deadline) + time.Second)
		defer timer.Stop()
		for _, c := range commits {
			select {
			case res := <-c.result:
				c.slot.ErrorCode = res.Error
				if res.Error != 0 {
					continue
				}
				c.slot.BaseOffset = res.BaseOffset
				c.slot.LogStartOffset = c.p.LogStartOffset()
				if acks == 1 {
					// acks=1 is acknowledged once durable on the leader.
					if err := c.p.Durable(res.LastOffset + 1); err != nil {
						c.slot.ErrorCode, c.slot.BaseOffset = code(err), -1
					}
				}
			case <-timer.C:
				// Ambiguous, as in Kafka: the records may still commit.
				c.slot.ErrorCode = kerr.RequestTimedOut.Code
			}
		}
		return resp
	}}
}

// appendOne validates one partition's records and hands the batch to the
// partition's replica machine.
func (h *Handlers) appendOne(p *broker.Partition, records []byte, maxBytes, segmentBytes int64, acks int16, deadline time.Time) (<-chan replica.ProduceResult, error) {
	if len(records) == 0 {
		return nil, kerr.InvalidRecord
	}
	if int64(len(records)) > maxBytes {
		return nil, kerr.MessageTooLarge
	}
	if int64(len(records)) > segmentBytes {
		// A batch must fit in one segment: Kafka's UnifiedLog.append
		// throws RecordBatchTooLargeException (RECORD_LIST_TOO_LARGE)
		// when it exceeds segment.bytes, before anything is appended.
		return nil, kerr.RecordListTooLarge
	}
	hdr, b, rest, err := batch.Next(records)
	switch {
	case errors.Is(err, batch.ErrMagic):
		return nil, kerr.UnsupportedForMessageFormat
	case err != nil:
		return nil, kerr.CorruptMessage
	case len(rest) != 0:
		return nil, kerr.InvalidRecord
	}
	if _, err := batch.Validate(b); err != nil {
		return nil, kerr.CorruptMessage
	}
	if hdr.IsControl() || hdr.IsTransactional() {
		return nil, kerr.InvalidRecord
	}
	return p.Produce(b, hdr, acks, deadline), nil
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

// isInternal reports Kafka's internal topics.
func isInternal(topic string) bool {
	return topic == "__consumer_offsets" || topic == "__transaction_state"
}
