package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionForMatchesKafka(t *testing.T) {
	for _, c := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"hello", 50, 99162322 % 50},       // "hello".hashCode() == 99162322
		{"polygenelubricants", 50, 0},      // hashCode == Integer.MIN_VALUE; Utils.abs gives 0
		{"", 50, 0},                        // hashCode 0
		{"€", 50, 8364 % 50},               // one UTF-16 unit
		{"😀", 50, (55357*31 + 56832) % 50}, // a surrogate pair
		{"Aa", 7, 2112 % 7},                // "Aa" and "BB" collide in Java
		{"BB", 7, 2112 % 7},
	} {
		if got := PartitionFor(c.group, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
	// A negative hash: "ab" * 31 ... overflow; check the result is in range.
	for _, g := range []string{"consumer-group-with-a-long-name", "zzzzzzzzzzzzzzzzzzzz"} {
		if p := PartitionFor(g, 50); p < 0 || p >= 50 {
			t.Errorf("PartitionFor(%q) = %d", g, p)
		}
	}
}

var testCfg = Config{
	InitialRebalanceDelay: 3 * time.Second,
	MinSessionTimeout:     time.Second,
	MaxSessionTimeout:     time.Hour,
	MaxGroupSize:          100,
	OffsetsRetention:      time.Hour,
}

var t0 = time.Unix(1_000_000, 0)

func jr(member string, session, rebalance time.Duration, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 3 // no MEMBER_ID_REQUIRED
	req.Group, req.MemberID = "g", member
	req.SessionTimeoutMillis = int32(session / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(rebalance / time.Millisecond)
	req.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(p + "-meta")})
	}
	return req
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatal("no response yet")
	}
	panic("unreachable")
}

func pending[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected response %+v", v)
	default:
	}
}

func TestInitialDelayExtendsWhileMembersArrive(t *testing.T) {
	g := newGroup("g", &testCfg, t0)
	_, wa := g.Join(t0, jr("", 10*time.Second, 10*time.Second), "a", "h")
	if g.State() != PreparingRebalance || !g.NextDeadline().Equal(t0.Add(3*time.Second)) {
		t.Fatalf("state %v deadline %v", g.State(), g.NextDeadline())
	}
	_, wb := g.Join(t0.Add(time.Second), jr("", 10*time.Second, 10*time.Second), "b", "h")
	g.Tick(t0.Add(3 * time.Second)) // B arrived during the delay: extend
	pending(t, wa)
	if !g.NextDeadline().Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("extended deadline %v", g.NextDeadline())
	}
	g.Tick(t0.Add(6 * time.Second))
	ra, rb := recv(t, wa), recv(t, wb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 || ra.LeaderID != ra.MemberID || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("join results: %+v / %+v", ra, rb)
	}
	if g.State() != CompletingRebalance || *ra.Protocol != "range" {
		t.Fatalf("state %v protocol %v", g.State(), *ra.Protocol)
	}
}

