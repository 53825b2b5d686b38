// Package durability kills a real sluice process with SIGKILL under an
// acks=all load and checks that everything acknowledged survives, at its
// acknowledged offset, and that nothing torn is ever served.
package durability

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

type ack struct {
	partition int32
	offset    int64
}

func TestSIGKILLUnderAcksAllLoad(t *testing.T) {
	p := testproc.Start(t, testproc.Options{})
	const topic, partitions = "killme", 3
	adm := kadm.NewClient(p.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r, err := adm.CreateTopics(ctx, partitions, 1, nil, topic); err != nil || r[topic].Err != nil {
		t.Fatal(err, r)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[string]ack{}
	for round := 0; round < 3; round++ {
		var mu sync.Mutex
		cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordRetries(0), kgo.RetryTimeout(time.Second), kgo.ProduceRequestTimeout(5*time.Second))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					v := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
						if err == nil {
							mu.Lock()
							acked[v] = ack{r.Partition, r.Offset}
							mu.Unlock()
						}
					})
					if i%64 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}(w)
		}
		time.Sleep(time.Duration(300+rng.Intn(700)) * time.Millisecond)
		p.Kill() // mid-load
		close(stop)
		wg.Wait()
		cl.Close()
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n == 0 {
			t.Fatalf("round %d: nothing was acknowledged before the kill", round)
		}
		p.Restart()
		verify(t, p, topic, partitions, acked)
		t.Logf("round %d: %d acknowledged records verified after SIGKILL", round, n)
	}
}

// verify reads every partition from the start with raw fetches, checks
// every batch is whole and CRC-valid, offsets are dense, and every
// acknowledged value is at its acknowledged offset.
func verify(t *testing.T, p *testproc.Proc, topic string, partitions int32, acked map[string]ack) {
	t.Helper()
	cl := p.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := map[ack]string{}
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic id of %s: %v %v", topic, err, td[topic].Err)
	}
	for part := int32(0); part < partitions; part++ {
		next := int64(0)
		for {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID = -1
			req.MaxBytes = 8 << 20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, td[topic].ID // by id from Fetch v13 (KIP-516)
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = part
			rp.FetchOffset = next
			rp.PartitionMaxBytes = 8 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			sp := resp.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 {
				t.Fatalf("partition %d fetch at %d: error %d", part, next, sp.ErrorCode)
			}
			data := sp.RecordBatches
			if len(data) == 0 {
				if next != sp.HighWatermark {
					t.Fatalf("partition %d: empty fetch at %d below HW %d", part, next, sp.HighWatermark)
				}
				break
			}
			for len(data) > 0 {
				h, b, rest, err := batch.Next(data)
				if err != nil {
					t.Fatalf("partition %d: torn batch served at %d: %v", part, next, err)
				}
				if _, err := batch.Validate(b); err != nil {
					t.Fatalf("partition %d: invalid batch at %d: %v", part, h.BaseOffset, err)
				}
				if h.BaseOffset > next {
					t.Fatalf("partition %d: gap: expected offset %d, batch starts at %d", part, next, h.BaseOffset)
				}
				batch.Records(b, func(r batch.Record) bool {
					off := h.BaseOffset + int64(r.OffsetDelta)
					if off >= next {
						at[ack{part, off}] = string(r.Value)
					}
					return true
				})
				next = h.NextOffset()
				data = rest
			}
		}
	}
	for v, a := range acked {
		if got, ok := at[a]; !ok || got != v {
			t.Fatalf("acknowledged %q at %d/%d is gone after SIGKILL (found %q)", v, a.partition, a.offset, got)
		}
	}
}
