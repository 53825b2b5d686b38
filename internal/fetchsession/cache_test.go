package fetchsession

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_700_000_000, 0)} }
func key(topic string, p int32) Key      { return Key{Topic: topic, Partition: p} }
func entry(topic string, p int32, off int64) Entry {
	return Entry{Key: key(topic, p), Request: Request{FetchOffset: off, LogStartOffset: -1, MaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
		Result: Result{HighWatermark: 10, LastStableOffset: 10, LogStartOffset: 0}}
}

func entries(topic string, n int) []Entry {
	var es []Entry
	for i := 0; i < n; i++ {
		es = append(es, entry(topic, int32(i), 0))
	}
	return es
}

func seqIDs() func() int32 {
	var n int32
	return func() int32 { n++; return n }
}

func TestCreateIncrementalEpochs(t *testing.T) {
	clk := newClock()
	c := New(Config{Slots: 10, Now: clk.now})
	id := c.Create(false, false, entries("t", 3))
	if id <= 0 {
		t.Fatalf("session id %d", id)
	}
	if st := c.Stats(); st.Sessions != 1 || st.Partitions != 3 {
		t.Fatalf("stats %+v", st)
	}
	if _, code := c.Incremental(id+1, 1, false, nil, nil); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown id: code %d", code)
	}
	if _, code := c.Incremental(id, 2, false, nil, nil); code != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: code %d", code)
	}
	if _, code := c.Incremental(id, 1, true, nil, nil); code != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v13 request on a name session: code %d", code)
	}
	tx, code := c.Incremental(id, 1, false, nil, nil)
	if code != 0 || tx.Len() != 3 {
		t.Fatalf("incremental: code %d", code)
	}
	// Nothing changed: nothing is sent.
	res := make([]Result, 3)
	for i := range res {
		res[i] = Result{HighWatermark: 10, LastStableOffset: 10}
	}
	inc, ok := tx.Commit(res)
	if !ok || inc[0] || inc[1] || inc[2] {
		t.Fatalf("unchanged partitions included: %v %v", inc, ok)
	}
	// The same epoch again is a duplicate.
	if _, code := c.Incremental(id, 1, false, nil, nil); code != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("repeated epoch: code %d", code)
	}
	if _, code := c.Incremental(id, 2, false, nil, nil); code != 0 {
		t.Fatalf("epoch 2: code %d", code)
	}
	if !c.Remove(id) || c.Remove(id) {
		t.Fatal("remove")
	}
	if st := c.Stats(); st.Sessions != 0 || st.Partitions != 0 {
		t.Fatalf("stats after remove %+v", st)
	}
}

func TestNextEpochWraps(t *testing.T) {
	if NextEpoch(0) != 1 || NextEpoch(41) != 42 || NextEpoch(math.MaxInt32) != 1 || NextEpoch(-1) != -1 {
		t.Fatal("NextEpoch")
	}
}

func TestMustRespondRules(t *testing.T) {
	c := New(Config{Slots: 1})
	id := c.Create(false, false, entries("t", 1))
	base := Result{HighWatermark: 10, LastStableOffset: 10, LogStartOffset: 0}
	cases := []struct {
		name string
		mod  func(*Result)
		want bool
	}{
		{"unchanged", func(*Result) {}, false},
		{"records", func(r *Result) { r.Records = true }, true},
		{"hw", func(r *Result) { r.HighWatermark = 11 }, true},
		{"lso", func(r *Result) { r.LastStableOffset = 9 }, true},
		{"log start", func(r *Result) { r.LogStartOffset = 1 }, true},
		{"error", func(r *Result) { r.Error = kerr.NotLeaderForPartition.Code }, true},
		{"diverging", func(r *Result) { r.Diverging = true }, true},
		{"preferred replica", func(r *Result) { r.PreferredReadReplica = true }, true},
	}
	epoch := int32(1)
	for _, tc := range cases {
		tx, code := c.Incremental(id, epoch, false, nil, nil)
		if code != 0 {
			t.Fatalf("%s: code %d", tc.name, code)
		}
		epoch++
		r := base
		tc.mod(&r)
		if got := tx.MustRespond(0, r); got != tc.want {
			t.Errorf("%s: MustRespond %v, want %v", tc.name, got, tc.want)
		}
		// Not committed: the cached state stays the base one, except for
		// the records case which changes nothing cached.
	}
	// After an error is sent, the partition is sent again once it clears.
	tx, _ := c.Incremental(id, epoch, false, nil, nil)
	epoch++
	tx.Commit([]Result{{Error: kerr.NotLeaderForPartition.Code, HighWatermark: 10, LastStableOffset: 10}})
	tx, _ = c.Incremental(id, epoch, false, nil, nil)
	if !tx.MustRespond(0, base) {
		t.Fatal("a partition recovered from an error is not resent")
	}
}

