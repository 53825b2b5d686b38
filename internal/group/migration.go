package group

// Online migration between classic groups with members and KIP-848
// consumer groups (group.consumer.migration.policy), on the shard's
// owner: a ConsumerGroupHeartbeat on a running classic group converts it
// (upgrade), the classic members then live in the consumer group and
// their JoinGroup, SyncGroup, Heartbeat and LeaveGroup are answered from
// it (consumer/classic.go), and when the last consumer-protocol member
// leaves, the group goes back to being a classic group that rebalances
// (downgrade). As Kafka's GroupMetadataManager.convertToConsumerGroup and
// convertToClassicGroup.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/group/consumer"
)

// classicMembers describes g's members for consumer.Manager.Upgrade.
func (g *Group) classicMembers() []consumer.ClassicMember {
	var out []consumer.ClassicMember
	for _, m := range g.sortedMembers() {
		cm := consumer.ClassicMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeoutMs:   int32(m.sessionTimeout / time.Millisecond),
			RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond),
			Assignment:         m.assignment}
		for _, p := range m.protocols {
			cm.Protocols = append(cm.Protocols, consumer.ClassicProtocol{Name: p.name, Metadata: p.metadata})
		}
		cm.Subscription = m.metadataFor(g.protocol)
		if cm.Subscription == nil && len(m.protocols) > 0 {
			cm.Subscription = m.protocols[0].metadata
		}
		out = append(out, cm)
	}
	return out
}

// clearForUpgrade answers g's waiting JoinGroup and SyncGroup requests
// with REBALANCE_IN_PROGRESS (Kafka's completeAllJoinFutures and
// completeAllSyncFutures: the members rejoin the consumer group) and
// drops its members, leaving the Empty holder of the group's offsets.
// restore puts the members back (the upgrade's append failed).
func (g *Group) clearForUpgrade(now time.Time) (restore func()) {
	for _, m := range g.members {
		if m.joinWait != nil {
			m.joinWait <- joinError(kerr.RebalanceInProgress.Code, m.id)
			m.joinWait = nil
		}
		if m.syncWait != nil {
			m.syncWait <- syncError(kerr.RebalanceInProgress.Code)
			m.syncWait = nil
		}
	}
	saved := *g
	restore = func() {
		g.state, g.stateSince, g.generation = saved.state, saved.stateSince, saved.generation
		g.protocolType, g.protocol, g.leader = saved.protocolType, saved.protocol, saved.leader
		g.members, g.static, g.pending, g.subscribed = saved.members, saved.static, saved.pending, saved.subscribed
		g.joinDeadline, g.initialDelay = saved.joinDeadline, saved.initialDelay
		g.initialRemaining, g.newMemberAdded = saved.initialRemaining, saved.newMemberAdded
	}
	g.awaiting = 0
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
	g.protocol, g.leader, g.subscribed = "", "", nil
	g.initialDelay, g.newMemberAdded = false, false
	g.transition(Empty, now)
	return restore
}

// upgrade converts classic group g, which has members, into a consumer
// group in mgr (owner): the records (the classic group's tombstone, then
// the consumer group's) are returned with the session timers of the
// converted members; undo puts both back. A group that may not convert
// (policy, protocol type, size) answers GROUP_ID_NOT_FOUND, as Kafka's.
func (c *Coordinator) upgrade(s *shard, g *Group) (recs []record, timers []consumer.Timer, undo func(), e *consumer.Error) {
	mgr := s.State().consumers
	if !mgr.CanUpgrade(g.protocolType, len(g.members)) {
		return nil, nil, nil, &consumer.Error{Code: kerr.GroupIDNotFound.Code, Message: "Group " + g.id + " is not a consumer group."}
	}
	now := c.clock.Now()
	restoreMgr := mgr.Snapshot(g.id)
	r, e := mgr.Upgrade(now, c.consumerImage(), g.id, g.generation, g.classicMembers())
	if e != nil {
		restoreMgr()
		return nil, nil, nil, e
	}
	restoreGroup := g.clearForUpgrade(now)
	c.log.Info("upgrading classic group to consumer group", "group", g.id, "members", len(r.Timers), "generation", g.generation)
	recs = append([]record{groupTombstone(g.id)}, encodeConsumer(r.Records)...)
	return recs, r.Timers, func() { restoreMgr(); restoreGroup() }, nil
}

