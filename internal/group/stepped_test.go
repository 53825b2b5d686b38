package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
)

// TestSteppedOffsetCommit: a stepped coordinator serves OffsetCommit
// without goroutines of its own: the commit answers through Poll once its
// write is committed (Drain polls the high watermark), and only then does
// OffsetFetch see it.
func TestSteppedOffsetCommit(t *testing.T) {
	b := openBroker(t, t.TempDir())
	if err := b.CreateTopic(OffsetsTopic, 3, 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	cfg := ConfigFrom(b.Config())
	c := New(b, Options{Config: cfg, Clock: clock.NewManual(time.Now()), Stepped: true})
	t.Cleanup(c.Close)
	c.Drain()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}}}
	r := c.OffsetCommit(req)
	if r.Wait != nil && r.Poll == nil {
		t.Fatal("a stepped coordinator's Result has no Poll")
	}
	for i := 0; ; i++ {
		if r.Wait == nil {
			break
		}
		if _, ok := r.Poll(); ok {
			break
		}
		if i == 5000 {
			t.Fatal("OffsetCommit never answered")
		}
		c.Drain()
		time.Sleep(time.Millisecond) // the broker's flush, in the background, moves the HW
	}
	resp := wait(r)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit: code %d", code)
	}
	if got := fetchOffset(t, c, "g"); got != 42 {
		t.Fatalf("OffsetFetch: %d, want 42", got)
	}
}
