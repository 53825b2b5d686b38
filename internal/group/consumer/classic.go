package consumer

// Classic-protocol members inside a consumer group, and the online
// conversions between a classic group with members and a consumer group
// (KIP-848's upgrade and downgrade paths, Kafka's
// GroupMetadataManager.convertToConsumerGroup / convertToClassicGroup and
// classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup). A classic
// member keeps sending JoinGroup, SyncGroup and Heartbeat; the
// coordinator answers them from the consumer group's state: JoinGroup
// runs the member through the same reconciliation as a heartbeat (its
// owned partitions are those of its subscription), SyncGroup hands out
// the member's current assignment, and Heartbeat answers
// REBALANCE_IN_PROGRESS whenever the member has to rejoin to move on.

import (
	"encoding/binary"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerProtocolType is the protocol type of classic groups using the
// consumer's embedded protocol, the only ones that convert.
const ConsumerProtocolType = "consumer"

// classicJoin carries a classic member's JoinGroup through heartbeat.
type classicJoin struct {
	meta          *ClassicMemberMetadata
	owned         Assignment
	unknownMember bool
	member        *Member // set by heartbeat: the member after the join
}

// ClassicMember is a member of a classic group being converted.
type ClassicMember struct {
	ID                 string
	InstanceID         *string
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	// Protocols are the member's supported protocols, in its order.
	Protocols []ClassicProtocol
	// Subscription is its metadata for the group's selected protocol.
	Subscription []byte
	// Assignment is its current assignment (consumer protocol encoding;
	// empty before its first SyncGroup).
	Assignment []byte
}

// Downgrade is the classic group replacing a consumer group whose last
// consumer-protocol member left: it starts Stable at Generation with
// these members and their target assignments, and the caller makes it
// rebalance (Kafka's ClassicGroup.fromConsumerGroup).
type Downgrade struct {
	Group      string
	Generation int32
	Members    []ClassicMember
	// Joined: the downgrade comes from a static classic member's
	// JoinGroup that replaced the last consumer-protocol member; the
	// classic group stays Stable (no rebalance), as Kafka's
	// convertToClassicGroup with a joining member.
	Joined bool
}

// CanUpgrade reports whether a classic group of this protocol type and
// size may convert to a consumer group (Kafka's validateOnlineUpgrade).
func (mgr *Manager) CanUpgrade(protocolType string, members int) bool {
	return mgr.cfg.Migration.UpgradeEnabled() && protocolType == ConsumerProtocolType &&
		(mgr.cfg.MaxSize == 0 || members <= mgr.cfg.MaxSize)
}

// Upgrade converts a classic group with members into a consumer group
// (Kafka's ConsumerGroup.fromClassicGroup and createConsumerGroupRecords):
// every member keeps its subscription and current assignment, at member
// epoch generation, Stable, and the target assignment is the current one.
// The records are applied; the caller appends them after the classic
// group's tombstone, followed by those of the heartbeat that triggered
// the upgrade. A member whose embedded protocol does not parse fails the
// upgrade with GROUP_ID_NOT_FOUND.
func (mgr *Manager) Upgrade(now time.Time, img *Image, group string, generation int32, members []ClassicMember) (Result, *Error) {
	g := newGroup(group)
	g.Epoch, g.AssignmentEpoch = generation, generation
	ms := make([]*Member, 0, len(members))
	for _, cm := range members {
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(cm.Subscription); err != nil {
			return Result{}, errf(kerr.GroupIDNotFound, "Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", group)
		}
		assigned, err := assignmentFromBytes(img, cm.Assignment)
		if err != nil {
			return Result{}, errf(kerr.GroupIDNotFound, "Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", group)
		}
		topics := slices.Clone(sub.Topics)
		slices.Sort(topics)
		m := &Member{ID: cm.ID, InstanceID: deref(cm.InstanceID), RackID: deref(sub.Rack),
			ClientID: cm.ClientID, ClientHost: cm.ClientHost, SubscribedTopicNames: nilIfEmpty(slices.Compact(topics)),
			RebalanceTimeoutMs: cm.RebalanceTimeoutMs, Epoch: generation, PreviousEpoch: generation,
			State: MemberStable, Assigned: assigned, PendingRevocation: Assignment{},
			Classic: &ClassicMemberMetadata{SessionTimeoutMs: cm.SessionTimeoutMs, SupportedProtocols: cm.Protocols}}
		ms = append(ms, m)
	}
	var records []Record
	for _, m := range ms {
		records = append(records, memberMetadataRecord(group, m))
	}
	records = append(records, Record{Key{Type: TypeGroupMetadata, Group: group}, &GroupMetadataValue{Epoch: generation}})
	for _, m := range ms {
		records = append(records, targetMemberRecord(group, m.ID, m.Assigned))
	}
	records = append(records, Record{Key{Type: TypeTargetAssignmentMetadata, Group: group}, &TargetAssignmentMetadataValue{AssignmentEpoch: generation}})
	var timers []Timer
	for _, m := range ms {
		records = append(records, currentAssignmentRecord(group, m))
		timers = append(timers, Timer{Kind: SessionTimer, Group: group, Member: m.ID, At: now.Add(mgr.sessionOf(group, m))})
	}
	mgr.apply(records)
	return Result{Records: records, Timers: timers}, nil
}

// assignmentFromBytes decodes a consumer-protocol assignment into topic
// ids; topics that no longer exist are dropped.
func assignmentFromBytes(img *Image, b []byte) (Assignment, error) {
	if len(b) == 0 {
		return Assignment{}, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	var tps []TP
	for _, t := range a.Topics {
		ti, ok := img.Topics[t.Topic]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if p >= 0 && p < ti.Partitions {
				tps = append(tps, TP{ti.ID, p})
			}
		}
	}
	return assignmentOf(tps), nil
}

// assignmentBytes encodes a in the consumer protocol at version (the
// version of the member's subscription), topics by name.
func assignmentBytes(img *Image, a Assignment, version int16) []byte {
	out := kmsg.NewConsumerMemberAssignment()
	out.Version = max(version, 0)
	for _, tp := range a.toTopicPartitions() {
		name, ok := img.nameOf(tp.TopicID)
		if !ok {
			continue
		}
		out.Topics = append(out.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Clone(tp.Partitions)})
	}
	return out.AppendTo(nil)
}

