package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// TestProducerIDExpiration: an idempotent producer silent for
// producer.id.expiration.ms is forgotten by the live partition, so a
// sequence it would refuse (a gap) is accepted as a new producer's first
// batch; before that the gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestProducerIDExpiration(t *testing.T) {
	n := startNode(t, "", map[string]string{"producer.id.expiration.ms": "300", "producer.id.expiration.check.interval.ms": "50"})
	cl := n.client()
	createTopic(t, cl, "pe", 1, nil)
	mk := func(seq int32) []byte {
		return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 901, BaseSequence: seq,
			BaseTimestamp: time.Now().UnixMilli()}, batchtest.Values("v"))
	}
	if r := produceRaw(t, cl, "pe", 0, mk(0)); r.ErrorCode != 0 {
		t.Fatalf("first batch: %+v", r)
	}
	if r := produceRaw(t, cl, "pe", 0, mk(10)); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap while the producer is known: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := produceRaw(t, cl, "pe", 0, mk(10))
		if r.ErrorCode == 0 {
			break
		}
		if r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code || time.Now().After(deadline) {
			t.Fatalf("after producer.id.expiration.ms: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
