package main

// --share: the records just produced are read twice, one group after the
// other, by a classic consumer group of --group-members members and by a
// share group (KIP-932) of as many kgo.ShareGroup members that acknowledge
// every record (accept, one Ack per record); each rate is the records
// over the time from the first record received to the last (for the
// share group, to the last acknowledgement flushed), so that joining the
// group (a classic group's initial rebalance delay, 3 s by default) is
// not counted; the time to the first record is reported apart.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareResult is the --share measurement.
type shareResult struct {
	Records            int     `json:"records"`
	Members            int     `json:"members"`
	ClassicSeconds     float64 `json:"classicSeconds"`
	ClassicRecPerSec   float64 `json:"classicRecordsPerSec"`
	ClassicFirstSecs   float64 `json:"classicFirstRecordSeconds"`
	ShareFirstSecs     float64 `json:"shareFirstRecordSeconds"`
	ShareSeconds       float64 `json:"shareSeconds"`
	ShareRecPerSec     float64 `json:"shareRecordsPerSec"`
	ShareRedeliveries  int64   `json:"shareRedeliveries"`
	ShareOverClassic   float64 `json:"shareOverClassic"`
	ShareAckErrors     int64   `json:"shareAckErrors"`
	ShareFirstAckError string  `json:"shareFirstAckError,omitempty"`
}

// benchShare measures the classic group, then the share group, over want
// records of topic.
func benchShare(ctx context.Context, base []kgo.Opt, topic string, want, members int) (shareResult, error) {
	res := shareResult{Records: want, Members: members}
	stamp := time.Now().UnixNano()
	first, el, err := classicGroupRead(ctx, base, topic, fmt.Sprintf("sluice-bench-classic-%d", stamp), want, members)
	if err != nil {
		return res, err
	}
	res.ClassicFirstSecs = first.Seconds()
	res.ClassicSeconds, res.ClassicRecPerSec = el.Seconds(), float64(want)/el.Seconds()
	group := fmt.Sprintf("sluice-bench-share-%d", stamp)
	if err := setShareEarliest(ctx, base, group); err != nil {
		return res, err
	}
	first, el, err = shareGroupRead(ctx, base, topic, group, want, members, &res)
	if err != nil {
		return res, err
	}
	res.ShareFirstSecs = first.Seconds()
	res.ShareSeconds, res.ShareRecPerSec = el.Seconds(), float64(want)/el.Seconds()
	res.ShareOverClassic = res.ShareRecPerSec / res.ClassicRecPerSec
	return res, nil
}

// classicGroupRead reads want records with members classic group members
// (cooperative-sticky, franz-go's default) and returns how long the first
// record took, and the rest after it.
func classicGroupRead(ctx context.Context, base []kgo.Opt, topic, group string, want, members int) (first, rest time.Duration, err error) {
	var got atomic.Int64
	done := make(chan struct{})
	var once, firstOnce sync.Once
	var firstAt time.Time
	start := time.Now()
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for range members {
		cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))...)
		if err != nil {
			return 0, 0, err
		}
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := cl.PollFetches(pctx)
				cancel()
				if fs.NumRecords() > 0 {
					firstOnce.Do(func() { firstAt = time.Now() })
				}
				if n := got.Add(int64(fs.NumRecords())); n >= int64(want) {
					once.Do(func() { close(done) })
				}
				if ctx.Err() != nil {
					once.Do(func() { close(done) })
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	for _, cl := range clients {
		cl.Close()
	}
	if got.Load() < int64(want) {
		return 0, 0, fmt.Errorf("classic group read %d of %d records: %v", got.Load(), want, ctx.Err())
	}
	return firstAt.Sub(start), end.Sub(firstAt), nil
}

// shareGroupRead reads want distinct records with members share group
// members, each acknowledging every record it is given (accept), and
// returns how long the first record took, and the rest after it up to
// the last acknowledgement flushed.
func shareGroupRead(ctx context.Context, base []kgo.Opt, topic, group string, want, members int, res *shareResult) (first, rest time.Duration, err error) {
	var mu sync.Mutex
	seen := map[int32]map[int64]bool{}
	distinct := 0
	var redelivered, ackErrs atomic.Int64
	var firstErr atomic.Value
	done := make(chan struct{})
	var once, firstOnce sync.Once
	var firstAt time.Time
	start := time.Now()
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for range members {
		cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.FetchMaxBytes(64<<20),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				for _, r := range rs {
					if r.Err != nil {
						ackErrs.Add(1)
						firstErr.CompareAndSwap(nil, r.Err.Error())
					}
				}
			}))...)
		if err != nil {
			return 0, 0, err
		}
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := cl.PollRecords(pctx, 0)
				cancel()
				rs := fs.Records()
				if len(rs) > 0 {
					firstOnce.Do(func() { firstAt = time.Now() })
				}
				for _, r := range rs {
					r.Ack(kgo.AckAccept)
				}
				mu.Lock()
				for _, r := range rs {
					m := seen[r.Partition]
					if m == nil {
						m = map[int64]bool{}
						seen[r.Partition] = m
					}
					if m[r.Offset] {
						redelivered.Add(1)
						continue
					}
					m[r.Offset] = true
					distinct++
				}
				all := distinct >= want
				mu.Unlock()
				if all || ctx.Err() != nil {
					once.Do(func() { close(done) })
				}
			}
		}()
	}
	wg.Wait()
	for _, cl := range clients {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := cl.FlushAcks(fctx)
		cancel()
		if err != nil {
			return 0, 0, fmt.Errorf("flushing the share group's acknowledgements: %w", err)
		}
	}
	end := time.Now()
	for _, cl := range clients {
		cl.Close()
	}
	res.ShareRedeliveries, res.ShareAckErrors = redelivered.Load(), ackErrs.Load()
	if e, ok := firstErr.Load().(string); ok {
		res.ShareFirstAckError = e
	}
	if distinct < want {
		return 0, 0, fmt.Errorf("share group read %d of %d records: %v", distinct, want, ctx.Err())
	}
	return firstAt.Sub(start), end.Sub(firstAt), nil
}

// setShareEarliest sets the group config share.auto.offset.reset=earliest
// (a new share group starts at the latest offset otherwise) and waits
// until every broker describes it.
func setShareEarliest(ctx context.Context, base []kgo.Opt, group string) error {
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return err
	}
	defer cl.Close()
	v := "earliest"
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", &v
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("setting share.auto.offset.reset: %w", err)
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	describes := func(id int32) bool {
		d := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		d.Resources = append(d.Resources, dr)
		r, err := cl.Broker(int(id)).Request(ctx, d)
		if err != nil {
			return false
		}
		for _, c := range r.(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
			if c.Name == "share.auto.offset.reset" && c.Value != nil && *c.Value == v {
				return true
			}
		}
		return false
	}
	for _, b := range meta.Brokers {
		deadline := time.Now().Add(30 * time.Second)
		for !describes(b.NodeID) {
			if time.Now().After(deadline) {
				return fmt.Errorf("broker %d does not describe share.auto.offset.reset=earliest", b.NodeID)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
