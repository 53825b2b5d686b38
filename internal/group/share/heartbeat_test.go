package share

import (
	"encoding/base64"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Unix(1000, 0)

// memberID is a valid client-generated member id (padded, as franz-go's).
func memberID(i byte) string { return base64.URLEncoding.EncodeToString(append(make([]byte, 15), i)) }

func testImage(version int64, topics map[string]int32) *Image {
	img := &Image{Version: version, Topics: map[string]TopicImage{}}
	for name, n := range topics {
		img.Topics[name] = TopicImage{ID: TopicID{name[0], byte(len(name))}, Partitions: n}
	}
	return img
}

// harness runs heartbeats on a Manager and checks, after each, that
// replaying every record written so far into a new Manager gives the same
// groups.
type harness struct {
	t       *testing.T
	mgr     *Manager
	img     *Image
	records []Record
	timers  map[string]Timer
}

func newHarness(t *testing.T, cfg Config, img *Image) *harness {
	return &harness{t: t, mgr: NewManager(cfg), img: img, timers: map[string]Timer{}}
}

func (h *harness) apply(res Result) {
	h.records = append(h.records, res.Records...)
	for _, tm := range res.Timers {
		if tm.Cancel {
			delete(h.timers, tm.Key())
		} else {
			h.timers[tm.Key()] = tm
		}
	}
	h.checkReplay()
}

func (h *harness) checkReplay() {
	h.t.Helper()
	again := NewManager(Config{})
	for _, r := range h.records {
		k, v := r.Encode()
		if err := again.ReplayEncoded(k, v); err != nil {
			h.t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(stripped(again), stripped(h.mgr)) {
		h.t.Fatalf("replay differs:\n got %+v\nwant %+v", stripped(again), stripped(h.mgr))
	}
}

// stripped is the persisted part of a manager's groups.
func stripped(mgr *Manager) map[string]Group {
	out := map[string]Group{}
	for id, g := range mgr.groups {
		c := *g.clone()
		c.imageVersion = 0
		for _, m := range c.Members {
			if len(m.Assigned) == 0 {
				m.Assigned = Assignment{}
			}
		}
		for id, a := range c.Target {
			if len(a) == 0 {
				c.Target[id] = Assignment{}
			}
		}
		out[id] = c
	}
	return out
}

func (h *harness) hb(group string, member byte, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, memberID(member), epoch, topics
	resp, res := h.mgr.Heartbeat(t0, h.img, Client{ID: "client", Host: "/127.0.0.1"}, req)
	h.apply(res)
	return resp
}

func assigned(resp *kmsg.ShareGroupHeartbeatResponse) int {
	n := 0
	if resp.Assignment != nil {
		for _, t := range resp.Assignment.TopicPartitions {
			n += len(t.Partitions)
		}
	}
	return n
}

func TestJoinHeartbeatLeave(t *testing.T) {
	h := newHarness(t, Config{}, testImage(1, map[string]int32{"a": 3}))
	r := h.hb("g", 1, 0, []string{"a"})
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || assigned(r) != 3 || *r.MemberID != memberID(1) || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join: %+v", r)
	}
	if tm, ok := h.timers[Timer{Group: "g", Member: memberID(1)}.Key()]; !ok || !tm.At.Equal(t0.Add(45*time.Second)) {
		t.Fatalf("session timer %+v", h.timers)
	}
	// A steady heartbeat writes nothing and sends no assignment.
	n := len(h.records)
	r = h.hb("g", 1, 1, nil)
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.Assignment != nil || len(h.records) != n {
		t.Fatalf("steady: %+v, %d records", r, len(h.records)-n)
	}
	// A second member: the group epoch moves to 2, it gets 1 partition
	// (3 over 2: 2 and 1); the first member's assignment changes at its
	// next heartbeat, without revocation.
	r2 := h.hb("g", 2, 0, []string{"a"})
	if r2.MemberEpoch != 2 || assigned(r2) != 1 {
		t.Fatalf("second join: %+v", r2)
	}
	r = h.hb("g", 1, 1, nil)
	if r.MemberEpoch != 2 || assigned(r) != 2 {
		t.Fatalf("first after second join: %+v", r)
	}
	g := h.mgr.Group("g")
	if g.State() != StateStable || g.Epoch != 2 || g.AssignmentEpoch != 2 {
		t.Fatalf("group %+v", g)
	}
	// Leave: the member is gone and the epoch bumped.
	r = h.hb("g", 2, -1, nil)
	if r.ErrorCode != 0 || r.MemberEpoch != -1 || len(g.Members) != 1 || h.mgr.Group("g").Epoch != 3 {
		t.Fatalf("leave: %+v %+v", r, h.mgr.Group("g"))
	}
	if _, ok := h.timers[Timer{Group: "g", Member: memberID(2)}.Key()]; ok {
		t.Fatal("session timer of the leaver kept")
	}
	r = h.hb("g", 1, 2, nil)
	if r.MemberEpoch != 3 || assigned(r) != 3 {
		t.Fatalf("after leave: %+v", r)
	}
	h.hb("g", 1, -1, nil)
	if g := h.mgr.Group("g"); g.State() != StateEmpty {
		t.Fatalf("state %s", g.State())
	}
}

func TestMorePartitionSharing(t *testing.T) {
	// Five members on two partitions: every member gets one partition,
	// each partition 2 or 3 members.
	h := newHarness(t, Config{}, testImage(1, map[string]int32{"a": 2}))
	for i := byte(1); i <= 5; i++ {
		h.hb("g", i, 0, []string{"a"})
	}
	for i := byte(1); i <= 5; i++ {
		h.hb("g", i, h.mgr.Group("g").Members[memberID(i)].Epoch, nil)
	}
	count := map[int32]int{}
	for _, m := range h.mgr.Group("g").Members {
		if m.Assigned.Count() != 1 {
			t.Fatalf("member %s has %v", m.ID, m.Assigned)
		}
		for _, tp := range m.Assigned.TPs() {
			count[tp.Partition]++
		}
	}
	if len(count) != 2 || count[0] < 2 || count[1] < 2 {
		t.Fatalf("sharing %v", count)
	}
}

func TestHeartbeatErrors(t *testing.T) {
	h := newHarness(t, Config{MaxSize: 2}, testImage(1, map[string]int32{"a": 1}))
	do := func(group, member string, epoch int32, topics []string) int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
		n := len(h.records)
		resp, res := h.mgr.Heartbeat(t0, h.img, Client{}, req)
		h.apply(res)
		if resp.ErrorCode != 0 && len(h.records) != n {
			t.Fatalf("error %d wrote records", resp.ErrorCode)
		}
		return resp.ErrorCode
	}
	for _, c := range []struct {
		name          string
		group, member string
		epoch         int32
		topics        []string
		want          *kerr.Error
	}{
		{"empty member id", "g", "", 0, []string{"a"}, kerr.InvalidRequest},
		{"member id not a uuid", "g", "not-a-uuid", 0, []string{"a"}, kerr.InvalidRequest},
		{"member id too short", "g", base64.RawURLEncoding.EncodeToString([]byte{1, 2}), 0, []string{"a"}, kerr.InvalidRequest},
		{"empty group", "", memberID(1), 0, []string{"a"}, kerr.InvalidRequest},
		{"join without topics", "g", memberID(1), 0, nil, kerr.InvalidRequest},
		{"epoch -2", "g", memberID(1), -2, nil, kerr.InvalidRequest},
		{"unknown group", "nope", memberID(1), 1, nil, kerr.GroupIDNotFound},
		{"leave unknown group", "nope", memberID(1), -1, nil, kerr.GroupIDNotFound},
	} {
		if got := do(c.group, c.member, c.epoch, c.topics); got != c.want.Code {
			t.Errorf("%s: %v, want %v", c.name, kerr.ErrorForCode(got), c.want)
		}
	}
	if do("g", memberID(1), 0, []string{"a"}) != 0 || do("g", memberID(2), 0, []string{"a"}) != 0 {
		t.Fatal("joins failed")
	}
	if got := do("g", memberID(3), 0, []string{"a"}); got != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: %v", kerr.ErrorForCode(got))
	}
	if got := do("g", memberID(3), 1, nil); got != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(got))
	}
	if got := do("g", memberID(1), 7, nil); got != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v", kerr.ErrorForCode(got))
	}
	// Member 1 is at epoch 2 now (member 2's join bumped it once it
	// heartbeats); its previous epoch is accepted, older ones are fenced.
	if got := do("g", memberID(1), 1, nil); got != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(got))
	}
	if r := h.hb("g", 1, 1, nil); r.ErrorCode != 0 || r.MemberEpoch != 2 || r.Assignment == nil {
		t.Fatalf("previous epoch: %+v", r)
	}
	h.hb("g", 1, 2, []string{"a", "b"}) // epoch 3
	h.hb("g", 1, 3, []string{"a"})      // epoch 4
	if got := do("g", memberID(1), 2, nil); got != kerr.FencedMemberEpoch.Code {
		t.Fatalf("old epoch: %v", kerr.ErrorForCode(got))
	}
	// A fenced member rejoins with its id at epoch 0.
	if got := do("g", memberID(1), 0, []string{"a"}); got != 0 {
		t.Fatalf("rejoin: %v", kerr.ErrorForCode(got))
	}
	if got := do("g", memberID(2), -1, nil); got != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(got))
	}
	if got := do("g", memberID(2), -1, nil); got != kerr.UnknownMemberID.Code {
		t.Fatalf("leave twice: %v", kerr.ErrorForCode(got))
	}
}

