package handler

// Per-record validation of a produced batch (KIP-467), as Kafka's
// LogValidator.validateRecord runs it on the leader for every record of a
// v2 batch, after the batch-level checks:
//
//   - on a compacted topic (cleanup.policy contains compact) a record
//     without a key fails with INVALID_RECORD (validateKey);
//   - otherwise, on a CreateTime topic, a record whose timestamp is more
//     than message.timestamp.before.max.ms in the past or after.max.ms in
//     the future fails with INVALID_TIMESTAMP (validateTimestamp);
//   - and a record of a batch with the LogAppendTime attribute fails with
//     INVALID_TIMESTAMP unless the topic is CreateTime and the record has a
//     timestamp (a LogAppendTime batch's records all have its max
//     timestamp).
//
// Every record is checked and the batch fails whole, nothing appended, if
// any fails (Kafka's RecordValidationException): the partition's error is
// INVALID_TIMESTAMP when a timestamp failed, else INVALID_RECORD; its
// ErrorMessage is LogValidator.processRecordErrors' text; RecordErrors
// (Produce v8+) lists each failing record's index in the batch with its
// reason. A client that knows the field fails only those records with the
// error and the others of the batch as collateral (the Java producer's
// and librdkafka's per-record handling; librdkafka reports them as
// _INVALID_DIFFERENT_RECORD).
//
// The records are scanned only when a check can fail: always on a
// compacted topic, otherwise when the batch's smallest or largest record
// timestamp is out of range or the LogAppendTime attribute is refused, so
// a batch that passes costs nothing more than the timestamp summary the
// produce path computes anyway.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
)

// recordError is one record's failure (Kafka's ProduceResponse.RecordError):
// its index in the batch and why it failed.
type recordError struct {
	index int32
	msg   string
}

// String formats e as Kafka's RecordError.toString, which the partition's
// ErrorMessage quotes.
func (e recordError) String() string {
	return fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.index, e.msg)
}

// recordValidationError is Kafka's RecordValidationException: the
// partition's error, its message and the failing records.
type recordValidationError struct {
	err     *kerr.Error
	msg     string
	records []recordError
}

func (e *recordValidationError) Error() string { return e.msg }
func (e *recordValidationError) Unwrap() error { return e.err }

// errorRecords returns err's per-record errors for the response (nil
// unless err is a *recordValidationError).
func errorRecords(err error) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	rv, ok := err.(*recordValidationError)
	if !ok {
		return nil
	}
	out := make([]kmsg.ProduceResponseTopicPartitionErrorRecord, len(rv.records))
	for i, r := range rv.records {
		out[i] = kmsg.NewProduceResponseTopicPartitionErrorRecord()
		out[i].RelativeOffset = r.index
		msg := r.msg
		out[i].ErrorMessage = &msg
	}
	return out
}

// needsRecordScan reports whether a record of the validated batch with
// header hdr and record timestamps ts can fail validateRecords.
func needsRecordScan(hdr batch.Header, ts batch.Timestamps, pc produceConfig, now int64) bool {
	switch {
	case pc.compacted:
		return true
	case hdr.LogAppendTime() && (pc.logAppendTime || !ts.Any):
		return true
	case !pc.logAppendTime && ts.Any:
		return outOfRange(ts.Min, now, pc.beforeMs, pc.afterMs) || outOfRange(ts.Max, now, pc.beforeMs, pc.afterMs)
	}
	return false
}

// validateRecords checks every record of the validated batch b (header
// hdr) as described in the file comment and returns a
// *recordValidationError naming each failing record, or nil.
func validateRecords(b []byte, hdr batch.Header, pc produceConfig, now int64) error {
	var errs []recordError
	badTimestamp := false
	index := int32(0)
	err := batch.Records(b, func(r batch.Record) bool {
		ts := hdr.BaseTimestamp + r.TimestampDelta
		if hdr.LogAppendTime() {
			ts = hdr.MaxTimestamp
		}
		offset := hdr.BaseOffset + int64(r.OffsetDelta)
		switch {
		case pc.compacted && r.Key == nil:
			errs = append(errs, recordError{index, fmt.Sprintf(
				"Compacted topic cannot accept message without key in topic partition %s-%d", pc.topic, pc.partition)})
		case !pc.logAppendTime && ts != batch.NoTimestamp:
			if outOfRange(ts, now, pc.beforeMs, pc.afterMs) {
				badTimestamp = true
				// The bounds wrap as Java's long arithmetic does.
				errs = append(errs, recordError{index, fmt.Sprintf(
					"Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
					ts, offset, now-pc.beforeMs, now+pc.afterMs)})
			}
		case hdr.LogAppendTime():
			badTimestamp = true
			errs = append(errs, recordError{index, fmt.Sprintf(
				"Invalid timestamp type in message DefaultRecord(offset=%d, timestamp=%d, key=%d bytes, value=%d bytes). Producer should not set timestamp type to LogAppendTime.",
				offset, ts, len(r.Key), len(r.Value))})
		}
		index++
		return true
	})
	if err != nil {
		return kerr.CorruptMessage
	}
	if len(errs) == 0 {
		return nil
	}
	if badTimestamp {
		return &recordValidationError{kerr.InvalidTimestamp, "One or more records have been rejected due to invalid timestamp", errs}
	}
	shown := make([]string, min(len(errs), 3))
	for i := range shown {
		shown[i] = errs[i].String()
	}
	return &recordValidationError{kerr.InvalidRecord, fmt.Sprintf(
		"One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		len(errs), strings.Join(shown, ", ")), errs}
}

// checkRecords runs validateRecords on the validated batch b (header hdr,
// record timestamps ts) when one of its records can fail.
func checkRecords(b []byte, hdr batch.Header, ts batch.Timestamps, pc produceConfig, now int64) error {
	if !needsRecordScan(hdr, ts, pc, now) {
		return nil
	}
	return validateRecords(b, hdr, pc, now)
}
