package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
)

// txnCommit sends a TxnOffsetCommit of offset for t-partition and returns
// the partition's error code.
func txnCommit(t *testing.T, c *Coordinator, group string, pid int64, epoch int16, gen int32, member string, instance *string, partition int32, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group = "tx", group
	req.ProducerID, req.ProducerEpoch = pid, epoch
	req.Generation, req.MemberID, req.InstanceID = gen, member, instance
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{rp}}}
	resp := wait(c.TxnOffsetCommit(req))
	return resp.Topics[0].Partitions[0].ErrorCode
}

// plainCommit sends a simple (generation -1) OffsetCommit.
func plainCommit(t *testing.T, c *Coordinator, group string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: offset, LeaderEpoch: -1}}}}
	if code := wait(c.OffsetCommit(req)).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("offset commit: %v", kerr.ErrorForCode(code))
	}
}

// stableFetch is OffsetFetch v7 with RequireStable of t-0: offset and
// partition error.
func stableFetch(t *testing.T, c *Coordinator, group string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.RequireStable = true
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp := c.OffsetFetch(req).Get()
	if resp.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func TestTxnOffsetCommitCompleteAndAbort(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)
	part := PartitionFor("g", 3)
	fetchOffset(t, c, "g") // loaded

	if code := txnCommit(t, c, "g", 1000, 0, -1, "", nil, 0, 10); code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}
	if o := fetchOffset(t, c, "g"); o != -1 {
		t.Fatalf("pending offset visible: %d", o)
	}
	if o, code := stableFetch(t, c, "g"); o != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require stable: offset %d, %v", o, kerr.ErrorForCode(code))
	}
	c.CompleteTxn(part, 1000, true)
	if o := fetchOffset(t, c, "g"); o != 10 {
		t.Fatalf("after commit: %d", o)
	}
	if o, code := stableFetch(t, c, "g"); o != 10 || code != 0 {
		t.Fatalf("require stable after commit: offset %d, %v", o, kerr.ErrorForCode(code))
	}

	// An aborted transaction leaves the committed offset alone.
	if code := txnCommit(t, c, "g", 1000, 0, -1, "", nil, 0, 20); code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}
	c.CompleteTxn(part, 1000, false)
	if o := fetchOffset(t, c, "g"); o != 10 {
		t.Fatalf("after abort: %d", o)
	}

	// A non-transactional commit written after the transactional one
	// wins; one written before loses.
	if code := txnCommit(t, c, "g", 2000, 0, -1, "", nil, 0, 30); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	plainCommit(t, c, "g", 0, 40)
	c.CompleteTxn(part, 2000, true)
	if o := fetchOffset(t, c, "g"); o != 40 {
		t.Fatalf("later plain commit lost to the transaction: %d", o)
	}
	plainCommit(t, c, "g", 0, 50)
	if code := txnCommit(t, c, "g", 2000, 0, -1, "", nil, 0, 60); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.CompleteTxn(part, 2000, true)
	if o := fetchOffset(t, c, "g"); o != 60 {
		t.Fatalf("later transactional commit lost: %d", o)
	}
	if n := c.numTxnOffsets.Load(); n != 0 {
		t.Fatalf("%d pending transactional offsets counted", n)
	}
}

func TestTxnOffsetCommitFencing(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)
	fetchOffset(t, c, "g")

	// Unknown group with a generation: ILLEGAL_GENERATION.
	if code := txnCommit(t, c, "g", 1, 0, 3, "m", nil, 0, 1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("unknown group: %v", kerr.ErrorForCode(code))
	}
	inst := "i-1"
	req := jr("", time.Second, time.Second)
	req.Version = 5
	req.InstanceID = &inst
	res := c.JoinGroup(req, "client", "/127.0.0.1")
	clk.Advance(0)
	jresp := wait(res)
	if jresp.ErrorCode != 0 || jresp.Generation != 1 {
		t.Fatalf("join: %v gen %d", kerr.ErrorForCode(jresp.ErrorCode), jresp.Generation)
	}
	m := jresp.MemberID
	other := "i-2"
	for _, tc := range []struct {
		name     string
		gen      int32
		member   string
		instance *string
		want     *kerr.Error
	}{
		{"member at its generation (between join and sync)", 1, m, nil, nil},
		{"static member", 1, m, &inst, nil},
		{"stale generation", 0, m, nil, kerr.IllegalGeneration},
		{"unknown member", 1, "nobody", nil, kerr.UnknownMemberID},
		{"fenced instance", 1, "nobody", &inst, kerr.FencedInstanceID},
		{"unknown instance", 1, m, &other, kerr.UnknownMemberID},
		{"generation -1 with a member id", -1, m, nil, kerr.IllegalGeneration},
		{"no member fields (v0-v2)", -1, "", nil, nil},
	} {
		var want int16
		if tc.want != nil {
			want = tc.want.Code
		}
		if code := txnCommit(t, c, "g", 7, 0, tc.gen, tc.member, tc.instance, 0, 5); code != want {
			t.Errorf("%s: got %v, want %v", tc.name, kerr.ErrorForCode(code), tc.want)
		}
	}
	c.CompleteTxn(PartitionFor("g", 3), 7, false)

	// A producer epoch older than the partition knows is fenced.
	if code := txnCommit(t, c, "simple", 9, 3, -1, "", nil, 0, 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := txnCommit(t, c, "simple", 9, 2, -1, "", nil, 0, 2); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older epoch: %v", kerr.ErrorForCode(code))
	}
}