func TestCommitRecordsOnlyWhatIsSent(t *testing.T) {
	c := New(Config{Slots: 1})
	id := c.Create(false, false, entries("t", 2))
	tx, _ := c.Incremental(id, 1, false, nil, nil)
	// A first read saw an HW change on partition 0 but was replaced by a
	// later read (the long poll) where partition 1 got records instead.
	first := []Result{{HighWatermark: 11, LastStableOffset: 11}, {HighWatermark: 10, LastStableOffset: 10}}
	if !tx.MustRespond(0, first[0]) {
		t.Fatal("hw change not seen")
	}
	final := []Result{{HighWatermark: 10, LastStableOffset: 10}, {HighWatermark: 12, LastStableOffset: 12, Records: true}}
	inc, ok := tx.Commit(final)
	if !ok || inc[0] || !inc[1] {
		t.Fatalf("include %v", inc)
	}
	// Partition 1 returned records: it moved to the back of the order.
	tx, _ = c.Incremental(id, 2, false, nil, nil)
	if k, _ := tx.Partition(0); k.Partition != 0 {
		t.Fatalf("order after records: partition %d first", k.Partition)
	}
	if tx.MustRespond(1, Result{HighWatermark: 12, LastStableOffset: 12}) {
		t.Fatal("sent HW not recorded")
	}
	if !tx.MustRespond(0, Result{HighWatermark: 11, LastStableOffset: 11}) {
		t.Fatal("an HW never sent was recorded")
	}
	// Another request on the session in between: the commit fails.
	if _, code := c.Incremental(id, 3, false, nil, nil); code != 0 {
		t.Fatal(code)
	}
	if _, ok := tx.Commit(final); ok {
		t.Fatal("commit after a later request succeeded")
	}
}

func TestRecordsRotateToBack(t *testing.T) {
	c := New(Config{Slots: 1})
	id := c.Create(false, false, entries("t", 3))
	tx, _ := c.Incremental(id, 1, false, nil, nil)
	r := Result{HighWatermark: 10, LastStableOffset: 10}
	rec := r
	rec.Records = true
	tx.Commit([]Result{rec, r, rec})
	tx, _ = c.Incremental(id, 2, false, nil, nil)
	var order []int32
	for i := 0; i < tx.Len(); i++ {
		k, _ := tx.Partition(i)
		order = append(order, k.Partition)
	}
	if order[0] != 1 || order[1] != 0 || order[2] != 2 {
		t.Fatalf("order %v, want [1 0 2]", order)
	}
}