// stableGroup returns a stable group with members a and b (a leads).
func stableGroup(t *testing.T) (*Group, string, string) {
	t.Helper()
	cfg := testCfg
	cfg.InitialRebalanceDelay = 0
	g := newGroup("g", &cfg, t0)
	_, wa := g.Join(t0, jr("", 5*time.Second, 10*time.Second), "a", "h")
	_, wb := g.Join(t0, jr("", 5*time.Second, 10*time.Second), "b", "h")
	g.Tick(t0)
	ra, rb := recv(t, wa), recv(t, wb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 {
		t.Fatalf("join: %v %v", ra.ErrorCode, rb.ErrorCode)
	}
	_, sb := g.Sync(t0, &kmsg.SyncGroupRequest{Group: "g", MemberID: rb.MemberID, Generation: 1,
		GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{{MemberID: rb.MemberID, MemberAssignment: []byte("mine")}}})
	_, sa := g.Sync(t0, &kmsg.SyncGroupRequest{Group: "g", MemberID: ra.MemberID, Generation: 1,
		GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{{MemberID: ra.MemberID, MemberAssignment: []byte("A")}, {MemberID: rb.MemberID, MemberAssignment: []byte("B")}}})
	stores := g.drainStores()
	if len(stores) != 1 || stores[0].then == nil {
		t.Fatalf("want one store with a continuation, got %d", len(stores))
	}
	pending(t, sa)
	pending(t, sb)
	stores[0].then(t0, nil)
	if a, b := recv(t, sa), recv(t, sb); string(a.MemberAssignment) != "A" || string(b.MemberAssignment) != "B" {
		t.Fatalf("assignments %q %q (the non-leader's own assignment must be ignored)", a.MemberAssignment, b.MemberAssignment)
	}
	if g.State() != Stable {
		t.Fatalf("state %v", g.State())
	}
	return g, ra.MemberID, rb.MemberID
}

func TestSessionExpiryRebalances(t *testing.T) {
	g, a, b := stableGroup(t)
	hb := func(now time.Time, m string) int16 {
		return g.Heartbeat(now, &kmsg.HeartbeatRequest{Group: "g", MemberID: m, Generation: 1})
	}
	if c := hb(t0.Add(4*time.Second), a); c != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(c))
	}
	// b never heartbeats: it expires 5s after its sync.
	g.Tick(t0.Add(5 * time.Second))
	if g.NumMembers() != 1 || g.State() != PreparingRebalance {
		t.Fatalf("after expiry: %d members, %v", g.NumMembers(), g.State())
	}
	if c := hb(t0.Add(5*time.Second), a); c != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %v", kerr.ErrorForCode(c))
	}
	if c := hb(t0.Add(5*time.Second), b); c != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %v", kerr.ErrorForCode(c))
	}
	// a rejoins: the join completes at once (everyone is in).
	resp, w := g.Join(t0.Add(6*time.Second), jr(a, 5*time.Second, 10*time.Second), "a", "h")
	if resp != nil {
		t.Fatalf("immediate join response %+v", resp)
	}
	if r := recv(t, w); r.Generation != 2 || r.LeaderID != a || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
}

func TestRebalanceTimeoutDropsLaggards(t *testing.T) {
	g, a, b := stableGroup(t)
	// a rejoins (as leader, that triggers a rebalance); b keeps heartbeating
	// but never rejoins.
	_, w := g.Join(t0.Add(time.Second), jr(a, 5*time.Second, 10*time.Second), "a", "h")
	for s := 2; s < 11; s += 2 {
		g.Heartbeat(t0.Add(time.Duration(s)*time.Second), &kmsg.HeartbeatRequest{Group: "g", MemberID: b, Generation: 1})
		g.Tick(t0.Add(time.Duration(s) * time.Second))
	}
	pending(t, w)
	g.Tick(t0.Add(11 * time.Second)) // rebalance timeout (10s) after the join phase began
	r := recv(t, w)
	if r.Generation != 2 || len(r.Members) != 1 || g.NumMembers() != 1 {
		t.Fatalf("after timeout: gen %d, %d members listed, %d in group", r.Generation, len(r.Members), g.NumMembers())
	}
}

func TestLeaveAnswersWaiters(t *testing.T) {
	g, a, b := stableGroup(t)
	_, wa := g.Join(t0, jr(a, 5*time.Second, 10*time.Second), "a", "h")
	if c := g.Leave(t0, a, nil); c != 0 {
		t.Fatal(kerr.ErrorForCode(c))
	}
	if r := recv(t, wa); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("waiting join of a leaving member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if g.Leader() != b {
		t.Fatalf("leader %s, want %s", g.Leader(), b)
	}
	g.Leave(t0, b, nil)
	if g.State() != Empty || g.Generation() != 2 {
		t.Fatalf("after everyone left: %v gen %d", g.State(), g.Generation())
	}
	if s := g.drainStores(); len(s) != 1 {
		t.Fatalf("an emptied group is stored: %d stores", len(s))
	}
}

func TestProtocolSelection(t *testing.T) {
	cfg := testCfg
	cfg.InitialRebalanceDelay = 0
	g := newGroup("g", &cfg, t0)
	_, w1 := g.Join(t0, jr("", 5*time.Second, 5*time.Second, "roundrobin", "range", "sticky"), "a", "h")
	_, _ = g.Join(t0, jr("", 5*time.Second, 5*time.Second, "range", "roundrobin"), "b", "h")
	_, _ = g.Join(t0, jr("", 5*time.Second, 5*time.Second, "range"), "c", "h")
	if r, _ := g.Join(t0, jr("", 5*time.Second, 5*time.Second, "cooperative-sticky"), "d", "h"); r == nil || r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("a member with no common protocol: %+v", r)
	}
	g.Tick(t0)
	r := recv(t, w1)
	if *r.Protocol != "range" {
		t.Fatalf("protocol %s, want range", *r.Protocol)
	}
	for _, m := range r.Members {
		if string(m.ProtocolMetadata) != "range-meta" {
			t.Fatalf("leader got metadata %q for the chosen protocol", m.ProtocolMetadata)
		}
	}
}

