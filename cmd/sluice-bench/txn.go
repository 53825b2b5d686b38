package main

// Transactional measurements (docs/transactions.md, "Performance"):
//
//   - --txn-records N: the produce phase uses a transactional producer
//     (kgo.TransactionalID) committing a transaction every N records, for
//     comparison with --idempotent in the same setup;
//   - --ctp: end-to-end consume-transform-produce latency: records are
//     produced at --rate to an input topic, a GroupTransactSession copies
//     them to an output topic in transactions (offsets committed inside
//     each one, Kafka Streams' exactly-once loop), and a read_committed
//     consumer of the output reports, per record, the time from its
//     production to its visibility.

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTransactional produces n records of value through a
// transactional producer, committing every perTxn records, and returns the
// elapsed time and each record's latency (send to acknowledgement; the
// commit's wait is counted in the elapsed time).
func produceTransactional(ctx context.Context, opts []kgo.Opt, n, perTxn int, value []byte) (time.Duration, []time.Duration, error) {
	cl, err := kgo.NewClient(append(opts, kgo.TransactionalID(fmt.Sprintf("sluice-bench-%d", time.Now().UnixNano())),
		kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return 0, nil, err
	}
	defer cl.Close()
	lat := make([]time.Duration, n)
	start := time.Now()
	for i := 0; i < n; {
		if err := cl.BeginTransaction(); err != nil {
			return 0, nil, err
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for j := 0; j < perTxn && i < n; j, i = j+1, i+1 {
			wg.Add(1)
			sent, k := time.Now(), i
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				lat[k] = time.Since(sent)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
		if firstErr != nil {
			return 0, nil, firstErr
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return 0, nil, err
		}
	}
	return time.Since(start), lat, nil
}

// ctpResult is what --ctp measures.
type ctpResult struct {
	Records      int     `json:"records"`
	Rate         int     `json:"rate"`
	LatencyP50Ms float64 `json:"e2eLatencyP50Ms"`
	LatencyP99Ms float64 `json:"e2eLatencyP99Ms"`
	LatencyMaxMs float64 `json:"e2eLatencyMaxMs"`
	Seconds      float64 `json:"seconds"`
}

// consumeTransformProduce runs the --ctp measurement on new topics in and
// out (partitions each) and returns the latencies.
func consumeTransformProduce(ctx context.Context, base []kgo.Opt, partitions, records, rate int, value []byte) (ctpResult, error) {
	stamp := time.Now().UnixNano()
	in, out := fmt.Sprintf("sluice-ctp-in-%d", stamp), fmt.Sprintf("sluice-ctp-out-%d", stamp)
	adm, err := kgo.NewClient(base...)
	if err != nil {
		return ctpResult{}, err
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	if _, err := ka.CreateTopics(ctx, int32(partitions), -1, nil, in, out); err != nil {
		return ctpResult{}, err
	}
	defer ka.DeleteTopics(context.Background(), in, out)

	// The source starts once the group has assigned the input partitions
	// (group.initial.rebalance.delay.ms is not part of the latency).
	assigned := make(chan struct{})
	var once sync.Once
	sess, err := kgo.NewGroupTransactSession(append(base, kgo.TransactionalID(fmt.Sprintf("sluice-ctp-%d", stamp)),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }),
		kgo.ConsumerGroup(fmt.Sprintf("sluice-ctp-%d", stamp)), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out))...)
	if err != nil {
		return ctpResult{}, err
	}
	defer sess.Close()
	reader, err := kgo.NewClient(append(base, kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return ctpResult{}, err
	}
	defer reader.Close()
	producer, err := kgo.NewClient(append(base, kgo.DefaultProduceTopic(in), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return ctpResult{}, err
	}
	defer producer.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The transform loop: copy what was polled, commit with the offsets.
	loopErr := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			fs := sess.PollFetches(ctx)
			if fs.NumRecords() == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				loopErr <- err
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
			})
			if _, err := sess.End(ctx, kgo.TryCommit); err != nil && ctx.Err() == nil {
				loopErr <- err
				return
			}
		}
	}()
	// The source: each value starts with its send time (ns).
	select {
	case <-assigned:
	case err := <-loopErr:
		return ctpResult{}, err
	case <-ctx.Done():
		return ctpResult{}, ctx.Err()
	}
	start := time.Now()
	go func() {
		for i := 0; i < records && ctx.Err() == nil; i++ {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
			v := append(binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano())), value...)
			producer.Produce(ctx, &kgo.Record{Value: v}, nil)
		}
	}()
	lat := make([]time.Duration, 0, records)
	for len(lat) < records {
		select {
		case err := <-loopErr:
			return ctpResult{}, err
		default:
		}
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctpResult{}, ctx.Err()
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) >= 8 {
				lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
			}
		})
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	return ctpResult{Records: records, Rate: rate, LatencyP50Ms: pct(0.5), LatencyP99Ms: pct(0.99), LatencyMaxMs: pct(1),
		Seconds: time.Since(start).Seconds()}, nil
}
