package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Result is a response that is either ready (Resp) or must be waited for
// (Wait, which blocks until it is; call it off the connection's reader).
type Result[T any] struct {
	Resp T
	Wait func() T
}

func ready[T any](r T) Result[T] { return Result[T]{Resp: r} }

func waitOn[T any](ch <-chan T) Result[T] {
	return Result[T]{Wait: func() T { return <-ch }}
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
	s, err := c.lockShard(req.Group)
	if err != nil {
		return fail(err)
	}
	defer s.mu.Unlock()
	g := s.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return fail(kerr.UnknownMemberID)
		}
		if g = c.group(s, req.Group, true); g == nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
	}
	if g.metadataBytes()+metaBytes > MaxGroupMetadataBytes {
		return fail(kerr.GroupMaxSizeReached)
	}
	resp, wait := g.Join(c.clock.Now(), req, clientID, clientHost)
	c.afterOp(s, g)
	if wait != nil {
		return waitOn(wait)
	}
	return ready(resp)
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
	s, err := c.lockShard(req.Group)
	if err != nil {
		return ready(syncError(err.Code))
	}
	defer s.mu.Unlock()
	g := s.groups[req.Group]
	if g == nil {
		return ready(syncError(kerr.UnknownMemberID.Code))
	}
	resp, wait := g.Sync(c.clock.Now(), req)
	c.afterOp(s, g)
	if wait != nil {
		return waitOn(wait)
	}
	return ready(resp)
}

// Heartbeat serves Heartbeat.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	s, err := c.lockShard(req.Group)
	if err != nil {
		resp.ErrorCode = err.Code
		return resp
	}
	defer s.mu.Unlock()
	g := s.groups[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	resp.ErrorCode = g.Heartbeat(c.clock.Now(), req)
	c.afterOp(s, g)
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
	s, err := c.lockShard(req.Group)
	if err != nil {
		resp.ErrorCode = err.Code
		return resp
	}
	defer s.mu.Unlock()
	g := s.groups[req.Group]
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
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

// DescribeGroups serves DescribeGroups. An unknown group is reported Dead
// with no error, as Kafka does.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		resp.Groups = append(resp.Groups, c.describe(id, rg))
	}
	return resp
}

func (c *Coordinator) describe(id string, rg kmsg.DescribeGroupsResponseGroup) kmsg.DescribeGroupsResponseGroup {
	if id == "" {
		rg.ErrorCode = kerr.InvalidGroupID.Code
		return rg
	}
	s, err := c.lockShard(id)
	if err != nil {
		rg.ErrorCode = err.Code
		return rg
	}
	defer s.mu.Unlock()
	g := s.groups[id]
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
	// case-insensitively (Group.GroupType.parse); every group here is
	// classic, so a filter without "classic" lists none.
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return lower(t) == "classic" }) {
		return resp
	}
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	for _, s := range shards {
		s.mu.Lock()
		if s.loading {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		for _, g := range s.groups {
			if len(want) > 0 && !want[lower(g.state.String())] {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState = g.id, g.protocolType, g.state.String()
			lg.GroupType = "classic"
			resp.Groups = append(resp.Groups, lg)
		}
		s.mu.Unlock()
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
	type durable struct {
		s   *shard
		end int64
		i   int
	}
	var waits []durable
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		s, end, code := c.deleteGroup(id)
		rg.ErrorCode = code
		if code == 0 && end > 0 {
			waits = append(waits, durable{s, end, len(resp.Groups)})
		}
		resp.Groups = append(resp.Groups, rg)
	}
	if len(waits) == 0 {
		return ready(resp)
	}
	return Result[*kmsg.DeleteGroupsResponse]{Wait: func() *kmsg.DeleteGroupsResponse {
		for _, w := range waits {
			if err := w.s.p.Commit(w.end); err != nil {
				resp.Groups[w.i].ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
		return resp
	}}
}

func (c *Coordinator) deleteGroup(id string) (*shard, int64, int16) {
	if id == "" {
		return nil, 0, kerr.InvalidGroupID.Code
	}
	s, err := c.lockShard(id)
	if err != nil {
		return nil, 0, err.Code
	}
	defer s.mu.Unlock()
	g := s.groups[id]
	switch {
	case g == nil || g.state == Dead:
		return nil, 0, kerr.GroupIDNotFound.Code
	case g.state != Empty:
		return nil, 0, kerr.NonEmptyGroup.Code
	}
	var recs []record
	for _, tp := range g.offsetKeys() {
		recs = append(recs, offsetTombstone(id, tp))
	}
	recs = append(recs, groupTombstone(id))
	_, end, aerr := c.appendRecords(s, recs)
	if aerr != nil {
		return nil, 0, kerr.CoordinatorNotAvailable.Code
	}
	c.removeGroup(s, g)
	return s, end, 0
}