// appendMarker writes producer pid's transaction marker to p.
func appendMarker(t *testing.T, p *broker.Partition, pid int64, epoch int16, commit bool, now time.Time) {
	t.Helper()
	m := batch.EncodeMarker(pid, epoch, batch.Marker{Commit: commit}, now.UnixMilli())
	if _, err := p.Append(m, now); err != nil {
		t.Fatalf("marker: %v", err)
	}
}

func TestTxnOffsetsReload(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)
	part := PartitionFor("g", 3)
	fetchOffset(t, c, "g") // creates __consumer_offsets
	p, err := b.Partition(OffsetsTopic, part)
	if err != nil {
		t.Fatal(err)
	}

	// pid 1 commits 11, pid 2 aborts 22, pid 3 leaves 33 open; a plain
	// commit of 44 lands between pid 4's transactional 40 and its commit
	// marker and must stay.
	for _, st := range []struct {
		pid int64
		off int64
	}{{1, 11}, {2, 22}, {3, 33}, {4, 40}} {
		if code := txnCommit(t, c, "g", st.pid, 0, -1, "", nil, 0, st.off); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	appendMarker(t, p, 1, 0, true, clk.Now())
	appendMarker(t, p, 2, 0, false, clk.Now())
	c.CompleteTxn(part, 1, true)
	c.CompleteTxn(part, 2, false)
	if o := fetchOffset(t, c, "g"); o != 11 {
		t.Fatalf("before reload: %d", o)
	}
	plainCommit(t, c, "g", 0, 44)
	appendMarker(t, p, 4, 0, true, clk.Now())
	c.CompleteTxn(part, 4, true)
	if o := fetchOffset(t, c, "g"); o != 44 {
		t.Fatalf("before reload: %d", o)
	}

	c.Close()
	if err := p.Commit(p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	c2 := testCoordinator(t, b, clk)
	if o := fetchOffset(t, c2, "g"); o != 44 {
		t.Fatalf("after reload: %d", o)
	}
	if o, code := stableFetch(t, c2, "g"); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pid 3's open transaction not pending after reload: %d %v", o, kerr.ErrorForCode(code))
	}
	appendMarker(t, p, 3, 0, true, clk.Now())
	c2.CompleteTxn(part, 3, true)
	// pid 3's 33 sits before the plain 44 in the log: 44 stays.
	if o, code := stableFetch(t, c2, "g"); o != 44 || code != 0 {
		t.Fatalf("after pid 3 commits: %d %v", o, kerr.ErrorForCode(code))
	}
	if code := txnCommit(t, c2, "g", 3, 0, -1, "", nil, 0, 55); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	appendMarker(t, p, 3, 0, true, clk.Now())
	c2.CompleteTxn(part, 3, true)
	if o, code := stableFetch(t, c2, "g"); o != 55 || code != 0 {
		t.Fatalf("after pid 3's second transaction: %d %v", o, kerr.ErrorForCode(code))
	}

	// A third coordinator reads the same from the log.
	c2.Close()
	if err := p.Commit(p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	c3 := testCoordinator(t, b, clk)
	fetchOffset(t, c3, "g") // loaded
	if o, code := stableFetch(t, c3, "g"); o != 55 || code != 0 {
		t.Fatalf("second reload: %d %v", o, kerr.ErrorForCode(code))
	}
}

func TestTxnOffsetsRetentionAndDelete(t *testing.T) {
	clk := clock.NewManual(time.Unix(2_000_000, 0))
	b := openBroker(t, t.TempDir())
	c := testCoordinator(t, b, clk)
	fetchOffset(t, c, "g")

	// A group holding only pending transactional offsets is neither
	// expired nor removed.
	if code := txnCommit(t, c, "g", 5, 0, -1, "", nil, 0, 8); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	clk.Advance(2 * time.Hour)
	c.ExpireNow()
	if lg := c.ListGroups(kmsg.NewPtrListGroupsRequest()); len(lg.Groups) != 1 {
		t.Fatalf("group with pending offsets removed: %+v", lg.Groups)
	}
	c.CompleteTxn(PartitionFor("g", 3), 5, true)
	if o := fetchOffset(t, c, "g"); o != 8 {
		t.Fatalf("after commit: %d", o)
	}

	// DeleteGroups deletes an empty group with pending offsets, and
	// them with it (Kafka's deleteAllOffsets).
	if code := txnCommit(t, c, "g", 6, 0, -1, "", nil, 0, 9); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	if code := wait(c.DeleteGroups(del)).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	c.CompleteTxn(PartitionFor("g", 3), 6, true)
	if o := fetchOffset(t, c, "g"); o != -1 {
		t.Fatalf("deleted group has offset %d", o)
	}
	if n := c.numTxnOffsets.Load(); n != 0 {
		t.Fatalf("%d pending transactional offsets counted", n)
	}

	// Replayed, the deletion's tombstone drops the pending offsets of both
	// producers (no marker was written for either).
	c.Close()
	p, _ := b.Partition(OffsetsTopic, PartitionFor("g", 3))
	if err := p.Commit(p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	c2 := testCoordinator(t, b, clk)
	fetchOffset(t, c2, "g")
	if o, code := stableFetch(t, c2, "g"); o != -1 || code != 0 {
		t.Fatalf("after reload: %d %v", o, kerr.ErrorForCode(code))
	}
	if n := c2.numTxnOffsets.Load(); n != 0 {
		t.Fatalf("%d pending transactional offsets after reload", n)
	}
}
