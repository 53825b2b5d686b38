package share

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func errf(e *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: e.Code, Message: fmt.Sprintf(format, args...)}
}

// ValidMemberID reports whether id is a UUID in base64 as clients send
// member ids: 16 bytes, with or without padding. Kafka's Uuid.fromString
// reads the URL-safe alphabet; librdkafka writes its member ids with the
// standard one ('+' and '/'), so both are accepted (never a mix).
func ValidMemberID(id string) bool {
	encs := []*base64.Encoding{base64.RawURLEncoding, base64.RawStdEncoding}
	switch len(id) {
	case 22:
	case 24:
		encs = []*base64.Encoding{base64.URLEncoding, base64.StdEncoding}
	default:
		return false
	}
	for _, enc := range encs {
		if b, err := enc.DecodeString(id); err == nil && len(b) == 16 {
			return true
		}
	}
	return false
}

// validate is Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, in its
// order: the client generates its member id (KIP-932), so it must be a
// UUID.
func validate(req *kmsg.ShareGroupHeartbeatRequest) *Error {
	if strings.TrimSpace(req.MemberID) == "" {
		return errf(kerr.InvalidRequest, "MemberId can't be empty.")
	}
	if !ValidMemberID(req.MemberID) {
		return errf(kerr.InvalidRequest, "MemberId must be a valid UUID.")
	}
	if strings.TrimSpace(req.GroupID) == "" {
		return errf(kerr.InvalidRequest, "GroupId can't be empty.")
	}
	if req.RackID != nil && strings.TrimSpace(*req.RackID) == "" {
		return errf(kerr.InvalidRequest, "RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e == JoinEpoch:
		if len(req.SubscribedTopicNames) == 0 {
			return errf(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
		}
	case e < LeaveEpoch:
		return errf(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	return nil
}

// errorResponse is an answer carrying only an error.
func errorResponse(req *kmsg.ShareGroupHeartbeatRequest, e *Error) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = e.Code
	resp.ErrorMessage = &e.Message
	return resp
}

// Heartbeat handles a ShareGroupHeartbeat (v0-v1) as Kafka's
// GroupMetadataManager.shareGroupHeartbeat: it returns the answer and the
// records and timers the caller must append and schedule. On an error
// nothing changes and the result is empty. The caller answers first for a
// group id used by a classic or consumer group (GROUP_ID_NOT_FOUND,
// "Group %s is not a share group.").
func (mgr *Manager) Heartbeat(now time.Time, img *Image, client Client, req *kmsg.ShareGroupHeartbeatRequest) (*kmsg.ShareGroupHeartbeatResponse, Result) {
	if e := validate(req); e != nil {
		return errorResponse(req, e), Result{}
	}
	var resp *kmsg.ShareGroupHeartbeatResponse
	var res Result
	var e *Error
	if req.MemberEpoch == LeaveEpoch {
		resp, res, e = mgr.leave(img, req)
	} else {
		resp, res, e = mgr.heartbeat(now, img, client, req)
	}
	if e != nil {
		return errorResponse(req, e), Result{}
	}
	return resp, res
}

// checkEpoch is Kafka's throwIfShareGroupMemberEpochIsInvalid: an epoch
// ahead of the member's is fenced, one behind too unless it is the
// previous epoch (the answer carrying the bump was lost).
func checkEpoch(m *Member, received int32) *Error {
	if received > m.Epoch {
		return errf(kerr.FencedMemberEpoch, "The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.Epoch)
	}
	if received < m.Epoch && received != m.PreviousEpoch {
		return errf(kerr.FencedMemberEpoch, "The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.Epoch)
	}
	return nil
}

func (mgr *Manager) heartbeat(now time.Time, img *Image, client Client, req *kmsg.ShareGroupHeartbeatRequest) (*kmsg.ShareGroupHeartbeatResponse, Result, *Error) {
	joining := req.MemberEpoch == JoinEpoch
	g := mgr.groups[req.GroupID]
	if g == nil {
		if !joining {
			return nil, Result{}, errf(kerr.GroupIDNotFound, "Share group %s not found.", req.GroupID)
		}
		g = newGroup(req.GroupID)
	}
	member := g.Members[req.MemberID]
	if member == nil {
		if !joining {
			return nil, Result{}, errf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
		}
		if max := mgr.cfg.MaxSize; max > 0 && len(g.Members) >= max {
			return nil, Result{}, errf(kerr.GroupMaxSizeReached, "The share group has reached its maximum capacity of %d members.", max)
		}
		member = &Member{ID: req.MemberID, Assigned: Assignment{}}
	} else if !joining {
		if e := checkEpoch(member, req.MemberEpoch); e != nil {
			return nil, Result{}, e
		}
	}
	// A member rejoining with its id (epoch 0, after a fence or a lost
	// answer) keeps its place and gets its target assignment again.
	member = member.clone()
	updated := member.clone()
	if req.RackID != nil {
		updated.RackID = *req.RackID
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		updated.SubscribedTopicNames = nilIfEmpty(slices.Compact(names))
	}
	updated.ClientID, updated.ClientHost = client.ID, client.Host

	// 1. The member's metadata; a subscription change bumps the epoch.
	var records []Record
	isNew := g.Members[member.ID] == nil
	bump := false
	if isNew || !sameMetadata(member, updated) {
		records = append(records, memberMetadataRecord(g.ID, updated))
		bump = isNew || !slices.Equal(member.SubscribedTopicNames, updated.SubscribedTopicNames)
	}
	// after is the membership once this heartbeat is applied, built
	// only when the subscription or the target must be recomputed.
	var afterMembers map[string]*Member
	after := func() map[string]*Member {
		if afterMembers == nil {
			afterMembers = maps.Clone(g.Members)
			afterMembers[updated.ID] = updated
		}
		return afterMembers
	}

	// 2. The subscribed topics' metadata: a topic created, deleted or
	// grown bumps the epoch (KIP-1101's metadata hash).
	epoch, hash := g.Epoch, g.MetadataHash
	recheck := bump || g.imageVersion != img.Version
	if recheck {
		if h := metadataHash(after(), img); h != g.MetadataHash {
			hash, bump = h, true
		}
	}
	if bump {
		epoch++
		records = append(records, Record{Key{Type: TypeGroupMetadata, Group: g.ID}, &GroupMetadataValue{Epoch: epoch, MetadataHash: hash}})
	}

	// 3. The target assignment, when the group epoch moved past it.
	targetEpoch, targets := g.AssignmentEpoch, g.Target
	if epoch > g.AssignmentEpoch {
		newTargets := mgr.cfg.Assignor.Assign(specOf(after(), g.Target, img))
		for _, id := range slices.Sorted(maps.Keys(newTargets)) {
			if old, ok := g.Target[id]; !ok || !old.Equal(newTargets[id]) {
				records = append(records, targetMemberRecord(g.ID, id, newTargets[id]))
			}
		}
		records = append(records, Record{Key{Type: TypeTargetAssignmentMetadata, Group: g.ID}, &TargetAssignmentMetadataValue{AssignmentEpoch: epoch}})
		targetEpoch, targets = epoch, newTargets
	}

	// 4. No revocation in a share group: the member takes its target at
	// once.
	if updated.Epoch != targetEpoch || !updated.Assigned.Equal(targets[updated.ID]) || isNew {
		next := updated.clone()
		next.PreviousEpoch = updated.Epoch
		next.Epoch = targetEpoch
		next.Assigned = targets[updated.ID].Clone()
		if next.Assigned == nil {
			next.Assigned = Assignment{}
		}
		records = append(records, currentAssignmentRecord(g.ID, next))
		updated = next
	}

	// 5. The share partitions the group now reads have state.
	if recheck {
		if rec, ok := statePartitionRecord(g, after(), img); ok {
			records = append(records, rec)
		}
	}

	mgr.apply(records)
	if ng := mgr.groups[g.ID]; ng != nil {
		ng.imageVersion = img.Version
	}
	timers := []Timer{{Group: g.ID, Member: updated.ID, At: now.Add(mgr.settings(g.ID).SessionTimeout)}}

	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	id := updated.ID
	resp.MemberID = &id
	resp.MemberEpoch = updated.Epoch
	resp.HeartbeatIntervalMillis = int32(mgr.settings(g.ID).HeartbeatInterval / time.Millisecond)
	// The assignment goes back on a join, when it changed, and to a
	// member heartbeating with its previous epoch (the answer that moved
	// it on was lost, so it may not have its assignment either).
	if joining || req.MemberEpoch != updated.Epoch || !member.Assigned.Equal(updated.Assigned) {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, tp := range topicPartitions(updated.Assigned) {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
			a.TopicPartitions = append(a.TopicPartitions, t)
		}
		resp.Assignment = &a
	}
	return resp, Result{Records: records, Timers: timers}, nil
}

// sameMetadata compares what the member metadata record holds.
func sameMetadata(a, b *Member) bool {
	return a.RackID == b.RackID && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames)
}

// subscribedTopics is the set of topic names some member subscribes to.
func subscribedTopics(members map[string]*Member) []string {
	set := map[string]bool{}
	for _, m := range members {
		for _, t := range m.SubscribedTopicNames {
			set[t] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// metadataHash hashes the metadata (name, id, partition count) of the
// existing topics the members subscribe to; it changes when one of them
// is created, deleted or grows (KIP-1101's group metadata hash, FNV-1a
// here instead of Kafka's Murmur3 combination).
func metadataHash(members map[string]*Member, img *Image) int64 {
	h := fnv.New64a()
	n := 0
	for _, name := range subscribedTopics(members) {
		t, ok := img.Topics[name]
		if !ok {
			continue
		}
		n++
		fmt.Fprintf(h, "%s\x00%x\x00%d\x00", name, t.ID, t.Partitions)
	}
	if n == 0 {
		return 0
	}
	return int64(h.Sum64())
}

// specOf is the assignor's input.
func specOf(members map[string]*Member, targets map[string]Assignment, img *Image) AssignmentSpec {
	spec := AssignmentSpec{Members: make(map[string][]TopicID, len(members)), Partitions: map[TopicID]int32{}, Previous: targets}
	for id, m := range members {
		var ids []TopicID
		for _, name := range m.SubscribedTopicNames {
			if t, ok := img.Topics[name]; ok {
				ids = append(ids, t.ID)
				spec.Partitions[t.ID] = t.Partitions
			}
		}
		spec.Members[id] = ids
	}
	return spec
}

// statePartitionRecord adds the partitions of the subscribed topics to the
// group's initialized share partitions, and drops the topics that no
// longer exist (their state went with them), if that changes anything.
// Kafka's coordinator records them as initializing, asks the share
// coordinator to initialize them, then records them initialized; here a
// share partition initializes its state itself on first use (an
// uninitialized state reads as start offset -1), so the group records
// them initialized at once, for DeleteGroups to delete.
func statePartitionRecord(g *Group, members map[string]*Member, img *Image) (Record, bool) {
	st := StatePartitions{Initialized: map[TopicID]TopicPartitions{}, Deleting: map[TopicID]string{}}
	exists := map[TopicID]string{}
	for name, t := range img.Topics {
		exists[t.ID] = name
	}
	for id, t := range g.Partitions.Initialized {
		if _, ok := exists[id]; ok {
			st.Initialized[id] = TopicPartitions{Name: t.Name, Partitions: slices.Clone(t.Partitions)}
		}
	}
	for _, name := range subscribedTopics(members) {
		t, ok := img.Topics[name]
		if !ok {
			continue
		}
		cur := st.Initialized[t.ID]
		cur.Name = name
		for p := range t.Partitions {
			if _, found := slices.BinarySearch(cur.Partitions, p); !found {
				cur.Partitions = append(cur.Partitions, p)
			}
		}
		slices.Sort(cur.Partitions)
		st.Initialized[t.ID] = cur
	}
	for id, name := range g.Partitions.Deleting {
		st.Deleting[id] = name
	}
	if st.equal(g.Partitions) {
		return Record{}, false
	}
	return statePartitionRecordOf(g.ID, st), true
}

func statePartitionRecordOf(group string, st StatePartitions) Record {
	v := &StatePartitionMetadataValue{}
	for _, id := range slices.SortedFunc(maps.Keys(st.Initialized), cmpID) {
		t := st.Initialized[id]
		v.InitializedTopics = append(v.InitializedTopics, TopicPartitionsInfo{TopicID: id, TopicName: t.Name, Partitions: slices.Clone(t.Partitions)})
	}
	for _, id := range slices.SortedFunc(maps.Keys(st.Deleting), cmpID) {
		v.DeletingTopics = append(v.DeletingTopics, TopicInfo{TopicID: id, TopicName: st.Deleting[id]})
	}
	return Record{Key{Type: TypeStatePartitionMetadata, Group: group}, v}
}

func cmpID(a, b TopicID) int { return strings.Compare(string(a[:]), string(b[:])) }

func memberMetadataRecord(group string, m *Member) Record {
	return Record{Key{Type: TypeMemberMetadata, Group: group, Member: m.ID}, &MemberMetadataValue{
		RackID:               ptr(m.RackID),
		ClientID:             m.ClientID,
		ClientHost:           m.ClientHost,
		SubscribedTopicNames: slices.Clone(m.SubscribedTopicNames),
	}}
}

func targetMemberRecord(group, member string, a Assignment) Record {
	return Record{Key{Type: TypeTargetAssignmentMember, Group: group, Member: member},
		&TargetAssignmentMemberValue{TopicPartitions: topicPartitions(a)}}
}

func currentAssignmentRecord(group string, m *Member) Record {
	return Record{Key{Type: TypeCurrentMemberAssignment, Group: group, Member: m.ID}, &CurrentMemberAssignmentValue{
		MemberEpoch:         m.Epoch,
		PreviousMemberEpoch: m.PreviousEpoch,
		AssignedPartitions:  topicPartitions(m.Assigned),
	}}
}

// removeMemberRecords are the tombstones of a member, in Kafka's
// removeMember order: current assignment, target assignment, metadata.
func removeMemberRecords(group, member string) []Record {
	return []Record{
		{Key: Key{Type: TypeCurrentMemberAssignment, Group: group, Member: member}},
		{Key: Key{Type: TypeTargetAssignmentMember, Group: group, Member: member}},
		{Key: Key{Type: TypeMemberMetadata, Group: group, Member: member}},
	}
}
