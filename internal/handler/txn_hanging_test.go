package handler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
)

// TestHangingTransaction: a Produce of a transaction that arrives after
// the transaction was aborted (a request delayed in the network: the
// KAFKA-17754 class) is refused with INVALID_TXN_STATE and the last stable
// offset keeps moving; with transaction.partition.verification.enable=false
// the same late batch opens a transaction no marker ends and the LSO stays
// behind for good, which is what the verification (KIP-890 part 1) is for.
func TestHangingTransaction(t *testing.T) {
	for _, c := range []struct {
		verify, v1 bool
		want       int16 // the late batch's error
	}{
		// A Kafka 3.5 client: transaction version 1 (EndTxn v3 does not
		// bump the epoch, so only the verification stands between the
		// late batch and a hanging transaction).
		{verify: false, v1: true, want: 0},
		{verify: true, v1: true, want: kerr.InvalidTxnState.Code},
		// A current client: transaction version 2 bumps the epoch at
		// EndTxn (v5), which fences the late batch by itself.
		{verify: true, v1: false, want: kerr.InvalidProducerEpoch.Code},
	} {
		verify := c.verify
		props := map[string]string{"transaction.partition.verification.enable": map[bool]string{true: "true", false: "false"}[verify]}
		n := startNode(t, "", props)
		var opts []kgo.Opt
		if c.v1 {
			opts = append(opts, kgo.MaxVersions(kversion.V3_5_0()))
		}
		cl := n.client(opts...)
		createTopic(t, cl, "hang", 1, nil)
		id := fmt.Sprintf("hanging-%v-%v", c.verify, c.v1)

		// The coordinator, found the way a client finds it.
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorType = id, 1
		deadline := time.Now().Add(20 * time.Second)
		for request[*kmsg.FindCoordinatorResponse](t, cl, fc).ErrorCode != 0 {
			if time.Now().After(deadline) {
				t.Fatal("no transaction coordinator")
			}
			time.Sleep(100 * time.Millisecond)
		}
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
		var pid int64
		var epoch int16
		for {
			r := request[*kmsg.InitProducerIDResponse](t, cl, ip)
			if r.ErrorCode == 0 {
				pid, epoch = r.ProducerID, r.ProducerEpoch
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			time.Sleep(100 * time.Millisecond)
		}
		produce := func(seq int32, v string) int16 {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10000, &id
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "hang"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, batchtest.Values(v))
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
		}
		// One transaction: AddPartitionsToTxn,
		// a batch, EndTxn abort.
		ap := kmsg.NewPtrAddPartitionsToTxnRequest()
		ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
		apt := kmsg.NewAddPartitionsToTxnRequestTopic()
		apt.Topic, apt.Partitions = "hang", []int32{0}
		ap.Topics = append(ap.Topics, apt)
		if code := request[*kmsg.AddPartitionsToTxnResponse](t, cl, ap).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
		}
		if code := produce(0, "in-txn"); code != 0 {
			t.Fatalf("produce in the transaction: %v", kerr.ErrorForCode(code))
		}
		et := kmsg.NewPtrEndTxnRequest()
		et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, pid, epoch, false
		if code := request[*kmsg.EndTxnResponse](t, cl, et).ErrorCode; code != 0 {
			t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
		}
		// The abort's marker is written in the background.
		waitFor(t, func() bool { return listLatest(t, cl, "hang", true) == 2 }, "the abort marker")

		// The late batch of the aborted transaction. Until the coordinator
		// has completed the abort the verification answers
		// NOT_ENOUGH_REPLICAS, which a producer retries.
		code := produce(1, "late")
		for code == kerr.NotEnoughReplicas.Code && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			code = produce(1, "late")
		}
		// Then ordinary records: the LSO must follow the HW.
		p := kgoProduce(t, cl, "hang", "after")
		hw, lso := listLatest(t, cl, "hang", false), listLatest(t, cl, "hang", true)
		if code != c.want {
			t.Fatalf("%+v: the late batch got %v, want %v", c, kerr.ErrorForCode(code), kerr.ErrorForCode(c.want))
		}
		switch {
		case code != 0 && (lso != hw || hw != p+1):
			t.Fatalf("%+v: LSO %d, HW %d after a refused late batch: the LSO must keep moving", c, lso, hw)
		case code == 0 && (lso != 2 || hw != p+1):
			t.Fatalf("%+v: LSO %d (want stuck at 2: a hanging transaction), HW %d", c, lso, hw)
		}
		n.stop()
	}
}

// kgoProduce produces one plain record with franz-go and returns its
// offset.
func kgoProduce(t *testing.T, cl *kgo.Client, topic, v string) int64 {
	t.Helper()
	r := cl.ProduceSync(ctx(t), &kgo.Record{Topic: topic, Value: []byte(v)})
	if err := r.FirstErr(); err != nil {
		t.Fatal(err)
	}
	return r[0].Record.Offset
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
