package handler_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/metrics"
)

// Record sets of 32 KiB and more are sent from the log files (sendfile):
// franz-go reads every record back intact over flexible (v16) and
// non-flexible (v11) Fetch versions, with several partitions per response.
func TestSplicedFetchRealClient(t *testing.T) {
	n := startNode(t, "", nil)
	const topic, parts, perPart = "spliced", 3, 300
	cl := n.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx(t), parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	want := map[int32][][]byte{}
	for p := range int32(parts) {
		for i := range perPart {
			v := bytes.Repeat([]byte(fmt.Sprintf("p%d-r%d;", p, i)), 200)[:1024]
			want[p] = append(want[p], v)
			cl.Produce(ctx(t), &kgo.Record{Partition: p, Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := cl.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opt  kgo.Opt
	}{
		{"v16", kgo.MaxVersions(kversion.Stable())},
		{"v11", kgo.MaxVersions(func() *kversion.Versions { v := kversion.Stable(); v.SetMaxKeyVersion(1, 11); return v }())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := splicedBytes(t)
			c := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), tc.opt)
			got := map[int32][][]byte{}
			for total := 0; total < parts*perPart; {
				fs := c.PollFetches(ctx(t))
				if err := fs.Err0(); err != nil {
					t.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					got[r.Partition] = append(got[r.Partition], r.Value)
					total++
				})
			}
			for p := range int32(parts) {
				if len(got[p]) != perPart {
					t.Fatalf("partition %d: %d records, want %d", p, len(got[p]), perPart)
				}
				for i := range got[p] {
					if !bytes.Equal(got[p][i], want[p][i]) {
						t.Fatalf("partition %d record %d differs", p, i)
					}
				}
			}
			if spliced := splicedBytes(t) - before; spliced < parts*perPart*1024 {
				t.Fatalf("%.0f bytes spliced, want at least the %d record bytes", spliced, parts*perPart*1024)
			}
		})
	}
}

func splicedBytes(t *testing.T) float64 {
	var m dto.Metric
	if err := metrics.FetchSplicedBytes.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A long-poll fetch over many partitions of a topic deleted meanwhile
// answers promptly: the wait for lagging metadata is paid once per
// request, not once per partition. The broker runs on a manual clock that
// never moves: the poll cannot expire, and a wait for lagging metadata
// (per partition, or again on the re-read of a woken poll) could never
// end, so the answer shows that the re-read after the deletion waits for
// none.
func TestFetchOfDeletedTopicAnswersPromptly(t *testing.T) {
	clk := clock.NewManual(time.Now())
	stopped := make(chan struct{})
	t.Cleanup(func() { close(stopped) }) // runs after the node's stop
	n := startNodeClock(t, "", nil, clk)
	const topic, parts = "goner", 200
	cl := n.client()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx(t), parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	id := topicID(t, cl, topic)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 16
	req.ReplicaState.ID = -1
	req.MaxWaitMillis = 20000
	req.MinBytes = 1
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = id
	for p := range int32(parts) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	done := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		cl.Request(ctx(t), req)
		done <- time.Since(t0)
	}()
	// The fetch is parked on every partition.
	waitFor(t, func() bool {
		for i := range int32(parts) {
			p, err := n.b.Partition(topic, i)
			if err != nil || p.Watchers() == 0 {
				return false
			}
		}
		return true
	}, "the fetch to park")
	if _, err := adm.DeleteTopics(ctx(t), topic); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-done:
		t.Logf("the parked fetch answered %v after it was sent", d)
	case <-time.After(10 * time.Second):
		// Keep the clock moving until the node has stopped, so that the
		// stuck fetch ends and lets it.
		go func() {
			for {
				select {
				case <-stopped:
					return
				default:
					clk.Advance(time.Second)
					time.Sleep(time.Millisecond)
				}
			}
		}()
		t.Fatal("a fetch of a deleted topic's partitions still waits after 10 s with the broker's clock stopped: it waits for lagging metadata")
	}
}
