package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/remote"
)

// TestHighestCopied: the highest offset copied in a replica's epoch
// lineage (Kafka's findHighestRemoteOffset) is the newest epoch the
// remote log has, capped at that epoch's end in the replica's own log.
func TestHighestCopied(t *testing.T) {
	var c remote.Cache
	rp := remote.Partition{TopicID: [16]byte{1}, Topic: "t"}
	add := func(start, end int64, es ...epoch.Entry) {
		s := remote.Segment{Partition: rp, ID: [16]byte{byte(start)}, StartOffset: start, EndOffset: end, LeaderEpochs: es, State: remote.CopyStarted}
		if err := c.AddCopyStarted(s); err != nil {
			t.Fatal(err)
		}
		if err := c.UpdateState(remote.Update{Partition: rp, ID: s.ID, State: remote.CopyFinished}); err != nil {
			t.Fatal(err)
		}
	}
	if got := highestCopied(&c, rp, []epoch.Entry{{Epoch: 0, StartOffset: 0}}, 100); got != -1 {
		t.Fatalf("nothing copied: %d", got)
	}
	add(0, 99, epoch.Entry{Epoch: 0, StartOffset: 0})
	add(100, 289, epoch.Entry{Epoch: 0, StartOffset: 100}, epoch.Entry{Epoch: 2, StartOffset: 200})
	for _, c2 := range []struct {
		es   []epoch.Entry
		leo  int64
		want int64
	}{
		// A follower of the same lineage that now leads in epoch 3.
		{[]epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 200}, {Epoch: 3, StartOffset: 330}}, 530, 289},
		// The replica's epoch 2 ended before what was copied of it.
		{[]epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 200}, {Epoch: 3, StartOffset: 250}}, 530, 249},
		// A lineage without epoch 2: its epoch 0 ended at 149.
		{[]epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 150}}, 400, 149},
	} {
		if got := highestCopied(&c, rp, c2.es, c2.leo); got != c2.want {
			t.Errorf("epochs %v: %d, want %d", c2.es, got, c2.want)
		}
	}
}

// sleepClock is a clock whose Sleep moves it forward.
type sleepClock struct {
	now   time.Time
	slept time.Duration
}

func (c *sleepClock) Now() time.Time { return c.now }
func (c *sleepClock) Sleep(d time.Duration) {
	c.now = c.now.Add(d)
	c.slept += d
}

// TestCopyQuota: remote.log.manager.copy.max.bytes.per.second: after a
// second's burst, copies proceed at the rate.
func TestCopyQuota(t *testing.T) {
	c := &sleepClock{now: time.Unix(1000, 0)}
	q := newByteRate(c, 1000)
	ctx := context.Background()
	for range 10 {
		if err := q.wait(ctx, 500); err != nil {
			t.Fatal(err)
		}
	}
	// 5000 bytes at 1000/s with a 1000-byte burst: 4 s of waiting.
	if c.slept < 3900*time.Millisecond || c.slept > 4100*time.Millisecond {
		t.Fatalf("waited %v for 5000 bytes at 1000 B/s", c.slept)
	}
	unl := newByteRate(c, 1<<63-1)
	before := c.slept
	if err := unl.wait(ctx, 1<<30); err != nil || c.slept != before {
		t.Fatalf("unlimited rate waited %v: %v", c.slept-before, err)
	}
}

// TestRLMSettlingQuiet: leadership errors of the remote log metadata
// (NOT_LEADER_OR_FOLLOWER while a cluster starts) are retried quietly —
// no failure counted for alarm's WARN — until they have lasted
// rlmSettleTime; a successful sync starts the grace afresh; other errors
// count at once.
func TestRLMSettlingQuiet(t *testing.T) {
	c := clock.NewManual(time.Unix(1000, 0))
	r := &rlm{b: &Broker{clock: c, log: slog.New(slog.DiscardHandler)}, parts: map[TP]*rlmPart{}}
	notLeader := fmt.Errorf("reading %s-0: %w", remote.MetadataTopic, kerr.NotLeaderForPartition)
	tp := TP{"t", 0}
	r.failed(nil, notLeader)
	c.Advance(rlmSettleTime / 2)
	r.failed(&tp, notLeader)
	if r.errs != 0 {
		t.Fatalf("%d failures counted while leadership settles", r.errs)
	}
	if st := r.parts[tp]; st == nil || st.retryAt.IsZero() {
		t.Fatal("a quiet failure set no retry backoff")
	}
	c.Advance(rlmSettleTime / 2)
	r.failed(nil, notLeader)
	if r.errs != 1 || !errors.Is(r.lastErr, kerr.NotLeaderForPartition) {
		t.Fatalf("after the settle time: %d failures, last %v", r.errs, r.lastErr)
	}
	r.errs, r.settling = 0, time.Time{} // a sync succeeded
	r.failed(nil, notLeader)
	if r.errs != 0 {
		t.Fatal("the grace did not start afresh after a successful sync")
	}
	r.failed(nil, errors.New("bucket unreachable"))
	if r.errs != 1 {
		t.Fatal("another error was not counted at once")
	}
}

// TestDanglingDone: a segment left COPY_SEGMENT_STARTED is deleted by the
// leader only once it lies below the log start, off the leader's epoch
// lineage, or within finished segments of the lineage; not while its
// range is held nowhere else in the remote log, since the copy may still
// finish (an earlier leader's COPY_SEGMENT_FINISHED on its way).
func TestDanglingDone(t *testing.T) {
	rp := remote.Partition{TopicID: [16]byte{1}, Topic: "t"}
	seg := func(id byte, start, end int64, ep int32) remote.Segment {
		return remote.Segment{Partition: rp, ID: [16]byte{id}, StartOffset: start, EndOffset: end,
			LeaderEpochs: []epoch.Entry{{Epoch: ep, StartOffset: start}}, State: remote.CopyStarted}
	}
	lineage := []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 50}}
	dangling := seg(1, 0, 6, 0)
	finished := func(ss ...remote.Segment) []remote.Segment {
		for i := range ss {
			ss[i].State = remote.CopyFinished
		}
		return ss
	}
	for _, c := range []struct {
		name     string
		finished []remote.Segment
		logStart int64
		want     bool
	}{
		{"held nowhere else", nil, 0, false},
		{"its own id finished (the copy finished meanwhile)", finished(seg(1, 0, 6, 0)), 0, false},
		{"held in part", finished(seg(2, 0, 3, 0)), 0, false},
		{"copied again", finished(seg(2, 0, 3, 0), seg(3, 4, 9, 0)), 0, true},
		{"below the log start", nil, 7, true},
		{"the rest below the log start held", finished(seg(2, 5, 9, 0)), 5, true},
	} {
		if got := danglingDone(&dangling, c.finished, lineage, c.logStart, 100); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if off := seg(4, 0, 6, 2); !danglingDone(&off, nil, lineage, 0, 100) {
		t.Error("a copy off the lineage (epoch 2, which the leader's log does not have) is kept")
	}
}
