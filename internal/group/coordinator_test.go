package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
)

func openBroker(t *testing.T, dir string) *broker.Broker {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = dir
	cfg.Props["offsets.topic.num.partitions"] = "3"
	b, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("t", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func testCoordinator(t *testing.T, b *broker.Broker, clk *clock.Manual) *Coordinator {
	cfg := ConfigFrom(b.Config())
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = time.Second
	cfg.OffsetsRetention = time.Hour
	cfg.RetentionCheckInterval = time.Minute
	c := New(b, Options{Config: cfg, Clock: clk})
	t.Cleanup(c.Close)
	return c
}

func wait[T any](r Result[T]) T {
	if r.Wait != nil {
		return r.Wait()
	}
	return r.Resp
}

func fetchOffset(t *testing.T, c *Coordinator, group string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 5
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	for i := 0; i < 1000; i++ {
		resp := c.OffsetFetch(req).Get()
		if resp.ErrorCode == 0 {
			return resp.Topics[0].Partitions[0].Offset
		}
		time.Sleep(time.Millisecond) // loading
	}
	t.Fatal("coordinator never loaded")
	return 0
}

func TestCoordinatorExpiresOffsetsDurably(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)

	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = "simple"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 17, LeaderEpoch: -1}}}}
	if code := wait(c.OffsetCommit(req)).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatal(code)
	}
	if o := fetchOffset(t, c, "simple"); o != 17 {
		t.Fatalf("committed %d", o)
	}
	clk.Advance(59 * time.Minute)
	if o := fetchOffset(t, c, "simple"); o != 17 {
		t.Fatalf("expired early: %d", o)
	}
	clk.Advance(2 * time.Minute)
	if o := fetchOffset(t, c, "simple"); o != -1 {
		t.Fatalf("not expired after the retention: %d", o)
	}
	// A new coordinator replays the log: the tombstones hold.
	c.Close()
	p, _ := b.Partition(OffsetsTopic, PartitionFor("simple", 3))
	if err := p.Commit(p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	c2 := testCoordinator(t, b, clk)
	if o := fetchOffset(t, c2, "simple"); o != -1 {
		t.Fatalf("expired offset came back after reload: %d", o)
	}
	lg := c2.ListGroups(kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 0 {
		t.Fatalf("expired group still listed: %+v", lg.Groups)
	}
}

func TestCoordinatorSessionTimer(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)
	req := jr("", time.Second, time.Second)
	req.Group = "g"
	res := c.JoinGroup(req, "client", "/127.0.0.1")
	if res.Wait == nil {
		t.Fatalf("join answered at once: %+v", res.Resp)
	}
	clk.Advance(0) // the (zero) initial delay
	r := res.Wait()
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	describe := func() kmsg.DescribeGroupsResponseGroup {
		return c.DescribeGroups(&kmsg.DescribeGroupsRequest{Groups: []string{"g"}}).Get().Groups[0]
	}
	if d := describe(); d.State != "CompletingRebalance" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	clk.Advance(999 * time.Millisecond)
	if d := describe(); len(d.Members) != 1 {
		t.Fatalf("expired early: %+v", d)
	}
	clk.Advance(time.Millisecond)
	if d := describe(); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after the session timeout: %+v", d)
	}
}
