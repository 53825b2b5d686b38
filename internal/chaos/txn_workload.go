package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Workload names (Options.Workload).
const (
	// WorkloadQueue is Jepsen's queue: single idempotent sends.
	WorkloadQueue = "queue"
	// WorkloadTxn is the transactional queue: each producer runs
	// transactions that poll its own read_committed consumer and then
	// make 1-4 sends to random partitions, committed or aborted at
	// random, read back by read_committed consumers.
	WorkloadTxn = "txn"
	// WorkloadGroup is the queue's producers consumed by a churning
	// consumer group of KIP-848 and classic members (group_workload.go).
	WorkloadGroup = "group"
)

// txnAbortPercent is the share of transactions the workload aborts on
// purpose.
const txnAbortPercent = 20

// addTxn records a transaction.
func (h *history) addTxn(t Txn) {
	h.mu.Lock()
	h.txns = append(h.txns, t)
	h.mu.Unlock()
}

// txnClient is a transactional producer with the transactional.id of
// producer id. Its produce requests time out after about 6 s (produce
// timeout 3 s plus the 3 s request overhead of clientOpts), so a request
// the proxy holds longer (FaultDelayTxn) is retried or failed while the
// original is still on its way: the KAFKA-17754 situation.
func (w *workload) txnClient(id int) (*kgo.Client, error) {
	opts := w.c.clientOpts()
	if w.o.TxnVersion == 1 {
		// franz-go opts into transaction version 2 (KIP-890 part 2)
		// only when its version caps allow Produce v12, EndTxn v5 and
		// TxnOffsetCommit v5.
		v := kversion.Stable()
		v.SetMaxKeyVersion(0, 11)
		v.SetMaxKeyVersion(26, 4)
		v.SetMaxKeyVersion(28, 4)
		opts = append(opts, kgo.MaxVersions(v))
	}
	return kgo.NewClient(append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(3*time.Second),
		kgo.RecordDeliveryTimeout(w.o.SendTimeout),
		kgo.DefaultProduceTopic(w.topic),
		kgo.TransactionalID(fmt.Sprintf("chaos-txn-%d", id)),
		kgo.TransactionTimeout(10*time.Second),
	)...)
}

// txnReadMax and txnReadWait bound the poll at the start of each
// transaction: at most this many records, waiting at most this long.
const (
	txnReadMax  = 32
	txnReadWait = 20 * time.Millisecond
)

// txnReader is producer id's read_committed consumer, assigned every
// partition from its end: each transaction polls what was committed since
// the previous one, which gives the checker write-read dependencies
// between transactions (G1c).
func (w *workload) txnReader() (*kgo.Client, error) {
	parts := map[int32]kgo.Offset{}
	for p := range w.o.Partitions {
		parts[int32(p)] = kgo.NewOffset().AtEnd()
	}
	return kgo.NewClient(append(append(w.c.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: parts}),
		kgo.FetchMaxWait(100*time.Millisecond),
	), w.readOpts()...)...)
}

// txnProducer runs transactions one after the other with one
// transactional.id: BeginTransaction, a short poll of the producer's
// read_committed consumer (the transaction's reads, as in a
// consume-transform-produce loop), 1-4 produces to random partitions,
// then EndTransaction, committing or (txnAbortPercent of the time)
// aborting. A transaction with a failed produce is aborted, as a real
// client does, and so is a transaction whose commit failed. When that
// abort fails too, the client is replaced: the new client's InitProducerId
// bumps the epoch, which fences the old one and aborts whatever it left
// open.
// rate is this producer's target values per second.
func (w *workload) txnProducer(ctx context.Context, id int, rate float64, wg *sync.WaitGroup) error {
	cl, err := w.txnClient(id)
	if err != nil {
		return err
	}
	rd, err := w.txnReader()
	if err != nil {
		cl.Close()
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer rd.Close()
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		rng := rand.New(rand.NewPCG(w.o.Seed, uint64(id*100+7)))
		const meanValues = 2.5
		interval := time.Duration(float64(time.Second) * meanValues / rate)
		next := time.Now()
		for n := 0; !w.stop.Load() && ctx.Err() == nil; n++ {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			next = next.Add(interval)
			if time.Until(next) < -time.Second {
				next = time.Now()
			}
			t := Txn{Producer: id, ID: fmt.Sprintf("t%d-%d", id, n), TxnID: fmt.Sprintf("chaos-txn-%d", id), Intent: "commit"}
			k := 1 + rng.IntN(4)
			if rng.IntN(100) < txnAbortPercent {
				t.Intent = "abort"
			}
			parts := make([]int32, k)
			for i := range parts {
				parts[i] = int32(rng.IntN(w.o.Partitions))
			}
			usable := w.runTxn(cl, rd, &t, parts)
			w.h.addTxn(t)
			if !usable {
				// The client may be unusable (a failed abort, a
				// fatal error): replace it.
				cl.Close()
				if cl, err = w.txnClient(id); err != nil {
					cl = nil
					w.h.pollErr(fmt.Errorf("txn producer %d: new client: %w", id, err))
					return
				}
			}
		}
	}()
	return nil
}