func TestTopicChangesBumpEpoch(t *testing.T) {
	h := newHarness(t, Config{}, testImage(1, map[string]int32{"a": 2}))
	h.hb("g", 1, 0, []string{"a", "b"})
	epoch := h.mgr.Group("g").Epoch
	// A new image with the same topics: nothing changes.
	h.img = testImage(2, map[string]int32{"a": 2})
	if r := h.hb("g", 1, epoch, nil); r.MemberEpoch != epoch {
		t.Fatalf("unchanged image bumped: %+v", r)
	}
	// Partitions added, a subscribed topic created, then deleted.
	for i, topics := range []map[string]int32{{"a": 3}, {"a": 3, "b": 1}, {"b": 1}} {
		h.img = testImage(int64(3+i), topics)
		r := h.hb("g", 1, epoch, nil)
		want := int(0)
		for _, n := range topics {
			want += int(n)
		}
		if r.MemberEpoch != epoch+1 || assigned(r) != want {
			t.Fatalf("step %d: %+v (want epoch %d, %d partitions)", i, r, epoch+1, want)
		}
		epoch = r.MemberEpoch
	}
	// The deleted topic left the state partitions; the others are there.
	var got []string
	for _, p := range h.mgr.Group("g").StatePartitionList() {
		got = append(got, p.Topic)
	}
	if !slices.Equal(got, []string{"b"}) {
		t.Fatalf("state partitions %v", got)
	}
}

