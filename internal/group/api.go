package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/coord"
)

// Result is a response that is either ready (Resp) or must be waited for
// (Wait, which blocks until it is; call it off the connection's reader).
type Result[T any] struct {
	Resp T
	Wait func() T
	// Poll, set with Wait when the response comes from the owner,
	// returns it without blocking once it is there (a stepped
	// coordinator's caller cannot wait).
	Poll func() (T, bool)
}

func ready[T any](r T) Result[T] { return Result[T]{Resp: r} }

// Get returns the response, waiting for it if needed.
func (r Result[T]) Get() T {
	if r.Wait != nil {
		return r.Wait()
	}
	return r.Resp
}

func waitOn[T any](ch <-chan T) Result[T] {
	var got T
	have := false
	poll := func() (T, bool) {
		if !have {
			select {
			case got = <-ch:
				have = true
			default:
			}
		}
		return got, have
	}
	return Result[T]{Poll: poll, Wait: func() T {
		if !have {
			got, have = <-ch, true
		}
		return got
	}}
}

// Coordinator returns the node coordinating key (a group id), creating
// __consumer_offsets on first use. Transactional ids are mapped the same
// way, though sluice serves no transactions yet.
func (c *Coordinator) Coordinator(key string) (nodeID int32, host string, port int32, err *kerr.Error) {
	img := c.b.Image()
	t := img.Topics[OffsetsTopic]
	if t == nil {
		if c.createTopic() != nil {
			return -1, "", -1, kerr.CoordinatorNotAvailable
		}
		c.reconcile()
		img = c.b.Image()
		if t = img.Topics[OffsetsTopic]; t == nil {
			return -1, "", -1, kerr.CoordinatorNotAvailable
		}
	}
	if len(t.Partitions) == 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable
	}
	leader := t.Partitions[PartitionFor(key, int32(len(t.Partitions)))].Leader
	br, ok := img.Brokers[leader]
	if !ok {
		return -1, "", -1, kerr.CoordinatorNotAvailable
	}
	return br.ID, br.Host, br.Port, nil
}

// JoinGroup serves JoinGroup; the response waits for the join phase.
func (c *Coordinator) JoinGroup(req *kmsg.JoinGroupRequest, clientID, clientHost string) Result[*kmsg.JoinGroupResponse] {
	fail := func(e *kerr.Error) Result[*kmsg.JoinGroupResponse] {
		return ready(joinError(e.Code, req.MemberID))
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	metaBytes := 0
	for _, p := range req.Protocols {
		metaBytes += len(p.Name) + len(p.Metadata)
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol)
	case len(req.Protocols) > MaxProtocols || metaBytes > MaxMemberMetadataBytes:
		return fail(kerr.InvalidRequest)
	}
	var res Result[*kmsg.JoinGroupResponse]
	if err := c.run(req.Group, func(s *shard) {
		if e := c.classicOnly(s, req.Group); e != nil {
			res = fail(e)
			return
		}
		if s.State().consumers.Group(req.Group) != nil {
			res = c.classicJoinConsumer(s, req, clientID, clientHost)
			return
		}
		g := s.State().groups[req.Group]
		if g == nil {
			if req.MemberID != "" {
				res = fail(kerr.UnknownMemberID)
				return
			}
			if g = c.group(s, req.Group, true); g == nil {
				res = fail(kerr.CoordinatorNotAvailable)
				return
			}
		}
		if g.metadataBytes()+metaBytes > MaxGroupMetadataBytes {
			res = fail(kerr.GroupMaxSizeReached)
			return
		}
		resp, wait := g.Join(c.clock.Now(), req, clientID, clientHost)
		c.afterOp(s, g)
		if wait != nil {
			res = waitOn(wait)
		} else {
			res = ready(resp)
		}
	}); err != nil {
		return fail(err)
	}
	return res
}

// metadataBytes sums the members' protocol metadata.
func (g *Group) metadataBytes() int {
	n := 0
	for _, m := range g.members {
		for _, p := range m.protocols {
			n += len(p.name) + len(p.metadata)
		}
	}
	return n
}

// SyncGroup serves SyncGroup; followers wait for the leader's assignment.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest) Result[*kmsg.SyncGroupResponse] {
	if req.Group == "" {
		return ready(syncError(kerr.InvalidGroupID.Code))
	}
	var res Result[*kmsg.SyncGroupResponse]
	if err := c.run(req.Group, func(s *shard) {
		if s.State().consumers.Group(req.Group) != nil {
			res = ready(c.classicSyncConsumer(s, req))
			return
		}
		g := s.State().groups[req.Group]
		if g == nil {
			res = ready(syncError(kerr.UnknownMemberID.Code))
			return
		}
		resp, wait := g.Sync(c.clock.Now(), req)
		c.afterOp(s, g)
		if wait != nil {
			res = waitOn(wait)
		} else {
			res = ready(resp)
		}
	}); err != nil {
		return ready(syncError(err.Code))
	}
	return res
}

