package share

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestSessionEpochs(t *testing.T) {
	c := NewSessions(2)
	k := SessionKey{Group: "g", Member: "m"}
	tp := func(p int32) TopicPartition { return TopicPartition{TopicID: [16]byte{1}, Partition: p} }
	if _, err := c.Fetch(k, 1, "c1", nil, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Fatalf("incremental without session: %v", err)
	}
	if _, _, err := c.Acknowledge(k, 0); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("ack with epoch 0: %v", err)
	}
	r, err := c.Fetch(k, 0, "c1", []TopicPartition{tp(0)}, nil)
	if err != nil || !r.Full || len(r.Parts) != 1 {
		t.Fatalf("open: %+v %v", r, err)
	}
	if _, err := c.Fetch(k, 2, "c1", nil, nil); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("wrong epoch: %v", err)
	}
	r, err = c.Fetch(k, 1, "c1", []TopicPartition{tp(1), tp(0)}, nil)
	if err != nil || r.Full || len(r.Parts) != 2 {
		t.Fatalf("add: %+v %v", r, err)
	}
	if _, _, err := c.Acknowledge(k, 2); err != nil {
		t.Fatal(err)
	}
	r, err = c.Fetch(k, 3, "c1", nil, []TopicPartition{tp(0)})
	if err != nil || len(r.Parts) != 1 || r.Parts[0] != tp(1) {
		t.Fatalf("forget: %+v %v", r, err)
	}
	if _, err := c.Fetch(k, -1, "c1", []TopicPartition{tp(2)}, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("close with partitions: %v", err)
	}
	r, err = c.Fetch(k, -1, "c1", nil, nil)
	if err != nil || !r.Closed || len(r.Parts) != 1 {
		t.Fatalf("close: %+v %v", r, err)
	}
	if c.Len() != 0 {
		t.Fatal("session left after close")
	}
}

func TestSessionLimitAndConnClose(t *testing.T) {
	c := NewSessions(2)
	for i, m := range []string{"a", "b"} {
		if _, err := c.Fetch(SessionKey{"g", m}, 0, i, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Fetch(SessionKey{"g", "c"}, 0, 0, nil, nil); !errors.Is(err, kerr.ShareSessionLimitReached) {
		t.Fatalf("over the limit: %v", err)
	}
	// Reopening an existing session is not a new one.
	if _, err := c.Fetch(SessionKey{"g", "a"}, 0, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	closed := c.ConnClosed(0)
	if len(closed) != 1 || closed[0].Key.Member != "a" || c.Len() != 1 {
		t.Fatalf("closed %+v, %d left", closed, c.Len())
	}
	// b's session moves to connection 0: closing connection 1 leaves it.
	if _, err := c.Fetch(SessionKey{"g", "b"}, 0, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if closed := c.ConnClosed(1); len(closed) != 0 || c.Len() != 1 {
		t.Fatalf("old connection closed %+v", closed)
	}
}