func TestExpireAndDelete(t *testing.T) {
	h := newHarness(t, Config{SessionTimeout: time.Second}, testImage(1, map[string]int32{"a": 2}))
	h.hb("g", 1, 0, []string{"a"})
	if tm := h.timers[Timer{Group: "g", Member: memberID(1)}.Key()]; !tm.At.Equal(t0.Add(time.Second)) {
		t.Fatalf("timer %+v", tm)
	}
	if _, _, e := h.mgr.DeleteGroup("g"); e == nil || e.Code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete non-empty: %v", e)
	}
	if lt := h.mgr.LoadedTimers(t0); len(lt) != 1 || lt[0].Member != memberID(1) {
		t.Fatalf("loaded timers %+v", lt)
	}
	h.apply(h.mgr.Expire(h.img, Timer{Group: "g", Member: memberID(1)}))
	if g := h.mgr.Group("g"); len(g.Members) != 0 || g.State() != StateEmpty {
		t.Fatalf("after expiry %+v", g)
	}
	// A timer for a member already gone does nothing.
	if res := h.mgr.Expire(h.img, Timer{Group: "g", Member: memberID(1)}); len(res.Records) != 0 {
		t.Fatalf("stale timer wrote %v", res.Records)
	}
	recs, parts, e := h.mgr.DeleteGroup("g")
	if e != nil || len(parts) != 2 || parts[0].Topic != "a" || parts[1].Partition != 1 {
		t.Fatalf("delete: %v %+v", e, parts)
	}
	h.records = append(h.records, recs...)
	h.checkReplay()
	if h.mgr.Group("g") != nil {
		t.Fatal("group kept")
	}
	if _, _, e := h.mgr.DeleteGroup("g"); e == nil || e.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete twice: %v", e)
	}
}

func TestGroupOverridesAndDescribe(t *testing.T) {
	cfg := Config{GroupOverrides: func(g string) GroupSettings {
		if g == "slow" {
			return GroupSettings{SessionTimeout: time.Minute, HeartbeatInterval: 9 * time.Second}
		}
		return GroupSettings{}
	}}
	h := newHarness(t, cfg, testImage(1, map[string]int32{"a": 2, "b": 1}))
	r := h.hb("slow", 1, 0, []string{"b", "a", "a"})
	if r.HeartbeatIntervalMillis != 9000 || !h.timers[Timer{Group: "slow", Member: memberID(1)}.Key()].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("override not used: %+v", r)
	}
	d := h.mgr.DescribeGroup(h.img, "slow")
	if d.ErrorCode != 0 || d.GroupState != StateStable || d.Assignor != "simple" || len(d.Members) != 1 || d.GroupEpoch != 1 {
		t.Fatalf("describe %+v", d)
	}
	m := d.Members[0]
	if !slices.Equal(m.SubscribedTopicNames, []string{"a", "b"}) || len(m.Assignment.TopicPartitions) != 2 || m.ClientHost != "/127.0.0.1" {
		t.Fatalf("member %+v", m)
	}
	names := map[string]int{}
	for _, tp := range m.Assignment.TopicPartitions {
		names[tp.Topic] = len(tp.Partitions)
	}
	if !maps.Equal(names, map[string]int{"a": 2, "b": 1}) {
		t.Fatalf("assignment %v", names)
	}
	if d := h.mgr.DescribeGroup(h.img, "none"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown %+v", d)
	}
}