// Heartbeat serves Heartbeat.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	if err := c.run(req.Group, func(s *shard) {
		if s.State().consumers.Group(req.Group) != nil {
			resp.ErrorCode = c.classicHeartbeatConsumer(s, req)
			return
		}
		g := s.State().groups[req.Group]
		if g == nil {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return
		}
		resp.ErrorCode = g.Heartbeat(c.clock.Now(), req)
		c.afterOp(s, g)
	}); err != nil {
		resp.ErrorCode = err.Code
	}
	return resp
}

// LeaveGroup serves LeaveGroup: one member (v0-v2) or a batch (v3+, where
// each member has its own error code).
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	if err := c.run(req.Group, func(s *shard) {
		if s.State().consumers.Group(req.Group) != nil {
			resp.Members = c.classicLeaveConsumer(s, req.Group, members)
			return
		}
		g := s.State().groups[req.Group]
		now := c.clock.Now()
		for _, rm := range members {
			code := kerr.UnknownMemberID.Code
			if g != nil {
				code = g.Leave(now, rm.MemberID, rm.InstanceID)
			}
			m := kmsg.NewLeaveGroupResponseMember()
			m.MemberID, m.InstanceID, m.ErrorCode = rm.MemberID, rm.InstanceID, code
			resp.Members = append(resp.Members, m)
		}
		if g != nil {
			c.afterOp(s, g)
		}
	}); err != nil {
		resp.ErrorCode = err.Code
		return resp
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

// DescribeGroups serves DescribeGroups. An unknown group is reported Dead
// with no error, as Kafka does. Each group is described from its
// committed state (readCommitted).
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) Result[*kmsg.DescribeGroupsResponse] {
	parts := make([]Result[kmsg.DescribeGroupsResponseGroup], 0, len(req.Groups))
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		parts = append(parts, c.describe(id, req.Version, rg))
	}
	return gather(parts, func(got []kmsg.DescribeGroupsResponseGroup) *kmsg.DescribeGroupsResponse {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		resp.Groups = got
		return resp
	})
}

func (c *Coordinator) describe(id string, version int16, rg kmsg.DescribeGroupsResponseGroup) Result[kmsg.DescribeGroupsResponseGroup] {
	if id == "" {
		rg.ErrorCode = kerr.InvalidGroupID.Code
		return ready(rg)
	}
	var res Result[kmsg.DescribeGroupsResponseGroup]
	if err := c.run(id, func(s *shard) {
		res = readCommitted(s, func(s *shard) kmsg.DescribeGroupsResponseGroup {
			if cg := s.State().consumers.Group(id); cg != nil {
				return c.describeConsumerAsClassic(cg, rg)
			}
			if isShareGroup(s, id) {
				return describeShareAsClassic(id, version, rg)
			}
			return describeGroup(s.State().groups[id], rg)
		}, func(code int16) kmsg.DescribeGroupsResponseGroup {
			rg.ErrorCode = code
			return rg
		})
	}); err != nil {
		rg.ErrorCode = err.Code
		return ready(rg)
	}
	return res
}

// describeGroup fills rg from g (owner).
func describeGroup(g *Group, rg kmsg.DescribeGroupsResponseGroup) kmsg.DescribeGroupsResponseGroup {
	if g == nil {
		rg.State = Dead.String()
		return rg
	}
	rg.State = g.state.String()
	rg.ProtocolType = g.protocolType
	if g.state == Stable {
		rg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.InstanceID = m.id, m.instanceID
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		if g.state == Stable {
			rm.ProtocolMetadata = m.metadataFor(g.protocol)
			rm.MemberAssignment = m.assignment
		}
		rg.Members = append(rg.Members, rm)
	}
	return rg
}

