package txn

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/clock"
)

// stepMarkers is a StepSender that keeps each request until the test
// answers it.
type stepMarkers struct {
	reqs  []*kmsg.WriteTxnMarkersRequest
	dones []func(*kmsg.WriteTxnMarkersResponse, error)
}

func (h *stepMarkers) Send(_ int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	h.reqs = append(h.reqs, req)
	h.dones = append(h.dones, done)
}

// answer answers the oldest held request: err, or every partition with
// code.
func (h *stepMarkers) answer(err error, code int16) {
	req, done := h.reqs[0], h.dones[0]
	h.reqs, h.dones = h.reqs[1:], h.dones[1:]
	if err != nil {
		done(nil, err)
		return
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: code})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	done(resp, nil)
}

// pollStepped drains c until r's answer is there.
func pollStepped[T any](t *testing.T, c *Coordinator, r Result[T]) T {
	t.Helper()
	if r.Wait == nil {
		return r.Resp
	}
	if r.Poll == nil {
		t.Fatal("a stepped coordinator's Result has no Poll")
	}
	for i := 0; i < 5000; i++ {
		c.Drain()
		if v, ok := r.Poll(); ok {
			return v
		}
		time.Sleep(time.Millisecond) // the broker's flush, in the background, moves the HW
	}
	t.Fatal("no answer")
	var zero T
	return zero
}

// stateOf reads id's state on its shard's owner.
func stateOf(t *testing.T, c *Coordinator, id string) State {
	t.Helper()
	st := State(-1)
	if err := c.run(id, func(s *shard) {
		if m := s.State().txns[id]; m != nil && m.Pending() == nil {
			st = m.State
		}
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSteppedCoordinator: a stepped coordinator serves a transaction
// without goroutines of its own: requests answer through Poll once their
// write is committed, the markers go through the StepSender, a failed
// round is retried after the backoff on the coordinator's clock, and the
// completion is written once every partition has its marker.
func TestSteppedCoordinator(t *testing.T) {
	b := openBroker(t)
	if err := b.CreateTopic(Topic, 3, 1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Now())
	cfg := ConfigFrom(b.Config())
	cfg.MarkerBackoff = 10 * time.Millisecond
	hm := &stepMarkers{}
	c := New(b, Options{Config: cfg, Clock: clk, Stepped: true, StepMarkers: hm})
	t.Cleanup(c.Close)

	var init InitResult
	for i := 0; ; i++ {
		c.Drain()
		if init = pollStepped(t, c, c.InitProducerID("a", 60000, -1, -1)); init.Err != kerr.CoordinatorLoadInProgress || i == 100 {
			break
		}
	}
	if init.Err != nil {
		t.Fatalf("InitProducerId: %v", init.Err)
	}
	parts := []Partition{{"t", 0}, {"t", 1}}
	if err := pollStepped(t, c, c.AddPartitions("a", init.ProducerID, init.Epoch, parts)); err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	if end := pollStepped(t, c, c.EndTxn("a", init.ProducerID, init.Epoch, true, 1)); end.Err != nil {
		t.Fatalf("EndTxn: %v", end.Err)
	}
	if got := stateOf(t, c, "a"); got != PrepareCommit {
		t.Fatalf("after EndTxn: %v, want PrepareCommit", got)
	}
	// The first round: one request (one node), failed.
	c.Drain()
	if len(hm.reqs) != 1 || len(hm.reqs[0].Markers) != 1 || !hm.reqs[0].Markers[0].Committed {
		t.Fatalf("marker requests %+v", hm.reqs)
	}
	hm.answer(errors.New("unreachable"), 0)
	c.Drain()
	if len(hm.reqs) != 0 {
		t.Fatal("a marker round retried before its backoff")
	}
	clk.Advance(cfg.MarkerBackoff)
	c.Drain()
	if len(hm.reqs) != 1 {
		t.Fatalf("%d marker requests after the backoff, want 1", len(hm.reqs))
	}
	mk := hm.reqs[0].Markers[0]
	if mk.ProducerID != init.ProducerID || len(mk.Topics) != 1 || len(mk.Topics[0].Partitions) != 2 {
		t.Fatalf("marker %+v", mk)
	}
	hm.answer(nil, 0)
	for i := 0; stateOf(t, c, "a") != CompleteCommit; i++ {
		if i == 5000 {
			t.Fatalf("never CompleteCommit: %v", stateOf(t, c, "a"))
		}
		c.Drain()
		time.Sleep(time.Millisecond)
	}
}