// adoptDowngrade turns g, the Empty holder of a consumer group's offsets,
// into the classic group d describes (Kafka's
// ClassicGroup.fromConsumerGroup): Stable at d's generation with d's
// members and assignments, then rebalancing so that they rejoin, unless
// a joining static member replaced the last consumer-protocol member
// (d.Joined: the group stays Stable, and the joining member syncs). It
// returns the GroupMetadataValue record to append and the undo.
func (g *Group) adoptDowngrade(now time.Time, d *consumer.Downgrade) (record, func()) {
	for _, dm := range d.Members {
		g.seq++
		session := time.Duration(dm.SessionTimeoutMs) * time.Millisecond
		rebalance := time.Duration(dm.RebalanceTimeoutMs) * time.Millisecond
		if rebalance <= 0 {
			rebalance = session
		}
		m := &member{id: dm.ID, instanceID: dm.InstanceID, clientID: dm.ClientID, clientHost: dm.ClientHost,
			sessionTimeout: session, rebalanceTimeout: rebalance, protocolType: consumer.ConsumerProtocolType,
			assignment: dm.Assignment, seq: g.seq, expireAt: now.Add(session)}
		for _, p := range dm.Protocols {
			m.protocols = append(m.protocols, protocol{name: p.Name, metadata: p.Metadata})
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	}
	g.protocolType = consumer.ConsumerProtocolType
	g.generation = d.Generation
	g.protocol = g.selectProtocol()
	g.leader = g.sortedMembers()[0].id
	g.computeSubscribed()
	g.transition(Stable, now)
	rec := groupRecord(g, nil)
	if !d.Joined {
		g.prepareRebalance(now)
	}
	return rec, func() {
		for _, m := range g.members {
			if m.joinWait != nil {
				m.joinWait <- joinError(kerr.CoordinatorNotAvailable.Code, m.id)
			}
			if m.syncWait != nil {
				m.syncWait <- syncError(kerr.CoordinatorNotAvailable.Code)
			}
		}
		g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
		g.awaiting = 0
		g.protocol, g.leader, g.subscribed = "", "", nil
		g.transition(Empty, now)
	}
}

// consumerRecords encodes a Manager result for the append (owner): with a
// downgrade, the classic group's record follows the consumer group's
// tombstones and the holder group is converted; undo reverts that part.
func (c *Coordinator) consumerRecords(s *shard, r consumer.Result) (recs []record, undo func()) {
	recs = encodeConsumer(r.Records)
	if r.Downgrade == nil {
		return recs, func() {}
	}
	g := c.group(s, r.Downgrade.Group, true)
	if g == nil {
		return recs, func() {}
	}
	rec, undo := g.adoptDowngrade(c.clock.Now(), r.Downgrade)
	c.log.Info("downgraded consumer group to classic group", "group", g.id, "members", len(r.Downgrade.Members), "generation", g.generation)
	c.schedule(s, g)
	return append(recs, rec), undo
}

// classicJoinConsumer serves a classic member's JoinGroup on consumer
// group req.Group (owner).
func (c *Coordinator) classicJoinConsumer(s *shard, req *kmsg.JoinGroupRequest, clientID, clientHost string) Result[*kmsg.JoinGroupResponse] {
	mgr := s.State().consumers
	restore := mgr.Snapshot(req.Group)
	resp, r := mgr.ClassicJoin(c.clock.Now(), c.consumerImage(), consumer.Client{ID: clientID, Host: clientHost}, req)
	if len(r.Records) == 0 {
		c.consumerTimers(s, r.Timers)
		return ready(resp)
	}
	return appendConsumer(c, s, r, restore, resp, func(e *kerr.Error) *kmsg.JoinGroupResponse {
		return joinError(e.Code, req.MemberID)
	})
}

// appendConsumer appends a Manager result's records (owner) and answers
// resp once they are committed, or fail's answer if the append fails (the
// state is then restored).
func appendConsumer[T any](c *Coordinator, s *shard, r consumer.Result, restore func(), resp T, fail func(*kerr.Error) T) Result[T] {
	recs, undoDowngrade := c.consumerRecords(s, r)
	answer := make(chan T, 1)
	_, aerr := c.appendRecords(s, recs, func() { undoDowngrade(); restore() }, func(err error) {
		if err != nil {
			answer <- fail(appendError(err))
			return
		}
		c.consumerTimers(s, r.Timers)
		answer <- resp
	})
	if aerr != nil {
		return ready(fail(kerr.CoordinatorNotAvailable))
	}
	return waitOn(answer)
}

// classicSyncConsumer serves a classic member's SyncGroup on a consumer
// group (owner).
func (c *Coordinator) classicSyncConsumer(s *shard, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp, timers := s.State().consumers.ClassicSync(c.clock.Now(), c.consumerImage(), req)
	c.consumerTimers(s, timers)
	return resp
}

// classicHeartbeatConsumer serves a classic member's Heartbeat on a
// consumer group (owner).
func (c *Coordinator) classicHeartbeatConsumer(s *shard, req *kmsg.HeartbeatRequest) int16 {
	code, timers := s.State().consumers.ClassicHeartbeat(c.clock.Now(), req)
	c.consumerTimers(s, timers)
	return code
}

// classicLeaveConsumer removes classic members from a consumer group
// (owner); the records are appended without waiting, as the classic
// group's own leave.
func (c *Coordinator) classicLeaveConsumer(s *shard, group string, members []kmsg.LeaveGroupRequestMember) []kmsg.LeaveGroupResponseMember {
	mgr := s.State().consumers
	img := c.consumerImage()
	var out []kmsg.LeaveGroupResponseMember
	for _, rm := range members {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID, m.InstanceID = rm.MemberID, rm.InstanceID
		if mgr.Group(group) == nil {
			m.ErrorCode = kerr.UnknownMemberID.Code
			out = append(out, m)
			continue
		}
		restore := mgr.Snapshot(group)
		id, r, e := mgr.ClassicLeave(img, group, rm.MemberID, rm.InstanceID)
		if e != nil {
			m.ErrorCode = e.Code
			out = append(out, m)
			continue
		}
		m.MemberID = id
		recs, undo := c.consumerRecords(s, r)
		if _, err := c.appendRecords(s, recs, func() { undo(); restore() }, nil); err != nil {
			m.ErrorCode = kerr.CoordinatorNotAvailable.Code
		} else {
			c.consumerTimers(s, r.Timers)
		}
		out = append(out, m)
	}
	return out
}
