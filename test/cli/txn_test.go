package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestTxnCommands: a hanging transaction (a late batch of an aborted
// transaction, let in because verification is off) holds the last stable
// offset back; sluice txn list, describe and producers show it, and sluice
// txn abort --start-offset ends it: the LSO catches up with the HW.
func TestTxnCommands(t *testing.T) {
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("transaction.partition.verification.enable=false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, testproc.Options{HTTPPort: -1, ExtraArgs: []string{"--config", props}})
	b := "--bootstrap=" + p.Addr()
	ok(t, "", "topic", "create", "hung", "--partitions", "1", b)
	// A transaction version 1 client (Kafka 3.5's versions).
	cl := p.Client(t, kgo.MaxVersions(kversion.V3_5_0()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "cli-hung"
	var pid int64
	var epoch int16
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("InitProducerId: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	produce := func(seq int32) {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10000, &id
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "hung"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batchtest.Build(batchtest.Options{Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, batchtest.Values("x"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce: %v %v", err, resp)
		}
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = "hung", []int32{0}
	ap.Topics = append(ap.Topics, apt)
	if _, err := ap.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	produce(0) // offset 0
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch = id, pid, epoch
	if resp, err := et.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %v", err, resp)
	}
	lso := func() (int64, int64) {
		var out [2]int64
		for i, iso := range []int8{0, 1} {
			req := kmsg.NewPtrListOffsetsRequest()
			req.IsolationLevel = iso
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "hung"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("ListOffsets: %v %v", err, resp)
			}
			out[i] = resp.Topics[0].Partitions[0].Offset
		}
		return out[0], out[1]
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if hw, l := lso(); hw == 2 && l == 2 {
			break // the abort marker is at 1
		}
		if time.Now().After(deadline) {
			t.Fatal("the abort marker never came")
		}
		time.Sleep(50 * time.Millisecond)
	}
	produce(1) // the late batch: offset 2, a transaction no marker ends
	if hw, l := lso(); hw != 3 || l != 2 {
		t.Fatalf("after the late batch: HW %d LSO %d, want 3 and 2", hw, l)
	}

	var list struct {
		Transactions []struct {
			ID         string `json:"transactional_id"`
			ProducerID int64  `json:"producer_id"`
			State      string `json:"state"`
			Coord      int32  `json:"coordinator"`
		} `json:"transactions"`
	}
	jsonOut(t, &list, "txn", "list", b)
	if len(list.Transactions) != 1 || list.Transactions[0].ID != id || list.Transactions[0].ProducerID != pid {
		t.Fatalf("txn list: %+v", list)
	}
	var desc struct {
		Transactions []struct {
			ID            string   `json:"transactional_id"`
			State         string   `json:"state"`
			ProducerID    int64    `json:"producer_id"`
			ProducerEpoch int16    `json:"producer_epoch"`
			TimeoutMs     int32    `json:"timeout_ms"`
			Start         string   `json:"start"`
			Partitions    []string `json:"partitions"`
			Coordinator   int32    `json:"coordinator"`
			Error         string   `json:"error"`
		} `json:"transactions"`
	}
	jsonOut(t, &desc, "txn", "describe", id, b)
	if len(desc.Transactions) != 1 || desc.Transactions[0].State != "CompleteAbort" {
		t.Fatalf("txn describe: %+v", desc)
	}
	var prods struct {
		Producers []struct {
			Topic            string `json:"topic"`
			Partition        int32  `json:"partition"`
			ProducerID       int64  `json:"producer_id"`
			ProducerEpoch    int16  `json:"producer_epoch"`
			LastSequence     int32  `json:"last_sequence"`
			LastTimestamp    int64  `json:"last_timestamp"`
			CoordinatorEpoch int32  `json:"coordinator_epoch"`
			TxnStartOffset   int64  `json:"current_txn_start_offset"`
		} `json:"producers"`
	}
	jsonOut(t, &prods, "txn", "producers", "--topic", "hung", b)
	if len(prods.Producers) != 1 || prods.Producers[0].ProducerID != pid || prods.Producers[0].TxnStartOffset != 2 {
		t.Fatalf("txn producers: %+v", prods)
	}
	fails(t, 1, "no open transaction begins at offset 0", "txn", "abort", "--topic", "hung", "--partition", "0", "--start-offset", "0", b)
	ok(t, "", "txn", "abort", "--topic", "hung", "--partition", "0", "--start-offset", "2", b)
	if hw, l := lso(); hw != 4 || l != 4 {
		t.Fatalf("after sluice txn abort: HW %d LSO %d, want 4 and 4 (marker at 3)", hw, l)
	}
}