// ListGroups serves ListGroups, with the v4 states filter (case-insensitive).
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.reconcile()
	want := map[string]bool{}
	for _, st := range req.StatesFilter {
		want[lower(st)] = true
	}
	// v5's TypesFilter (KIP-848): Kafka parses type names
	// case-insensitively (Group.GroupType.parse).
	types := map[string]bool{}
	for _, t := range req.TypesFilter {
		types[lower(t)] = true
	}
	if c.forEachShard(func(s *shard) {
		shares := s.State().shares
		if len(types) == 0 || types["share"] {
			for _, id := range shares.Groups() {
				state := shares.Group(id).State()
				if len(want) > 0 && !want[lower(state)] {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, "share", state, "share"
				resp.Groups = append(resp.Groups, lg)
			}
		}
		mgr := s.State().consumers
		if len(types) == 0 || types["consumer"] {
			for _, id := range mgr.Groups() {
				state := mgr.Group(id).State()
				if len(want) > 0 && !want[lower(state)] {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, "consumer", state, "consumer"
				resp.Groups = append(resp.Groups, lg)
			}
		}
		if len(types) > 0 && !types["classic"] {
			return
		}
		for _, g := range s.State().groups {
			if mgr.Group(g.id) != nil || shares.Group(g.id) != nil {
				continue // the offsets' holder of a consumer group
			}
			if len(want) > 0 && !want[lower(g.state.String())] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState = g.id, g.protocolType, g.state.String()
			lg.GroupType = "classic"
			resp.Groups = append(resp.Groups, lg)
		}
	}) {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	return resp
}

func lower(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}

// DeleteGroups serves DeleteGroups: only groups without members may be
// deleted (NON_EMPTY_GROUP); their offsets (pending transactional ones
// too, as Kafka's deleteAllOffsets) and metadata are tombstoned and the
// response waits until that is durable.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest) Result[*kmsg.DeleteGroupsResponse] {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	type pending struct {
		wait func() error
		i    int
	}
	var waits []pending
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		wait, code := c.deleteGroup(id)
		rg.ErrorCode = code
		if code == 0 && wait != nil {
			waits = append(waits, pending{wait, len(resp.Groups)})
		}
		resp.Groups = append(resp.Groups, rg)
	}
	if len(waits) == 0 {
		return ready(resp)
	}
	return Result[*kmsg.DeleteGroupsResponse]{Wait: func() *kmsg.DeleteGroupsResponse {
		for _, w := range waits {
			if err := w.wait(); err != nil {
				resp.Groups[w.i].ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
		return resp
	}}
}

// deleteGroup tombstones group id and removes it at once; the wait
// returned reports whether the tombstones were committed. If the append
// or its commit fails the group comes back as it was (consumer group,
// offsets holder and offsets).
func (c *Coordinator) deleteGroup(id string) (wait func() error, code int16) {
	if id == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	isShare := false
	if err := c.run(id, func(s *shard) { isShare = isShareGroup(s, id) }); err != nil {
		return nil, err.Code
	}
	if isShare {
		return c.deleteShareGroup(id)
	}
	if err := c.run(id, func(s *shard) {
		g := s.State().groups[id]
		var crecs []record
		var restore func()
		if mgr := s.State().consumers; mgr.Group(id) != nil {
			restore = mgr.Snapshot(id)
			recs, e := mgr.DeleteGroup(id)
			if e != nil {
				code = e.Code
				return
			}
			crecs = encodeConsumer(recs)
			if g == nil {
				g = c.group(s, id, true)
			}
		}
		switch {
		case g == nil || g.state == Dead:
			code = kerr.GroupIDNotFound.Code
			return
		case g.state != Empty:
			code = kerr.NonEmptyGroup.Code
			return
		}
		recs := crecs
		for _, tp := range g.offsetKeys() {
			recs = append(recs, offsetTombstone(id, tp))
		}
		recs = append(recs, groupTombstone(id))
		done, w := durable()
		// undo puts the group back if the tombstones are not committed
		// (the runtime rolls the state back to the last committed
		// offset, as Kafka's timeline data structures).
		undo := func() {
			if restore != nil {
				restore()
			}
			c.unremoveGroup(s, g)
		}
		if _, aerr := c.appendRecords(s, recs, undo, done); aerr != nil {
			code = kerr.CoordinatorNotAvailable.Code
			return
		}
		c.removeGroup(s, g)
		wait = w
	}); err != nil {
		return nil, err.Code
	}
	return wait, code
}

// readCommitted answers a read from the committed state (owner): answer
// runs at once if the state shows only committed records
// (coord.Shard.Readable), else once those it shows are (Shard.Read), or
// fail gets the error code if that commit fails. The state shows records
// above the high watermark that the load read to the log end, and those
// of the writes applied at their append (deletions, consumer and share
// groups: appendRecords); offset commits and classic group metadata are
// applied only once committed. Kafka's CoordinatorRuntime reads at the
// last committed offset instead (scheduleReadOperation, through the
// timeline snapshots of SnapshotRegistry), without waiting.
func readCommitted[T any](s *shard, answer func(*shard) T, fail func(code int16) T) Result[T] {
	if s.Readable() {
		return ready(answer(s))
	}
	ch := make(chan T, 1)
	s.Read(func(err error) {
		switch {
		case err == nil:
			ch <- answer(s)
		case err == coord.ErrNotCoordinator:
			ch <- fail(kerr.NotCoordinator.Code)
		default:
			ch <- fail(kerr.CoordinatorNotAvailable.Code)
		}
	})
	return waitOn(ch)
}

// gather is the response that build makes of the answers of parts, once
// each is there.
func gather[T, R any](parts []Result[T], build func([]T) R) Result[R] {
	got := make([]T, len(parts))
	waiting := false
	for i, p := range parts {
		if p.Wait == nil {
			got[i] = p.Resp
		} else {
			waiting = true
		}
	}
	if !waiting {
		return ready(build(got))
	}
	have := make([]bool, len(parts))
	var resp R
	built := false
	poll := func() (R, bool) {
		if built {
			return resp, true
		}
		for i, p := range parts {
			if p.Wait == nil || have[i] {
				continue
			}
			if p.Poll == nil {
				return resp, false
			}
			v, ok := p.Poll()
			if !ok {
				return resp, false
			}
			got[i], have[i] = v, true
		}
		resp, built = build(got), true
		return resp, true
	}
	return Result[R]{Poll: poll, Wait: func() R {
		if built {
			return resp
		}
		for i, p := range parts {
			if p.Wait != nil && !have[i] {
				got[i], have[i] = p.Wait(), true
			}
		}
		resp, built = build(got), true
		return resp
	}}
}