// protocolVersion is the consumer protocol version a metadata starts with.
func protocolVersion(meta []byte) int16 {
	if len(meta) < 2 {
		return 0
	}
	return int16(binary.BigEndian.Uint16(meta))
}

// classicError is a classic API's error (code and message).
func classicError(e *kerr.Error, format string, args ...any) *Error { return errf(e, format, args...) }

// ClassicJoin serves a classic member's JoinGroup on consumer group
// req.Group (Kafka's classicGroupJoinToConsumerGroup): a new member
// without an id (v4+, dynamic) gets MEMBER_ID_REQUIRED; a member id the
// group does not have is created, as Kafka's (the id handed out is not
// remembered); otherwise the
// member's subscription and owned partitions (from its embedded protocol)
// go through the heartbeat's steps and it is answered at once with its
// member epoch as the generation, the first of its protocols as the
// group's, and no leader (the assignment comes from the coordinator).
// Its join timer is cancelled and its sync timer armed: it must send its
// SyncGroup within the request's rebalance timeout or be fenced. A static
// member taking the instance id of the last consumer-protocol member
// (or rejoining, in a group of classic members only) downgrades the group
// to a classic group when the policy allows (Kafka's
// validateOnlineDowngradeWithReplacedMemberId): the result then carries
// the Downgrade, with the joining member in the old one's place.
func (mgr *Manager) ClassicJoin(now time.Time, img *Image, client Client, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, Result) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(e *Error) (*kmsg.JoinGroupResponse, Result) {
		resp.ErrorCode = e.Code
		return resp, Result{}
	}
	g := mgr.groups[req.Group]
	if g == nil {
		return fail(classicError(kerr.UnknownMemberID, "Group %s not found.", req.Group))
	}
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = mgr.cfg.NewMemberID()
	}
	resp.MemberID = memberID
	if max := mgr.cfg.MaxSize; max > 0 && len(g.Members) >= max && g.Members[memberID] == nil &&
		(req.InstanceID == nil || g.staticMember(*req.InstanceID) == nil) {
		return fail(classicError(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", max))
	}
	if req.ProtocolType != ConsumerProtocolType || len(req.Protocols) == 0 {
		return fail(classicError(kerr.InconsistentGroupProtocol, "Member %s's protocol type is not supported by group %s.", memberID, g.ID))
	}
	if unknown && req.Version >= 4 && req.InstanceID == nil {
		// KIP-394: the member rejoins with the id handed out.
		return fail(classicError(kerr.MemberIDRequired, ""))
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return fail(classicError(kerr.InconsistentGroupProtocol, "Malformed embedded consumer protocol."))
	}
	var ownedTPs []TP
	for _, t := range sub.OwnedPartitions {
		if ti, ok := img.Topics[t.Topic]; ok {
			for _, p := range t.Partitions {
				ownedTPs = append(ownedTPs, TP{ti.ID, p})
			}
		}
	}
	meta := &ClassicMemberMetadata{SessionTimeoutMs: req.SessionTimeoutMillis}
	for _, p := range req.Protocols {
		meta.SupportedProtocols = append(meta.SupportedProtocols, ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)})
	}
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	// Checked before the join changes the group, as Kafka's (its records
	// are replayed after the check).
	downgrade := false
	if req.InstanceID != nil {
		if old := g.staticMember(*req.InstanceID); old != nil {
			downgrade = mgr.downgradeOnReplace(g, old.ID)
		}
	}
	topics := sub.Topics
	if topics == nil {
		topics = []string{}
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.InstanceID, hb.RackID = req.Group, memberID, req.InstanceID, sub.Rack
	hb.MemberEpoch, hb.RebalanceTimeoutMillis = JoinEpoch, rebalance
	hb.SubscribedTopicNames, hb.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	cl := &classicJoin{meta: meta, owned: assignmentOf(ownedTPs), unknownMember: unknown}
	_, res, e := mgr.heartbeat(now, img, client, hb, cl)
	if e != nil {
		return fail(e)
	}
	m := cl.member
	resp.Generation = m.Epoch
	pt, name := ConsumerProtocolType, req.Protocols[0].Name
	resp.ProtocolType, resp.Protocol = &pt, &name
	if downgrade && mgr.groups[req.Group] != nil {
		d := mgr.downgrade(mgr.groups[req.Group], nil, img)
		d.Downgrade.Joined = true
		res.Records = append(res.Records, d.Records...)
		res.Timers, res.Downgrade = d.Timers, d.Downgrade
		return resp, res
	}
	res.Timers = append(res.Timers,
		Timer{Kind: JoinTimer, Group: req.Group, Member: m.ID, Cancel: true},
		Timer{Kind: SyncTimer, Group: req.Group, Member: m.ID, At: now.Add(time.Duration(rebalance) * time.Millisecond)})
	return resp, res
}

