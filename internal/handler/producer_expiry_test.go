package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/clock"
)

// TestProducerIDExpiration: an idempotent producer silent for
// producer.id.expiration.ms is forgotten by the live partition, so a
// sequence it would refuse (a gap) is accepted as a new producer's first
// batch; before that the gap is OUT_OF_ORDER_SEQUENCE_NUMBER. The broker
// runs on a manual clock: before it moves the producer cannot have
// expired, however slow the run; then the test moves it a tick at a time
// until the partition has forgotten the producer, which must not be before
// producer.id.expiration.ms (longer than the 1 s between an idle
// partition's ticks, so that an early expiry shows).
func TestProducerIDExpiration(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", map[string]string{"producer.id.expiration.ms": "5000", "producer.id.expiration.check.interval.ms": "50"}, clk)
	cl := n.client()
	createTopic(t, cl, "pe", 1, nil)
	mk := func(seq int32) []byte {
		return batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 901, BaseSequence: seq,
			BaseTimestamp: clk.Now().UnixMilli()}, batchtest.Values("v"))
	}
	if r := produceRaw(t, cl, "pe", 0, mk(0)); r.ErrorCode != 0 {
		t.Fatalf("first batch: %+v", r)
	}
	if r := produceRaw(t, cl, "pe", 0, mk(10)); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap while the producer is known: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", r)
	}
	start := clk.Now()
	deadline := time.Now().Add(10 * time.Second)
	for {
		clk.Advance(100 * time.Millisecond) // the broker's tick
		r := produceRaw(t, cl, "pe", 0, mk(10))
		if r.ErrorCode == 0 {
			break
		}
		if r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code || time.Now().After(deadline) {
			t.Fatalf("%v after producer.id.expiration.ms: %+v", clk.Now().Sub(start), r)
		}
		time.Sleep(time.Millisecond)
	}
	if waited := clk.Now().Sub(start); waited <= 5*time.Second {
		t.Fatalf("producer forgotten after %v, before producer.id.expiration.ms (5 s)", waited)
	}
}
