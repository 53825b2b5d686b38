package handler_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/share"
)

// TestShareDLQOnLockExpiry (KIP-1191): records whose acquisition lock
// passes at the group's delivery limit, with no fetch coming, are
// archived by the expiry sweep through the dead-letter topic: the sweep's
// write makes their Archiving state durable, then they are copied with
// Kafka's delivery-limit message, and then the share partition's start
// offset moves past them, durably.
func TestShareDLQOnLockExpiry(t *testing.T) {
	props := maps.Clone(dlqProps)
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", props, clk)
	const dlq, group = "dlq.q", "sg"
	sharePartTopic(t, n, "q", 2)
	yes := "true"
	createTopic(t, n.client(), dlq, 1, map[string]*string{"errors.deadletterqueue.group.enable": &yes})
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2",
		"errors.deadletterqueue.topic.name": dlq} {
		setGroupConfig(t, n, group, k, v)
	}
	id, _ := n.b.TopicID("q")
	key := share.Key{Group: group, TopicID: id, Partition: 0}

	if got := acquiredOf(t, newShareMember(t, n, group, "q").fetch(0)); len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("first delivery %v", got)
	}
	expireLocks(t, n, clk, key, 1, 0, 1)
	if got := acquiredOf(t, newShareMember(t, n, group, "q").fetch(0)); len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("second delivery %v", got)
	}
	// The locks pass at the limit; only the sweep runs.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				clk.Advance(100 * time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	recs := readAll(t, n, dlq, 2)
	if len(recs) != 2 {
		t.Fatalf("%d dead-letter records, want 2", len(recs))
	}
	for _, r := range recs {
		h := headers(r)
		if h["__dlq.errors.delivery.count"] != "2" || h["__dlq.errors.message"] != "Offset delivery count exceeded the threshold." {
			t.Fatalf("dead letter headers %v", h)
		}
	}
	waitFor(t, func() bool {
		st, err := n.h.SharePartitions().Persister().Read(context.Background(), key, 0)
		return err == nil && st.StartOffset == 2
	}, "the durable start offset past the dead-lettered records")
}
