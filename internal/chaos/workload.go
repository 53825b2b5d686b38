package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Send is one produce of the queue workload and its outcome.
type Send struct {
	Producer  int    `json:"producer"`
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	// Offset is the acknowledged offset (ok only).
	Offset int64 `json:"offset"`
	// Outcome is "ok" (acknowledged), "fail" (definitely not written) or
	// "info" (indeterminate: timeout, connection loss, ...).
	Outcome string `json:"outcome"`
	Err     string `json:"err,omitempty"`
	// StartMs and EndMs are milliseconds since the workload started.
	StartMs float64 `json:"startMs"`
	EndMs   float64 `json:"endMs"`
}

// Read is one record received by a consumer session (or by the final read,
// Consumer "final").
type Read struct {
	Consumer  string  `json:"consumer"`
	Session   int     `json:"session"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Value     string  `json:"value"`
	AtMs      float64 `json:"atMs"`
}

// FinalRead describes the last phase: every partition read from its start
// to the high watermark after healing (the txn workload: read_committed,
// to the last stable offset).
type FinalRead struct {
	// End is the high watermark (ListOffsets latest) per partition; the
	// last stable offset for the txn workload.
	End map[int32]int64 `json:"end"`
	// Start is the log start offset per partition.
	Start map[int32]int64 `json:"start"`
	// Complete reports, per partition, that the read reached End.
	Complete map[int32]bool `json:"complete"`
	Err      string         `json:"err,omitempty"`
}

type history struct {
	t0 time.Time

	mu    sync.Mutex
	sends []Send
	reads []Read
	txns  []Txn // the txn workload's transactions
	// consumer errors, counted per message for the report
	pollErrs map[string]int
}

func (h *history) since() float64 { return float64(time.Since(h.t0).Microseconds()) / 1000 }

func (h *history) addSend(s Send) {
	h.mu.Lock()
	h.sends = append(h.sends, s)
	h.mu.Unlock()
}

func (h *history) addReads(rs []Read) {
	h.mu.Lock()
	h.reads = append(h.reads, rs...)
	h.mu.Unlock()
}

func (h *history) pollErr(err error) {
	h.mu.Lock()
	if h.pollErrs == nil {
		h.pollErrs = map[string]int{}
	}
	msg := err.Error()
	if len(msg) > 120 {
		msg = msg[:120]
	}
	h.pollErrs[msg]++
	h.mu.Unlock()
}

// definiteErrs are produce errors that mean the record was not written:
// the broker rejected the request before appending it. franz-go never
// fails an idempotent batch whose fate is unknown, so these only surface
// for batches that were not written.
var definiteErrs = []error{
	kerr.NotEnoughReplicas, kerr.MessageTooLarge, kerr.RecordListTooLarge,
	kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTopicException,
	kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
	kerr.InvalidRequiredAcks, kerr.UnsupportedForMessageFormat,
}

// classify maps a produce error to "fail" (definite) or "info".
func classify(err error) string {
	for _, d := range definiteErrs {
		if errors.Is(err, d) {
			return "fail"
		}
	}
	return "info"
}

type workload struct {
	c     *cluster
	o     *Options
	topic string
	h     *history
	stop  atomic.Bool
}

// producer sends unique values "p<id>-<n>" one at a time from each of its
// workers, acks=all with idempotence, to seeded random partitions, at most
// rate records per second in total for this producer.
func (w *workload) producer(ctx context.Context, id int, rate float64, wg *sync.WaitGroup) error {
	opts := append(w.c.clientOpts(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RecordDeliveryTimeout(w.o.SendTimeout),
		kgo.DefaultProduceTopic(w.topic),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	var n atomic.Int64
	const workers = 2
	var inner sync.WaitGroup
	for wk := range workers {
		inner.Add(1)
		go func() {
			defer inner.Done()
			rng := rand.New(rand.NewPCG(w.o.Seed, uint64(id*100+wk)))
			interval := time.Duration(float64(time.Second) * workers / rate)
			next := time.Now()
			for !w.stop.Load() && ctx.Err() == nil {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				next = next.Add(interval)
				if time.Until(next) < -time.Second {
					next = time.Now() // do not burst after a stall
				}
				v := fmt.Sprintf("p%d-%d", id, n.Add(1)-1)
				part := int32(rng.IntN(w.o.Partitions))
				s := Send{Producer: id, Value: v, Partition: part, Offset: -1, StartMs: w.h.since()}
				rctx, cancel := context.WithTimeout(context.Background(), w.o.SendTimeout)
				res := cl.ProduceSync(rctx, &kgo.Record{Topic: w.topic, Partition: part, Value: []byte(v)})
				cancel()
				s.EndMs = w.h.since()
				r, err := res.First()
				if err != nil {
					s.Outcome, s.Err = classify(err), err.Error()
				} else {
					s.Outcome, s.Offset, s.Partition = "ok", r.Offset, r.Partition
				}
				w.h.addSend(s)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		inner.Wait()
		cl.Close()
	}()
	return nil
}

// consumer polls every partition in assign mode from the start, in
// sessions of seeded length; a new session is a new client reading from
// the start again.
func (w *workload) consumer(ctx context.Context, id int, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(w.o.Seed, uint64(1000+id)))
		name := fmt.Sprintf("c%d", id)
		for session := 0; !w.stop.Load() && ctx.Err() == nil; session++ {
			parts := map[int32]kgo.Offset{}
			for p := range w.o.Partitions {
				parts[int32(p)] = kgo.NewOffset().AtStart()
			}
			cl, err := kgo.NewClient(append(append(w.c.clientOpts(),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: parts}),
				kgo.FetchMaxWait(500*time.Millisecond),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			), w.readOpts()...)...)
			if err != nil {
				w.h.pollErr(err)
				return
			}
			end := time.Now().Add(time.Duration(10+rng.IntN(15)) * time.Second)
			for time.Now().Before(end) && !w.stop.Load() && ctx.Err() == nil {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				fs := cl.PollFetches(pctx)
				cancel()
				fs.EachError(func(_ string, _ int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						w.h.pollErr(err)
					}
				})
				var rs []Read
				at := w.h.since()
				fs.EachRecord(func(r *kgo.Record) {
					if r.Attrs.IsControl() {
						return
					}
					rs = append(rs, Read{Consumer: name, Session: session, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), AtMs: at})
				})
				w.h.addReads(rs)
			}
			cl.Close()
		}
	}()
}

// finalRead reads every partition from its start to its high watermark.
func (w *workload) finalRead(ctx context.Context, adm *kadm.Client, timeout time.Duration) FinalRead {
	fr := FinalRead{End: map[int32]int64{}, Start: map[int32]int64{}, Complete: map[int32]bool{}}
	ends, hanging, err := w.listEnds(ctx, adm)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err == nil {
		var starts kadm.ListedOffsets
		starts, err = adm.ListStartOffsets(lctx, w.topic)
		if err == nil {
			starts.Each(func(o kadm.ListedOffset) { fr.Start[o.Partition] = o.Offset })
		}
	}
	cancel()
	if err != nil {
		fr.Err = "list offsets: " + err.Error()
		return fr
	}
	errs := hanging
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Sprintf("p%d: %v", o.Partition, o.Err))
			return
		}
		fr.End[o.Partition] = o.Offset
	})
	parts := map[int32]kgo.Offset{}
	pending := map[int32]bool{}
	for p, end := range fr.End {
		parts[p] = kgo.NewOffset().AtStart()
		if end > fr.Start[p] {
			pending[p] = true
		} else {
			fr.Complete[p] = true
		}
	}
	cl, err := kgo.NewClient(append(append(w.c.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: parts}),
		kgo.FetchMaxWait(200*time.Millisecond),
	), w.readOpts()...)...)
	if err != nil {
		fr.Err = err.Error()
		return fr
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for len(pending) > 0 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		var rs []Read
		at := w.h.since()
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				rs = append(rs, Read{Consumer: "final", Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), AtMs: at})
			}
			if r.Offset >= fr.End[r.Partition]-1 {
				delete(pending, r.Partition)
				fr.Complete[r.Partition] = true
			}
		})
		w.h.addReads(rs)
	}
	for p := range pending {
		errs = append(errs, fmt.Sprintf("p%d: final read did not reach the high watermark %d within %v", p, fr.End[p], timeout))
	}
	if len(errs) > 0 {
		fr.Err = fmt.Sprint(errs)
	}
	return fr
}
