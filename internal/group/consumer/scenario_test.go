package consumer

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestScenarios runs the scenario files in testdata/ (datadriven; rewrite
// the expected output with -rewrite). One group "g" on a hand-driven
// clock and metadata image. Commands:
//
//	config [max-size=N] [session-ms=N] [heartbeat-ms=N] [group-session-ms=N] [group-heartbeat-ms=N]
//	                            broker settings, and group g's own overrides
//	topics                      one "name partitions" a line; bumps the image version
//	hb member=M epoch=E [v=0|1] [instance=I] [rack=R] [topics=(a,b)] [regex=RE]
//	   [assignor=A] [owned=(a:0.1,b:2)|none] [rebalance-ms=N] [client=C]
//	                            a ConsumerGroupHeartbeat; prints the answer, records, timers
//	tick ms=N                   advance the clock
//	expire member=M kind=session|rebalance [epoch=E]
//	state                       the group's state
//	describe [v=N]              ConsumerGroupDescribe of g
//	commit member=M epoch=E     OffsetCommit v9+ validation
//	delete                      DeleteGroups on g
//	replay                      replay every record so far (encoded) into a fresh
//	                            manager and compare with the live state
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := newEnv(Config{})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type env struct {
	mgr  *Manager
	img  *Image
	now  time.Time
	log  [][2][]byte // every record, encoded
	ids  int
	cfg  Config
	name map[TopicID]string
}

func newEnv(cfg Config) *env {
	e := &env{
		img:  &Image{Topics: map[string]TopicImage{}},
		now:  time.Unix(1_700_000_000, 0),
		cfg:  cfg,
		name: map[TopicID]string{},
	}
	e.cfg.NewMemberID = func() string { e.ids++; return fmt.Sprintf("gen%d", e.ids) }
	e.mgr = NewManager(e.cfg)
	return e
}

func topicID(name string) TopicID {
	h := sha256.Sum256([]byte(name))
	return TopicID(h[:16])
}

func (e *env) fmtAssignment(a Assignment) string {
	var parts []string
	for t, ps := range a {
		var s []string
		for _, p := range ps {
			s = append(s, strconv.Itoa(int(p)))
		}
		parts = append(parts, e.name[t]+":"+strings.Join(s, "."))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func (e *env) parseAssignment(s string) Assignment {
	if s == "" {
		return Assignment{}
	}
	var tps []TP
	for _, part := range strings.Split(s, ",") {
		name, ps, _ := strings.Cut(part, ":")
		for _, p := range strings.Split(ps, ".") {
			n, _ := strconv.Atoi(p)
			tps = append(tps, TP{topicID(name), int32(n)})
		}
	}
	return assignmentOf(tps)
}

func (e *env) fmtRecord(r Record) string {
	id := r.Key.Member
	if r.Key.Regex != "" {
		id = r.Key.Regex
	}
	name := typeNames[r.Key.Type]
	if id != "" {
		name += "(" + id + ")"
	}
	switch v := r.Value.(type) {
	case nil:
		return name + " tombstone"
	case *GroupMetadataValue:
		return fmt.Sprintf("%s epoch=%d", name, v.Epoch)
	case *PartitionMetadataValue:
		var s []string
		for _, t := range v.Topics {
			s = append(s, fmt.Sprintf("%s/%d", t.TopicName, t.NumPartitions))
		}
		return fmt.Sprintf("%s %s", name, strings.Join(s, ","))
	case *MemberMetadataValue:
		return fmt.Sprintf("%s topics=%v regex=%s assignor=%s instance=%s", name, v.SubscribedTopicNames,
			deref(v.SubscribedTopicRegex), deref(v.ServerAssignor), deref(v.InstanceID))
	case *TargetAssignmentMetadataValue:
		return fmt.Sprintf("%s epoch=%d", name, v.AssignmentEpoch)
	case *TargetAssignmentMemberValue:
		return fmt.Sprintf("%s %s", name, e.fmtAssignment(fromTopicPartitions(v.TopicPartitions)))
	case *CurrentMemberAssignmentValue:
		return fmt.Sprintf("%s epoch=%d prev=%d %s assigned=%s revoking=%s", name, v.MemberEpoch, v.PreviousMemberEpoch,
			MemberState(v.State), e.fmtAssignment(fromTopicPartitions(v.AssignedPartitions)),
			e.fmtAssignment(fromTopicPartitions(v.PartitionsPendingRevocation)))
	case *RegularExpressionValue:
		return fmt.Sprintf("%s %v", name, v.Topics)
	}
	return name
}

func (e *env) fmtResult(res Result) string {
	var b strings.Builder
	for _, r := range res.Records {
		k, v := r.Encode()
		e.log = append(e.log, [2][]byte{k, v})
		fmt.Fprintf(&b, "record %s\n", e.fmtRecord(r))
	}
	for _, t := range res.Timers {
		kind := [...]string{SessionTimer: "session", RebalanceTimer: "rebalance", JoinTimer: "join", SyncTimer: "sync"}[t.Kind]
		if t.IfAbsent {
			kind += " if-absent"
		}
		if t.Kind == RegexTimer {
			fmt.Fprintf(&b, "timer regex at=+%dms\n", t.At.Sub(e.now).Milliseconds())
			continue
		}
		if t.Cancel {
			fmt.Fprintf(&b, "timer %s %s cancel\n", kind, t.Member)
		} else if t.Kind == RebalanceTimer {
			fmt.Fprintf(&b, "timer %s %s epoch=%d at=+%dms\n", kind, t.Member, t.Epoch, t.At.Sub(e.now).Milliseconds())
		} else {
			fmt.Fprintf(&b, "timer %s %s at=+%dms\n", kind, t.Member, t.At.Sub(e.now).Milliseconds())
		}
	}
	return b.String()
}

func arg(d *datadriven.TestData, key string) (string, bool) {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return strings.Join(a.Vals, ","), true
		}
	}
	return "", false
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	s, ok := arg(d, key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return n
}

func (e *env) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "config":
		e.cfg.MaxSize = intArg(t, d, "max-size", 0)
		e.cfg.SessionTimeout = time.Duration(intArg(t, d, "session-ms", 45000)) * time.Millisecond
		e.cfg.HeartbeatInterval = time.Duration(intArg(t, d, "heartbeat-ms", 5000)) * time.Millisecond
		over := GroupSettings{
			SessionTimeout:    time.Duration(intArg(t, d, "group-session-ms", 0)) * time.Millisecond,
			HeartbeatInterval: time.Duration(intArg(t, d, "group-heartbeat-ms", 0)) * time.Millisecond,
		}
		e.cfg.GroupOverrides = func(group string) GroupSettings {
			if group == "g" {
				return over
			}
			return GroupSettings{}
		}
		e.mgr.cfg = e.cfg.withDefaults()
		return ""
	case "topics":
		img := &Image{Version: e.img.Version + 1, Topics: map[string]TopicImage{}}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			if line == "" {
				continue
			}
			name, n, _ := strings.Cut(line, " ")
			p, _ := strconv.Atoi(n)
			img.Topics[name] = TopicImage{ID: topicID(name), Partitions: int32(p)}
			e.name[topicID(name)] = name
		}
		e.img = img
		return ""
	case "tick":
		e.now = e.now.Add(time.Duration(intArg(t, d, "ms", 0)) * time.Millisecond)
		return ""
	case "hb":
		return e.heartbeat(t, d)
	case "expire":
		m, _ := arg(d, "member")
		kind, _ := arg(d, "kind")
		tm := Timer{Kind: SessionTimer, Group: "g", Member: m, At: e.now}
		switch kind {
		case "rebalance":
			tm.Kind, tm.Epoch = RebalanceTimer, int32(intArg(t, d, "epoch", 0))
		case "regex":
			tm.Kind = RegexTimer
		}
		res := e.mgr.Expire(e.now, e.img, tm)
		if len(res.Records) == 0 {
			return "no-op\n"
		}
		return e.fmtResult(res)
	case "state":
		return e.state()
	case "describe":
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = int16(intArg(t, d, "v", 1))
		req.Groups = []string{"g"}
		resp := e.mgr.Describe(e.img, req)
		var b strings.Builder
		for _, g := range resp.Groups {
			if g.ErrorCode != 0 {
				fmt.Fprintf(&b, "%s: %v %s\n", g.Group, kerr.ErrorForCode(g.ErrorCode), deref(g.ErrorMessage))
				continue
			}
			fmt.Fprintf(&b, "%s state=%s epoch=%d assignment-epoch=%d assignor=%s\n", g.Group, g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName)
			for _, m := range g.Members {
				fmt.Fprintf(&b, "  %s epoch=%d instance=%s client=%s topics=%v regex=%s type=%d assigned=%s target=%s\n",
					m.MemberID, m.MemberEpoch, deref(m.InstanceID), m.ClientID, m.SubscribedTopics, deref(m.SubscribedTopicRegex),
					m.MemberType, fmtKAssignment(m.Assignment), fmtKAssignment(m.TargetAssignment))
			}
		}
		return b.String()
	case "commit":
		m, _ := arg(d, "member")
		code, ok := e.mgr.ValidateOffsetCommit("g", m, int32(intArg(t, d, "epoch", 0)))
		if !ok {
			return "not a consumer group\n"
		}
		if code == 0 {
			return "ok\n"
		}
		return kerr.ErrorForCode(code).Error() + "\n"
	case "delete":
		recs, err := e.mgr.DeleteGroup("g")
		if err != nil {
			return err.Error() + "\n"
		}
		return e.fmtResult(Result{Records: recs})
	case "replay":
		fresh := NewManager(e.cfg)
		for _, kv := range e.log {
			if err := fresh.ReplayEncoded(kv[0], kv[1]); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		if diff := compareManagers(e.mgr, fresh); diff != "" {
			t.Fatalf("replayed state differs: %s", diff)
		}
		return fmt.Sprintf("replayed %d records: same state\n", len(e.log))
	}
	t.Fatalf("unknown command %s", d.Cmd)
	return ""
}

