package handler

// Produce, versions 3-9 (record batch v2 only; Kafka 4 also dropped 0-2).
//
// Each partition's records must be exactly one v2 batch. It is validated
// (size against max.message.bytes -> MESSAGE_TOO_LARGE, structure and CRC
// -> CORRUPT_MESSAGE, more than one batch or a control batch ->
// INVALID_RECORD), appended in request order on the connection's reader
// goroutine, and acknowledged only once durable (DESIGN decision 4): the
// fsync happens in Reply.Await, so pipelined requests and other connections
// share it (group commit). Idempotent producers are checked against the
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
	"github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/protocol"
)

// maxProduceTimeout caps a produce request's TimeoutMillis.
const maxProduceTimeout = 5 * time.Minute

// produceCommit is an appended partition awaiting durability: the response
// slot at resp.Topics[ti].Partitions[pi] and the offset it must commit.
type produceCommit struct {
	ti, pi int
	p      *broker.Partition
	end    int64
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
	now := h.b.Now()
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
			if t == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				failed = true
				continue
			}
			p, err := h.b.Partition(rt.Topic, rp.Partition)
			var end int64
			if err == nil {
				maxBytes := h.b.TopicConfig(t).Int64("max.message.bytes")
				sp.BaseOffset, end, err = h.appendOne(p, rp.Records, maxBytes, now)
			}
			if err != nil {
				sp.ErrorCode = code(err)
				sp.ErrorMessage = message(err)
				failed = true
			} else {
				sp.LogStartOffset = p.LogStartOffset()
				commits = append(commits, produceCommit{ti: ti, pi: len(st.Partitions), p: p, end: end})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	// Point at the response slots only after the slices stop growing.
	for i := range commits {
		commits[i].slot = &resp.Topics[commits[i].ti].Partitions[commits[i].pi]
	}
	if req.Acks == 0 {
		for _, c := range commits {
			c.p.CommitAsync()
		}
		return protocol.Reply{NoResponse: true, Close: failed}
	}
	if len(commits) == 0 {
		return protocol.Reply{Resp: resp}
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxProduceTimeout {
		timeout = maxProduceTimeout
	}
	return protocol.Reply{Await: func() kmsg.Response {
		done := make(chan struct{})
		errs := make([]error, len(commits))
		go func() {
			defer close(done)
			for i, c := range commits {
				errs[i] = c.p.Commit(c.end)
			}
		}()
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-done:
			for i, c := range commits {
				if errs[i] != nil {
					c.slot.ErrorCode = kerr.KafkaStorageError.Code
					c.slot.ErrorMessage = message(errs[i])
					c.slot.BaseOffset = -1
				}
			}
		case <-timer.C:
			// Ambiguous, as in Kafka: the records may still commit.
			for _, c := range commits {
				if c.p.HighWatermark() < c.end {
					c.slot.ErrorCode = kerr.RequestTimedOut.Code
				}
			}
		}
		return resp
	}}
}

// appendOne validates and appends one partition's records, returning the
// base offset to report and the end offset that must commit before the
// acknowledgement.
func (h *Handlers) appendOne(p *broker.Partition, records []byte, maxBytes int64, now time.Time) (base, end int64, err error) {
	if len(records) == 0 {
		return -1, 0, kerr.InvalidRecord
	}
	if int64(len(records)) > maxBytes {
		return -1, 0, kerr.MessageTooLarge
	}
	hdr, b, rest, err := batch.Next(records)
	switch {
	case errors.Is(err, batch.ErrMagic):
		return -1, 0, kerr.UnsupportedForMessageFormat
	case err != nil:
		return -1, 0, kerr.CorruptMessage
	case len(rest) != 0:
		return -1, 0, kerr.InvalidRecord
	}
	if _, err := batch.Validate(b); err != nil {
		return -1, 0, kerr.CorruptMessage
	}
	if hdr.IsControl() || hdr.IsTransactional() {
		return -1, 0, kerr.InvalidRecord
	}
	info, err := p.Append(b, now)
	switch {
	case errors.Is(err, producer.ErrOutOfOrderSequence):
		return -1, 0, kerr.OutOfOrderSequenceNumber
	case errors.Is(err, producer.ErrInvalidProducerEpoch):
		return -1, 0, kerr.InvalidProducerEpoch
	case err != nil:
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return -1, 0, err
		}
		return -1, 0, kerr.KafkaStorageError
	}
	return info.FirstOffset, info.LastOffset + 1, nil
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