// joinTimer is the join timer of a classic member told to rejoin, armed
// unless it is (Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent).
func joinTimer(now time.Time, g *Group, m *Member) Timer {
	return Timer{Kind: JoinTimer, Group: g.ID, Member: m.ID, IfAbsent: true,
		At: now.Add(time.Duration(m.RebalanceTimeoutMs) * time.Millisecond)}
}

// classicMember finds a classic member for SyncGroup, Heartbeat and
// LeaveGroup (Kafka's validateConsumerGroupMember and
// throwIfMemberDoesNotUseClassicProtocol).
func (g *Group) classicMember(memberID string, instanceID *string) (*Member, *Error) {
	var m *Member
	if instanceID == nil {
		if m = g.Members[memberID]; m == nil {
			return nil, classicError(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
		}
	} else {
		if m = g.staticMember(*instanceID); m == nil {
			return nil, classicError(kerr.UnknownMemberID, "Member with instance id %s is not a member of group %s.", *instanceID, g.ID)
		}
		if memberID != "" && m.ID != memberID {
			return nil, classicError(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, *instanceID, m.ID)
		}
	}
	if m.Classic == nil {
		return nil, classicError(kerr.UnknownMemberID, "Member %s does not use the classic protocol.", m.ID)
	}
	return m, nil
}

// protocolName is the protocol a classic member was told in its join.
func (m *Member) protocolName() string {
	if m.Classic == nil || len(m.Classic.SupportedProtocols) == 0 {
		return ""
	}
	return m.Classic.SupportedProtocols[0].Name
}

// ClassicSync serves a classic member's SyncGroup on a consumer group
// (Kafka's classicGroupSyncToConsumerGroup): the member's current
// assignment, unless its generation is not its member epoch
// (ILLEGAL_GENERATION), the protocol differs (INCONSISTENT_GROUP_PROTOCOL)
// or the group moved on and it must rejoin first (REBALANCE_IN_PROGRESS).
// The timers (the member's session, its sync timer cancelled; its join
// timer when it must rejoin) are to be scheduled.
func (mgr *Manager) ClassicSync(now time.Time, img *Image, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, []Timer) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	g := mgr.groups[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	m, e := g.classicMember(req.MemberID, req.InstanceID)
	switch {
	case e != nil:
	case req.Generation != m.Epoch:
		e = classicError(kerr.IllegalGeneration, "The request generation id %d is not equal to the member epoch %d of member %s.", req.Generation, m.Epoch, m.ID)
	case req.ProtocolType != nil && *req.ProtocolType != ConsumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.protocolName():
		e = classicError(kerr.InconsistentGroupProtocol, "The protocol of member %s does not match the one returned in the join response.", m.ID)
	case g.Epoch > m.Epoch && m.State != MemberUnrevokedPartitions:
		e = classicError(kerr.RebalanceInProgress, "A new rebalance is triggered in group %s and member %s should rejoin to catch up.", g.ID, m.ID)
		resp.ErrorCode = e.Code
		return resp, []Timer{joinTimer(now, g, m)}
	}
	if e != nil {
		resp.ErrorCode = e.Code
		return resp, nil
	}
	resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
	resp.MemberAssignment = assignmentBytes(img, m.Assigned, protocolVersion(m.Classic.SupportedProtocols[0].Metadata))
	return resp, []Timer{{Kind: SyncTimer, Group: g.ID, Member: m.ID, Cancel: true},
		{Kind: SessionTimer, Group: g.ID, Member: m.ID, At: now.Add(mgr.sessionOf(g.ID, m))}}
}

// ClassicHeartbeat serves a classic member's Heartbeat on a consumer group
// (Kafka's classicGroupHeartbeatToConsumerGroup): it resets the member's
// session and answers REBALANCE_IN_PROGRESS when the member must rejoin:
// the group epoch moved past it, it has partitions to revoke, or
// partitions it waits for were released; its join timer is then armed
// if it is not already.
func (mgr *Manager) ClassicHeartbeat(now time.Time, req *kmsg.HeartbeatRequest) (int16, []Timer) {
	g := mgr.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code, nil
	}
	m, e := g.classicMember(req.MemberID, req.InstanceID)
	if e != nil {
		return e.Code, nil
	}
	if req.Generation != m.Epoch {
		return kerr.IllegalGeneration.Code, nil
	}
	timers := []Timer{{Kind: SessionTimer, Group: g.ID, Member: m.ID, At: now.Add(mgr.sessionOf(g.ID, m))}}
	if m.Epoch < g.Epoch || m.State == MemberUnrevokedPartitions ||
		m.State == MemberUnreleasedPartitions && !g.waitingOnUnreleased(m) {
		return kerr.RebalanceInProgress.Code, append(timers, joinTimer(now, g, m))
	}
	return 0, timers
}