func fmtKAssignment(a kmsg.Assignment) string {
	var parts []string
	for _, tp := range a.TopicPartitions {
		var s []string
		for _, p := range tp.Partitions {
			s = append(s, strconv.Itoa(int(p)))
		}
		parts = append(parts, tp.Topic+":"+strings.Join(s, "."))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// compareManagers compares two managers' groups, ignoring what is not
// persisted.
func compareManagers(a, b *Manager) string {
	if !slices.Equal(a.Groups(), b.Groups()) {
		return fmt.Sprintf("groups %v vs %v", a.Groups(), b.Groups())
	}
	for _, id := range a.Groups() {
		ga, gb := *a.groups[id], *b.groups[id]
		ga.imageVersion, gb.imageVersion = 0, 0
		if !reflect.DeepEqual(ga, gb) {
			return fmt.Sprintf("group %s:\n live %+v\n replayed %+v", id, ga, gb)
		}
	}
	return ""
}

func (e *env) heartbeat(t *testing.T, d *datadriven.TestData) string {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(intArg(t, d, "v", 1))
	req.Group = "g"
	if g, ok := arg(d, "group"); ok {
		req.Group = g
	}
	req.MemberID, _ = arg(d, "member")
	req.MemberEpoch = int32(intArg(t, d, "epoch", 0))
	req.RebalanceTimeoutMillis = -1
	if req.MemberEpoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	req.RebalanceTimeoutMillis = int32(intArg(t, d, "rebalance-ms", int(req.RebalanceTimeoutMillis)))
	if s, ok := arg(d, "instance"); ok {
		req.InstanceID = &s
	}
	if s, ok := arg(d, "rack"); ok {
		req.RackID = &s
	}
	if s, ok := arg(d, "topics"); ok {
		req.SubscribedTopicNames = []string{}
		if s != "" {
			req.SubscribedTopicNames = strings.Split(s, ",")
		}
	}
	if s, ok := arg(d, "regex"); ok {
		req.SubscribedTopicRegex = &s
	}
	if s, ok := arg(d, "assignor"); ok {
		req.ServerAssignor = &s
	}
	if s, ok := arg(d, "owned"); ok {
		if s == "none" {
			req.Topics = nil
		} else {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			for tid, ps := range e.parseAssignment(s) {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tid, Partitions: ps})
			}
		}
	}
	client := Client{ID: "client", Host: "/127.0.0.1"}
	if s, ok := arg(d, "client"); ok {
		client.ID = s
	}
	before := e.snapshot()
	resp, res := e.mgr.Heartbeat(e.now, e.img, client, req)
	var b strings.Builder
	if resp.ErrorCode != 0 {
		fmt.Fprintf(&b, "error %v: %s\n", kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
		if len(res.Records) != 0 || len(res.Timers) != 0 {
			t.Fatalf("an error produced records or timers")
		}
		if diff := compareManagers(before, e.mgr); diff != "" {
			t.Fatalf("an error changed the state: %s", diff)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "member=%s epoch=%d interval=%d", deref(resp.MemberID), resp.MemberEpoch, resp.HeartbeatIntervalMillis)
	if resp.Assignment != nil {
		a := Assignment{}
		for _, tp := range resp.Assignment.Topics {
			a = a.union(assignmentOf(func() []TP {
				var out []TP
				for _, p := range tp.Partitions {
					out = append(out, TP{tp.TopicID, p})
				}
				return out
			}()))
		}
		fmt.Fprintf(&b, " assignment=%s", e.fmtAssignment(a))
	}
	b.WriteString("\n")
	b.WriteString(e.fmtResult(res))
	e.checkInvariants(t)
	return b.String()
}

// snapshot is a copy of the manager rebuilt from the log, to check that
// an error changed nothing.
func (e *env) snapshot() *Manager {
	m := NewManager(e.cfg)
	for _, kv := range e.log {
		_ = m.ReplayEncoded(kv[0], kv[1])
	}
	for id, g := range e.mgr.groups {
		if mg := m.groups[id]; mg != nil {
			mg.imageVersion = g.imageVersion
		}
	}
	return m
}

// checkInvariants: no partition is owned (assigned or pending revocation)
// by two members at once.
func (e *env) checkInvariants(t *testing.T) {
	for _, g := range e.mgr.groups {
		owner := map[TP]string{}
		for _, id := range slices.Sorted(maps.Keys(g.Members)) {
			m := g.Members[id]
			for _, tp := range m.Assigned.union(m.PendingRevocation).TPs() {
				if o, dup := owner[tp]; dup {
					t.Fatalf("%v owned by %s and %s", tp, o, id)
				}
				owner[tp] = id
			}
		}
	}
}

func (e *env) state() string {
	g := e.mgr.groups["g"]
	if g == nil {
		return "no group\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s epoch=%d assignment-epoch=%d\n", g.State(), g.Epoch, g.AssignmentEpoch)
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		fmt.Fprintf(&b, "  %s epoch=%d prev=%d %s assigned=%s revoking=%s target=%s\n", id, m.Epoch, m.PreviousEpoch, m.State,
			e.fmtAssignment(m.Assigned), e.fmtAssignment(m.PendingRevocation), e.fmtAssignment(g.Target[id]))
	}
	return b.String()
}