func TestMemberIDRequired(t *testing.T) {
	g := newGroup("g", &testCfg, t0)
	req := jr("", 5*time.Second, 5*time.Second)
	req.Version = 4
	r, w := g.Join(t0, req, "client", "h")
	if w != nil || r.ErrorCode != kerr.MemberIDRequired.Code || len(r.MemberID) < len("client-") {
		t.Fatalf("%+v", r)
	}
	// The handed-out id expires if it is not used within the session.
	g.Tick(t0.Add(5 * time.Second))
	req.MemberID = r.MemberID
	if r2, _ := g.Join(t0.Add(5*time.Second), req, "client", "h"); r2 == nil || r2.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired pending id: %+v", r2)
	}
}

func TestOffsetExpiryRules(t *testing.T) {
	g := newGroup("g", &testCfg, t0)
	tp := TopicPartition{"t", 0}
	g.finishCommit(tp, Offset{Offset: 1, CommitTime: t0, logOffset: 5}, true)
	g.beginCommit(tp) // nothing pending after finish: count it now
	g.finishCommit(tp, Offset{Offset: 0, CommitTime: t0, logOffset: 3}, true)
	if g.offsets[tp].Offset != 1 {
		t.Fatalf("an older record overwrote a newer one: %+v", g.offsets[tp])
	}
	if e := g.expiredOffsets(t0.Add(59*time.Minute), time.Hour); len(e) != 0 {
		t.Fatalf("expired early: %v", e)
	}
	if e := g.expiredOffsets(t0.Add(time.Hour), time.Hour); len(e) != 1 {
		t.Fatalf("simple commit not expired: %v", e)
	}
	// A deletion racing an in-flight commit wins if its tombstone is later.
	g.beginCommit(tp)
	g.deleteOffset(tp, 10)
	g.finishCommit(tp, Offset{Offset: 2, logOffset: 9}, true)
	if _, ok := g.offsets[tp]; ok || g.hasOffsets() {
		t.Fatal("a commit older than the tombstone resurrected the offset")
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	g, a, _ := stableGroup(t)
	l := newLoaded()
	recs := []record{
		groupRecord(g, nil),
		offsetRecord("g", TopicPartition{"t", 1}, Offset{Offset: 7, LeaderEpoch: 3, Metadata: "m", CommitTime: t0}),
		offsetRecord("g", TopicPartition{"t", 2}, Offset{Offset: 8, CommitTime: t0}),
		offsetTombstone("g", TopicPartition{"t", 2}),
		offsetRecord("gone", TopicPartition{"t", 0}, Offset{Offset: 1, CommitTime: t0}),
		groupTombstone("gone"),
	}
	next, err := l.decodeBatches(encodeBatch(recs, t0))
	if err != nil || next != int64(len(recs)) {
		t.Fatalf("decode: next %d err %v", next, err)
	}
	offs := l.offsets["g"]
	if len(offs) != 1 || offs[TopicPartition{"t", 1}].Offset != 7 || offs[TopicPartition{"t", 1}].LeaderEpoch != 3 || offs[TopicPartition{"t", 1}].Metadata != "m" {
		t.Fatalf("offsets %+v", offs)
	}
	gv := l.groups["g"]
	if gv == nil || gv.Generation != 1 || *gv.Leader != a || len(gv.Members) != 2 || *gv.Protocol != "range" {
		t.Fatalf("group %+v", gv)
	}
	r := restoreGroup("g", &testCfg, gv, t0)
	if r.State() != Stable || r.NumMembers() != 2 || r.Leader() != a || string(r.members[a].assignment) != "A" {
		t.Fatalf("restored: %v %d %s", r.State(), r.NumMembers(), r.Leader())
	}
}