// waitingOnUnreleased reports whether a partition of m's target is still
// held by another member (Kafka's waitingOnUnreleasedPartition).
func (g *Group) waitingOnUnreleased(m *Member) bool {
	for _, tp := range g.Target[m.ID].TPs() {
		if !m.Assigned.Has(tp) && g.partitionEpoch(tp) != -1 {
			return true
		}
	}
	return false
}

// ClassicLeave removes a classic member (LeaveGroup; instanceID set: by
// instance, memberID may then be empty) from a consumer group and bumps
// the group epoch (Kafka's classicGroupLeaveToConsumerGroup). The
// member's id (found by instance) goes with the result.
func (mgr *Manager) ClassicLeave(img *Image, group, memberID string, instanceID *string) (string, Result, *Error) {
	g := mgr.groups[group]
	if g == nil {
		return memberID, Result{}, classicError(kerr.UnknownMemberID, "Group %s not found.", group)
	}
	m, e := g.classicMember(memberID, instanceID)
	if e != nil {
		return memberID, Result{}, e
	}
	return m.ID, mgr.fence(g, m, img), nil
}

// downgradeOnFence reports whether fencing m leaves a group of classic
// members only that may go back to being a classic group (Kafka's
// validateOnlineDowngradeWithFencedMember).
func (mgr *Manager) downgradeOnFence(g *Group, m *Member) bool {
	if m.Classic != nil || len(g.Members) <= 1 || !mgr.cfg.Migration.DowngradeEnabled() {
		return false
	}
	if max := mgr.cfg.ClassicMaxSize; max > 0 && len(g.Members)-1 > max {
		return false
	}
	for _, o := range g.Members {
		if o.ID != m.ID && o.Classic == nil {
			return false
		}
	}
	return true
}