func TestUpdatesAndForget(t *testing.T) {
	c := New(Config{Slots: 1})
	id := c.Create(false, false, entries("t", 2))
	up := entry("t", 1, 7)
	add := entry("u", 0, 3)
	tx, code := c.Incremental(id, 1, false, []Entry{up, add}, []Key{key("t", 0), key("nope", 9)})
	if code != 0 || tx.Len() != 2 {
		t.Fatalf("code %d len %d", code, tx.Len())
	}
	k0, r0 := tx.Partition(0)
	k1, r1 := tx.Partition(1)
	if k0 != key("t", 1) || r0.FetchOffset != 7 || k1 != key("u", 0) || r1.FetchOffset != 3 {
		t.Fatalf("partitions %v %v %v %v", k0, r0, k1, r1)
	}
	// A new partition is always sent first time.
	if !tx.MustRespond(1, Result{}) {
		t.Fatal("added partition not sent")
	}
	if st := c.Stats(); st.Partitions != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Forgetting everything closes the session.
	tx, code = c.Incremental(id, 2, false, nil, []Key{key("t", 1), key("u", 0)})
	if tx != nil || code != 0 {
		t.Fatalf("empty session: %v %d", tx, code)
	}
	if st := c.Stats(); st.Sessions != 0 || st.Partitions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTopicIDKeys(t *testing.T) {
	c := New(Config{Slots: 1})
	a, b := [16]byte{1}, [16]byte{2}
	id := c.Create(false, true, []Entry{{Key: Key{TopicID: a, Topic: "t", Partition: 0}}})
	// The same name under another id is another partition; forgetting
	// by id matches without the name.
	tx, code := c.Incremental(id, 1, true, []Entry{{Key: Key{TopicID: b, Partition: 0}}}, []Key{{TopicID: a, Partition: 0}})
	if code != 0 || tx.Len() != 1 {
		t.Fatalf("code %d", code)
	}
	if k, _ := tx.Partition(0); k.TopicID != b || k.Topic != "" {
		t.Fatalf("key %+v", k)
	}
}

func TestMaxPartitions(t *testing.T) {
	c := New(Config{Slots: 2, MaxPartitions: 3})
	if id := c.Create(false, false, entries("t", 4)); id != 0 {
		t.Fatal("session over the partition limit created")
	}
	id := c.Create(false, false, entries("t", 3))
	if _, code := c.Incremental(id, 1, false, []Entry{entry("t", 3, 0)}, nil); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("growing past the limit: code %d", code)
	}
	if st := c.Stats(); st.Sessions != 0 || st.Partitions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDisabled(t *testing.T) {
	c := New(Config{Slots: 0})
	if id := c.Create(true, false, entries("t", 1)); id != 0 {
		t.Fatal("session created with 0 slots")
	}
}

func TestEviction(t *testing.T) {
	clk := newClock()
	c := New(Config{Slots: 2, Now: clk.now, NewID: seqIDs(), EvictionAge: time.Minute})
	small := c.Create(false, false, entries("t", 2))
	big := c.Create(false, false, entries("t", 5))
	if small != 1 || big != 2 {
		t.Fatal(small, big)
	}
	// Full, all young: a consumer cannot evict a young consumer session.
	if id := c.Create(false, false, entries("t", 10)); id != 0 {
		t.Fatal("young consumer session evicted by a consumer")
	}
	// A follower evicts the least valuable consumer session at once.
	f1 := c.Create(true, false, entries("t", 1))
	if f1 == 0 || c.Remove(small) {
		t.Fatalf("follower did not evict the smallest consumer session (%d)", f1)
	}
	// Now {big (consumer,5), f1 (follower,1)}; another follower evicts
	// the consumer (consumers are less valuable), not the young follower.
	f2 := c.Create(true, false, entries("t", 1))
	if f2 == 0 || c.Remove(big) {
		t.Fatal("follower did not evict the consumer session")
	}
	// {f1, f2}, both young followers: nobody gets in.
	if c.Create(true, false, entries("t", 100)) != 0 || c.Create(false, false, entries("t", 100)) != 0 {
		t.Fatal("a young follower session was evicted")
	}
	// Once older than the eviction age, a bigger session may evict the
	// smaller one; an equal-sized one may not.
	clk.advance(30 * time.Second)
	if _, code := c.Incremental(f2, 1, false, []Entry{entry("t", 5, 0)}, nil); code != 0 { // f2 now has 2
		t.Fatal(code)
	}
	clk.advance(31 * time.Second)
	if _, code := c.Incremental(f1, 1, false, nil, nil); code != 0 { // keep f1 recently used
		t.Fatal(code)
	}
	if c.Create(false, false, entries("t", 5)) != 0 {
		t.Fatal("a consumer evicted an old follower session")
	}
	if c.Create(true, false, entries("t", 1)) != 0 {
		t.Fatal("equal-sized newcomer evicted an old session")
	}
	n := c.Create(true, false, entries("t", 3))
	if n == 0 || c.Remove(f1) {
		// f1 (1 partition) is the least valuable old session.
		t.Fatalf("bigger newcomer did not evict the smallest old session (%d)", n)
	}
	// A stale session (unused for longer than the age) goes first, even
	// to a smaller consumer newcomer.
	clk.advance(2 * time.Minute)
	if _, code := c.Incremental(f2, 2, false, nil, nil); code != 0 {
		t.Fatal(code)
	}
	if id := c.Create(false, false, entries("t", 1)); id == 0 || c.Remove(n) {
		t.Fatal("stale session not evicted")
	}
	if c.Stats().Evictions != 4 {
		t.Fatalf("evictions %d", c.Stats().Evictions)
	}
}
