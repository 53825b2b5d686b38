package badinput

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestTransactionalBadInput: garbage and out-of-order transactional
// requests get Kafka's error codes (or a closed connection for bodies
// that do not parse) and append nothing; the broker keeps serving.
func TestTransactionalBadInput(t *testing.T) {
	p := testproc.Start(t, testproc.Options{})
	cl := p.Client(t, kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "victim", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Garbage transactional ids.
	for name, id := range map[string]string{"empty": "", "huge": strings.Repeat("x", 100_000)} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 10000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s id: %v", name, err)
		}
		if resp.ErrorCode == 0 {
			t.Fatalf("%s transactional id accepted: %+v", name, resp)
		}
		t.Logf("%s transactional id: %v", name, kerr.ErrorForCode(resp.ErrorCode))
	}

	// A real id, then requests out of order.
	id := "bad-input"
	var pid int64
	var epoch int16
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 10000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InitProducerId: %v %v", err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
	endTxn := func(pid int64, epoch int16) int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if c := endTxn(pid, epoch); c != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn with no transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(c))
	}
	if c := endTxn(pid+1000, epoch); c != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("EndTxn with another producer id: %v, want INVALID_PRODUCER_ID_MAPPING", kerr.ErrorForCode(c))
	}
	if c := endTxn(pid, epoch-1); c != kerr.ProducerFenced.Code && c != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("EndTxn with an old epoch: %v", kerr.ErrorForCode(c))
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = "no-such-topic", []int32{0}
	ap.Topics = append(ap.Topics, apt)
	apr, err := ap.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range apr.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("AddPartitionsToTxn of an unknown topic: %v", kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	for _, rt := range apr.Transactions {
		for _, tt := range rt.Topics {
			for _, rp := range tt.Partitions {
				if rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("AddPartitionsToTxn of an unknown topic: %v", kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		}
	}
	// A transactional batch for a partition not in the transaction, from a
	// transaction version 1 client (Produce below v12: under version 2 a
	// Produce adds its partition to the transaction itself).
	cl1 := p.Client(t, kgo.MaxVersions(kversion.V3_5_0()))
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis, pr.TransactionID = -1, 5000, &id
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "victim"
	pp := kmsg.NewProduceRequestTopicPartition()
	rb := kmsg.NewRecordBatch()
	rb.Magic, rb.Attributes, rb.ProducerID, rb.ProducerEpoch, rb.NumRecords = 2, 0x10, pid, epoch, 1
	rec := kmsg.NewRecord()
	rec.Value = []byte("sneaky")
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	rb.Records = rec.AppendTo(nil)
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], batch.ComputeCRC(raw))
	pp.Records = raw
	prt.Partitions = append(prt.Partitions, pp)
	pr.Topics = append(pr.Topics, prt)
	presp, err := pr.RequestWith(ctx, cl1)
	if err != nil {
		t.Fatal(err)
	}
	if c := presp.Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidTxnState.Code {
		t.Fatalf("transactional batch outside the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(c))
	}

	// Bodies that do not parse, for every transactional API.
	for _, req := range []kmsg.Request{kmsg.NewPtrInitProducerIDRequest(), kmsg.NewPtrAddPartitionsToTxnRequest(),
		kmsg.NewPtrAddOffsetsToTxnRequest(), kmsg.NewPtrEndTxnRequest(), kmsg.NewPtrWriteTxnMarkersRequest(),
		kmsg.NewPtrTxnOffsetCommitRequest(), kmsg.NewPtrDescribeProducersRequest(), kmsg.NewPtrDescribeTransactionsRequest(),
		kmsg.NewPtrListTransactionsRequest()} {
		f := frame(req, 0, 5)
		bad := append(append([]byte(nil), f[:17]...), bytes.Repeat([]byte{0xff}, 40)...)
		binary.BigEndian.PutUint32(bad, uint32(len(bad)-4))
		if body := exchange(t, p.Addr(), bad); body != nil {
			// An answer is fine only if it is an error for that API.
			t.Logf("API %d answered %d bytes to a garbage body", req.Key(), len(body))
		}
		mustStillServe(t, p)
	}

	// Nothing was appended to the topic.
	if end, err := kadmEnd(ctx, cl, "victim"); err != nil || end != 1 {
		t.Fatalf("victim's log end %d (%v), want 1", end, err)
	}
	mustStillServe(t, p)
}