// downgradeOnReplace reports whether a static classic member joining in
// place of member replaced (its instance id's member, itself when it
// rejoins) downgrades g (Kafka's
// validateOnlineDowngradeWithReplacedMemberId): every other member uses
// the classic protocol, the policy allows downgrades and g is within the
// classic group's maximum size.
func (mgr *Manager) downgradeOnReplace(g *Group, replaced string) bool {
	if !mgr.cfg.Migration.DowngradeEnabled() {
		return false
	}
	if max := mgr.cfg.ClassicMaxSize; max > 0 && len(g.Members) > max {
		return false
	}
	for _, o := range g.Members {
		if o.ID != replaced && o.Classic == nil {
			return false
		}
	}
	return true
}

// downgrade deletes consumer group g, whose member gone was its last
// consumer-protocol member (nil: a joining static member replaced it, and
// every member of g stays), and returns the classic group to create
// (Kafka's convertToClassicGroup): the records are the group's tombstones
// (createGroupTombstoneRecords), applied; each remaining member gets its
// target assignment.
func (mgr *Manager) downgrade(g *Group, gone *Member, img *Image) Result {
	ids := slices.Sorted(maps.Keys(g.Members))
	d := &Downgrade{Group: g.ID, Generation: g.Epoch}
	var timers []Timer
	for _, id := range ids {
		timers = append(timers, cancelTimers(g.ID, id)...)
		m := g.Members[id]
		if gone != nil && id == gone.ID {
			continue
		}
		var inst *string
		if m.InstanceID != "" {
			inst = ptr(m.InstanceID)
		}
		protos := m.Classic.clone().SupportedProtocols
		var version int16
		var meta []byte
		if len(protos) > 0 {
			meta = protos[0].Metadata
			version = protocolVersion(meta)
		}
		d.Members = append(d.Members, ClassicMember{ID: id, InstanceID: inst, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SessionTimeoutMs: m.Classic.SessionTimeoutMs, RebalanceTimeoutMs: m.RebalanceTimeoutMs,
			Protocols: protos, Subscription: meta, Assignment: assignmentBytes(img, g.Target[id], version)})
	}
	var records []Record
	for _, id := range ids {
		records = append(records, Record{Key: Key{Type: TypeCurrentMemberAssignment, Group: g.ID, Member: id}})
	}
	for _, id := range slices.Sorted(maps.Keys(g.Target)) {
		records = append(records, Record{Key: Key{Type: TypeTargetAssignmentMember, Group: g.ID, Member: id}})
	}
	records = append(records, Record{Key: Key{Type: TypeTargetAssignmentMetadata, Group: g.ID}})
	for _, id := range ids {
		records = append(records, Record{Key: Key{Type: TypeMemberMetadata, Group: g.ID, Member: id}})
	}
	for _, re := range slices.Sorted(maps.Keys(g.Regexes)) {
		records = append(records, Record{Key: Key{Type: TypeRegularExpression, Group: g.ID, Regex: re}})
	}
	records = append(records,
		Record{Key: Key{Type: TypePartitionMetadata, Group: g.ID}},
		Record{Key: Key{Type: TypeGroupMetadata, Group: g.ID}})
	mgr.apply(records)
	return Result{Records: records, Timers: timers, Downgrade: d}
}