// runTxn runs one transaction: it polls rd, then produces values
// "<ID>-<i>" to parts, and fills in t's reads, writes and outcome. It
// reports false when the client should be replaced.
func (w *workload) runTxn(cl, rd *kgo.Client, t *Txn, parts []int32) bool {
	t.StartMs = w.h.since()
	defer func() { t.EndMs = w.h.since() }()
	if err := cl.BeginTransaction(); err != nil {
		t.Outcome, t.Err = TxnFail, "begin: "+err.Error()
		return false
	}
	w.txnPoll(rd, t)
	recs := make([]*kgo.Record, len(parts))
	for i, p := range parts {
		v := fmt.Sprintf("%s-%d", t.ID, i)
		recs[i] = &kgo.Record{Topic: w.topic, Partition: p, Value: []byte(v)}
		t.Writes = append(t.Writes, TxnWrite{Value: v, Partition: p, Offset: -1})
	}
	pctx, cancel := context.WithTimeout(context.Background(), w.o.SendTimeout)
	res := cl.ProduceSync(pctx, recs...)
	cancel()
	// ProduceSync returns results in the order the produces finished,
	// not the order of recs: match them by record.
	idx := map[*kgo.Record]int{}
	for i, r := range recs {
		idx[r] = i
	}
	var produceErr error
	for _, r := range res {
		i, ok := idx[r.Record]
		if !ok {
			continue
		}
		if r.Err != nil {
			t.Writes[i].Err = r.Err.Error()
			if produceErr == nil {
				produceErr = r.Err
			}
			continue
		}
		t.Writes[i].Offset, t.Writes[i].Partition = r.Record.Offset, r.Record.Partition
	}
	// Never asked to commit: whatever happens next, the transaction must
	// stay invisible (TxnFail).
	if produceErr != nil || t.Intent == "abort" {
		t.Outcome = TxnFail
		if produceErr != nil {
			t.Err = "produce: " + produceErr.Error()
		}
		return w.abort(cl, t)
	}
	t.CommitMs = w.h.since()
	ectx, cancel := context.WithTimeout(context.Background(), w.o.SendTimeout+5*time.Second)
	err := cl.EndTransaction(ectx, kgo.TryCommit)
	cancel()
	switch {
	case err == nil:
		t.Outcome = TxnOK
		return true
	case errors.Is(err, kerr.OperationNotAttempted):
		// franz-go refused to send the commit (the producer id had
		// failed): the transaction was never asked to commit.
		t.Outcome, t.Err, t.CommitMs = TxnFail, "commit not attempted: "+err.Error(), 0
	default:
		t.Outcome, t.Err = TxnInfo, "commit: "+err.Error()
	}
	return w.abort(cl, t)
}

// txnPoll polls rd for up to txnReadWait and records what it returns as
// t's reads, and as reads of consumer "x<producer>" for the other checks.
func (w *workload) txnPoll(rd *kgo.Client, t *Txn) {
	ctx, cancel := context.WithTimeout(context.Background(), txnReadWait)
	fs := rd.PollRecords(ctx, txnReadMax)
	cancel()
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			w.h.pollErr(err)
		}
	})
	at := w.h.since()
	var rs []Read
	fs.EachRecord(func(r *kgo.Record) {
		if r.Attrs.IsControl() {
			return
		}
		t.Reads = append(t.Reads, TxnRead{Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
		rs = append(rs, Read{Consumer: fmt.Sprintf("x%d", t.Producer), Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), AtMs: at})
	})
	w.h.addReads(rs)
}

// abort ends the client's transaction with an abort (after dropping
// anything still buffered), as franz-go's documentation asks after a
// failed produce or commit; it reports whether the client is usable.
func (w *workload) abort(cl *kgo.Client, t *Txn) bool {
	actx, cancel := context.WithTimeout(context.Background(), w.o.SendTimeout+5*time.Second)
	defer cancel()
	if err := cl.AbortBufferedRecords(actx); err != nil {
		t.Err = joinErr(t.Err, "abort buffered: "+err.Error())
		return false
	}
	if err := cl.EndTransaction(actx, kgo.TryAbort); err != nil {
		t.Err = joinErr(t.Err, "abort: "+err.Error())
		return false
	}
	return true
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// readOpts are the consumer options of the workload's readers: the txn
// workload reads with read_committed and keeps control records, so the
// final read can tell it reached the last stable offset when the last
// offset below it is a commit or abort marker (the markers are not
// recorded as reads).
func (w *workload) readOpts() []kgo.Opt {
	if w.o.Workload != WorkloadTxn {
		return nil
	}
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
}

// listEnds lists where the final read must stop: the high watermarks for
// the queue workload; for the txn workload the last stable offsets, after
// waiting (up to 30 s) for them to reach the high watermarks, since every
// producer has ended or abandoned its transactions (an abandoned one is
// aborted by the coordinator after the 10 s transaction timeout). A
// partition whose LSO stays below its high watermark holds a hanging
// transaction; that is reported in hanging.
func (w *workload) listEnds(ctx context.Context, adm *kadm.Client) (ends kadm.ListedOffsets, hanging []string, err error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ends, err = adm.ListEndOffsets(lctx, w.topic)
	cancel()
	if err != nil || w.o.Workload != WorkloadTxn {
		return ends, nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		hw, err1 := adm.ListEndOffsets(lctx, w.topic)
		lso, err2 := adm.ListCommittedOffsets(lctx, w.topic)
		cancel()
		if err1 == nil && err2 == nil {
			hanging = hanging[:0]
			lso.Each(func(o kadm.ListedOffset) {
				if h, ok := hw.Lookup(w.topic, o.Partition); ok && o.Err == nil && h.Err == nil && o.Offset < h.Offset {
					hanging = append(hanging, fmt.Sprintf("p%d: last stable offset %d below high watermark %d", o.Partition, o.Offset, h.Offset))
				}
			})
			if len(hanging) == 0 || time.Now().After(deadline) {
				return lso, hanging, nil
			}
		} else if time.Now().After(deadline) {
			return nil, nil, errors.Join(err1, err2)
		}
		sleepCtx(ctx, time.Second)
	}
}
