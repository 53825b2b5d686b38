package consumer

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is what the request's header and connection say of the member.
type Client struct {
	ID   string // the request header's client id
	Host string // the connection's address, as Kafka writes it ("/1.2.3.4")
	// CanDescribe reports whether the member's principal may DESCRIBE a
	// topic; nil allows every topic. A regular expression resolved for
	// this member's heartbeat matches only topics it may describe (Kafka
	// 4.1, KAFKA-18813: the resolution is filtered with the authorizer
	// and the context of the request that triggered it).
	CanDescribe func(topic string) bool
}

// Error is a Kafka error code with its message.
type Error struct {
	Code    int16
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", kerr.ErrorForCode(e.Code), e.Message)
}

func errf(e *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: e.Code, Message: fmt.Sprintf(format, args...)}
}

func blank(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }

// validate is Kafka's GroupCoordinatorService
// throwIfConsumerGroupHeartbeatRequestIsInvalid, in its order, plus the
// regular expression check GroupMetadataManager makes (RE2, as Kafka's
// RE2J).
func (mgr *Manager) validate(req *kmsg.ConsumerGroupHeartbeatRequest) *Error {
	// KIP-1082: from v1 the client generates its member id.
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == LeaveEpoch) && strings.TrimSpace(req.MemberID) == "" {
		return errf(kerr.InvalidRequest, "MemberId can't be empty.")
	}
	if strings.TrimSpace(req.Group) == "" {
		return errf(kerr.InvalidRequest, "GroupId can't be empty.")
	}
	if blank(req.InstanceID) {
		return errf(kerr.InvalidRequest, "InstanceId can't be empty.")
	}
	if blank(req.RackID) {
		return errf(kerr.InvalidRequest, "RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e == JoinEpoch:
		if req.RebalanceTimeoutMillis == -1 {
			return errf(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) != 0 {
			return errf(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return errf(kerr.InvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case e == StaticLeaveEpoch:
		if req.InstanceID == nil {
			return errf(kerr.InvalidRequest, "InstanceId can't be null.")
		}
	case e < StaticLeaveEpoch:
		return errf(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && mgr.assignor(*req.ServerAssignor) == nil {
		var names []string
		for _, a := range mgr.cfg.Assignors {
			names = append(names, a.Name())
		}
		return errf(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.",
			*req.ServerAssignor, strings.Join(names, ", "))
	}
	if re := req.SubscribedTopicRegex; re != nil && *re != "" {
		if _, err := compileRegex(*re); err != nil {
			return errf(kerr.InvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *re, err)
		}
	}
	return nil
}

// Validate checks a ConsumerGroupHeartbeat as Heartbeat does first,
// without looking at the group (the caller checks a request before
// converting a classic group for it).
func (mgr *Manager) Validate(req *kmsg.ConsumerGroupHeartbeatRequest) *Error {
	return mgr.validate(req)
}

// compileRegex compiles a subscription regex; a topic matches when the
// whole name matches, as RE2J's Matcher.matches.
func compileRegex(re string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(re); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + re + ")$")
}

// ownedFrom converts the request's owned partitions; nil stays nil (not
// provided).
func ownedFrom(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) Assignment {
	if topics == nil {
		return nil
	}
	var tps []TP
	for _, t := range topics {
		for _, p := range t.Partitions {
			tps = append(tps, TP{t.TopicID, p})
		}
	}
	return assignmentOf(tps)
}

// subset reports whether owned is provided and within assigned.
func subset(owned, assigned Assignment) bool {
	if owned == nil {
		return false
	}
	return owned.minus(assigned).Count() == 0
}

// checkEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid: epoch 0
// (a rejoin) is accepted; an epoch ahead of the member's is fenced; one
// behind is fenced unless it is the previous epoch and the member owns no
// more than its assignment (the answer carrying the bump was lost).
func checkEpoch(m *Member, received int32, owned Assignment) *Error {
	if received == JoinEpoch {
		// A member fenced earlier rejoins with epoch 0 under its id
		// (KIP-848; Kafka's KAFKA-19233): it is re-admitted in place.
		return nil
	}
	if received > m.Epoch {
		return errf(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.Epoch)
	}
	if received < m.Epoch && (received != m.PreviousEpoch || !subset(owned, m.Assigned)) {
		return errf(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.Epoch)
	}
	return nil
}

// errorResponse is an answer carrying only an error.
func errorResponse(req *kmsg.ConsumerGroupHeartbeatRequest, e *Error) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = e.Code
	resp.ErrorMessage = &e.Message
	return resp
}

// Heartbeat handles a ConsumerGroupHeartbeat (v0-v1) as Kafka's
// GroupMetadataManager.consumerGroupHeartbeat: it returns the answer and
// the records and timers the caller must append and schedule. On an
// error, nothing changes and the result is empty. The caller answers
// first for a group id held by the classic coordinator (Kafka's
// GROUP_ID_NOT_FOUND "Group %s is not a consumer group").
func (mgr *Manager) Heartbeat(now time.Time, img *Image, client Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, Result) {
	if e := mgr.validate(req); e != nil {
		return errorResponse(req, e), Result{}
	}
	if req.MemberEpoch == LeaveEpoch || req.MemberEpoch == StaticLeaveEpoch {
		resp, res, e := mgr.leave(img, req)
		if e != nil {
			return errorResponse(req, e), Result{}
		}
		return resp, res
	}
	resp, res, e := mgr.heartbeat(now, img, client, req, nil)
	if e != nil {
		return errorResponse(req, e), Result{}
	}
	return resp, res
}

// heartbeat is a consumer-protocol member's heartbeat, or, with cl set,
// a classic-protocol member's JoinGroup (Kafka's
// classicGroupJoinToConsumerGroup): req then carries the member's
// subscription, epoch checks are skipped, the member's classic metadata
// is cl's, and the member after the call is left in cl.member.
func (mgr *Manager) heartbeat(now time.Time, img *Image, client Client, req *kmsg.ConsumerGroupHeartbeatRequest, cl *classicJoin) (*kmsg.ConsumerGroupHeartbeatResponse, Result, *Error) {
	joining := req.MemberEpoch == JoinEpoch
	g := mgr.groups[req.Group]
	if g == nil {
		if !joining {
			return nil, Result{}, errf(kerr.GroupIDNotFound, "Consumer group %s not found.", req.Group)
		}
		g = newGroup(req.Group)
	}
	memberID := req.MemberID
	if max := mgr.cfg.MaxSize; max > 0 && len(g.Members) >= max && (memberID == "" || g.Members[memberID] == nil) {
		return nil, Result{}, errf(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", max)
	}
	if memberID == "" {
		memberID = mgr.cfg.NewMemberID()
	}
	owned := ownedFrom(req.Topics)
	if cl != nil {
		owned = cl.owned
	}
	var records []Record
	targets := maps.Clone(g.Target)
	var member *Member
	var replaced *Member // a static member this join replaces
	if req.InstanceID == nil {
		member = g.Members[memberID]
		switch {
		case member == nil && !joining:
			return nil, Result{}, errf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
		case member == nil:
			member = &Member{ID: memberID, Assigned: Assignment{}, PendingRevocation: Assignment{}}
		}
		if cl == nil {
			if e := checkEpoch(member, req.MemberEpoch, owned); e != nil {
				return nil, Result{}, e
			}
		}
	} else {
		inst := *req.InstanceID
		existing := g.staticMember(inst)
		switch {
		case cl != nil && existing != nil && existing.ID == memberID:
			// A classic static member rejoining under its id.
			member = existing
		case cl != nil && existing != nil && !cl.unknownMember:
			return nil, Result{}, errf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, inst, existing.ID)
		case joining && existing == nil:
			member = g.Members[memberID]
			if member == nil {
				member = &Member{ID: memberID, Assigned: Assignment{}, PendingRevocation: Assignment{}}
			}
		case joining:
			if existing.Epoch != StaticLeaveEpoch && cl == nil {
				return nil, Result{}, errf(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, inst, existing.ID)
			}
			// The rejoining instance takes over the departed member's
			// subscription and assignment under its new member id
			// (Kafka's replaceMember).
			replaced = existing
			member = existing.clone()
			member.ID = memberID
			member.Epoch, member.PreviousEpoch = 0, 0
			records = append(records, removeMemberRecords(g.ID, existing.ID)...)
			records = append(records, memberMetadataRecord(g.ID, member))
			t, ok := targets[existing.ID]
			delete(targets, existing.ID)
			if ok {
				records = append(records, targetMemberRecord(g.ID, memberID, t))
				targets[memberID] = t
			}
			records = append(records, currentAssignmentRecord(g.ID, member))
		default:
			if existing == nil {
				return nil, Result{}, errf(kerr.UnknownMemberID, "Instance id %s is unknown.", inst)
			}
			if existing.ID != memberID {
				return nil, Result{}, errf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, inst, existing.ID)
			}
			member = existing
			if e := checkEpoch(member, req.MemberEpoch, owned); e != nil {
				return nil, Result{}, e
			}
		}
	}

	// 1. The member's subscription and metadata. Replaying the records
	// changes the group's members in place, so member is a copy.
	member = member.clone()
	updated := member.clone()
	if req.InstanceID != nil {
		updated.InstanceID = *req.InstanceID
	}
	if req.RackID != nil {
		updated.RackID = *req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		updated.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		updated.ServerAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		updated.SubscribedTopicNames = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(updated.SubscribedTopicNames)
		updated.SubscribedTopicNames = slices.Compact(updated.SubscribedTopicNames)
	}
	if req.SubscribedTopicRegex != nil {
		updated.SubscribedTopicRegex = *req.SubscribedTopicRegex
	}
	updated.ClientID, updated.ClientHost = client.ID, client.Host
	if cl != nil {
		updated.Classic = cl.meta
	}
	bump := false
	if !sameMetadata(member, updated) || replaced == nil && g.Members[member.ID] == nil {
		records = append(records, memberMetadataRecord(g.ID, updated))
		bump = !slices.Equal(member.SubscribedTopicNames, updated.SubscribedTopicNames) ||
			member.SubscribedTopicRegex != updated.SubscribedTopicRegex
	}
	// members is the membership after this heartbeat, built only when
	// the subscription or the target has to be recomputed (it costs a
	// copy of the member map).
	var members map[string]*Member
	after := func() map[string]*Member {
		if members == nil {
			members = maps.Clone(g.Members)
			if replaced != nil {
				delete(members, replaced.ID)
			}
			members[updated.ID] = updated
		}
		return members
	}

	// 2. Regular expressions, the subscription metadata and the epoch.
	epoch := g.Epoch
	subscription := g.Subscription
	regexes := g.Regexes
	unresolved := false
	if bump || g.imageVersion != img.Version {
		var changed bool
		var recs []Record
		regexes, recs, changed, unresolved = resolveRegexes(g, after(), img, now, client.CanDescribe, false)
		records = append(records, recs...)
		bump = bump || changed
		subscription = subscriptionOf(after(), regexes, img)
		if !maps.Equal(subscription, g.Subscription) {
			records = append(records, partitionMetadataRecord(g.ID, subscription))
			bump = true
		}
	}
	if bump {
		epoch++
		records = append(records, Record{Key{Type: TypeGroupMetadata, Group: g.ID}, &GroupMetadataValue{Epoch: epoch}})
	}

	// 3. The target assignment, when the group epoch moved past it.
	targetEpoch := g.AssignmentEpoch
	if epoch > g.AssignmentEpoch {
		assignor := mgr.assignor(preferredAssignor(after(), mgr.cfg.Assignors[0].Name()))
		newTargets := assignor.Assign(specOf(after(), targets, regexes, subscription))
		var changed []string
		for id, a := range newTargets {
			// A member without a target entry has an empty one.
			if !targets[id].Equal(a) {
				changed = append(changed, id)
			}
		}
		slices.Sort(changed)
		for _, id := range changed {
			records = append(records, targetMemberRecord(g.ID, id, newTargets[id]))
		}
		records = append(records, Record{Key{Type: TypeTargetAssignmentMetadata, Group: g.ID}, &TargetAssignmentMetadataValue{AssignmentEpoch: epoch}})
		targets, targetEpoch = newTargets, epoch
	}

	// 4. Reconcile the member towards its target.
	var timers []Timer
	if !updated.reconciledTo(targetEpoch) {
		next := reconcile(updated, targetEpoch, targets[updated.ID], g.partitionEpoch, owned)
		if !sameAssignment(next, updated) {
			records = append(records, currentAssignmentRecord(g.ID, next))
			rt := Timer{Kind: RebalanceTimer, Group: g.ID, Member: next.ID, Epoch: next.Epoch}
			if next.State == MemberUnrevokedPartitions {
				rt.At = now.Add(time.Duration(next.RebalanceTimeoutMs) * time.Millisecond)
			} else {
				rt.Cancel = true
			}
			timers = append(timers, rt)
		}
		updated = next
	}
	if replaced != nil && replaced.ID != updated.ID {
		timers = append(timers, cancelTimers(g.ID, replaced.ID)...)
	}
	timers = append(timers, Timer{Kind: SessionTimer, Group: g.ID, Member: updated.ID, At: now.Add(mgr.sessionOf(g.ID, updated))})
	if unresolved || updated.SubscribedTopicRegex != "" && !hasRegex(regexes, updated.SubscribedTopicRegex) {
		timers = append(timers, Timer{Kind: RegexTimer, Group: g.ID, At: now, CanDescribe: client.CanDescribe})
	}

	mgr.apply(records)
	if ng := mgr.groups[g.ID]; ng != nil {
		ng.imageVersion = img.Version
	}
	if cl != nil {
		cl.member = updated
		return nil, Result{Records: records, Timers: timers}, nil
	}

	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberID = &updated.ID
	resp.MemberEpoch = updated.Epoch
	resp.HeartbeatIntervalMillis = int32(mgr.settings(g.ID).HeartbeatInterval / time.Millisecond)
	// The assignment goes back on a full request (a join, or a member
	// that sent every field after an error) or when it changed.
	full := joining || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !member.Assigned.Equal(updated.Assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, tp := range updated.Assigned.toTopicPartitions() {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
			a.Topics = append(a.Topics, t)
		}
		resp.Assignment = &a
	}
	return resp, Result{Records: records, Timers: timers}, nil
}

// sameMetadata compares what the member metadata record holds.
func sameMetadata(a, b *Member) bool {
	return a.InstanceID == b.InstanceID && a.RackID == b.RackID && a.ClientID == b.ClientID &&
		a.ClientHost == b.ClientHost && slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames) &&
		a.SubscribedTopicRegex == b.SubscribedTopicRegex && a.RebalanceTimeoutMs == b.RebalanceTimeoutMs &&
		a.ServerAssignor == b.ServerAssignor && a.Classic.equal(b.Classic)
}

// sameAssignment compares what the current assignment record holds.
func sameAssignment(a, b *Member) bool {
	return a.Epoch == b.Epoch && a.PreviousEpoch == b.PreviousEpoch && a.State == b.State &&
		a.Assigned.Equal(b.Assigned) && a.PendingRevocation.Equal(b.PendingRevocation)
}

// preferredAssignor is Group.PreferredAssignor over a member set.
func preferredAssignor(members map[string]*Member, def string) string {
	return (&Group{Members: members}).PreferredAssignor(def)
}

// topicsOf is the topic names m subscribes to: its names plus what its
// regex resolved to.
func topicsOf(m *Member, regexes map[string]RegexResolution) []string {
	out := slices.Clone(m.SubscribedTopicNames)
	if m.SubscribedTopicRegex != "" {
		out = append(out, regexes[m.SubscribedTopicRegex].Topics...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// subKey identifies a subscription; members often share one.
func subKey(m *Member) string {
	return strings.Join(m.SubscribedTopicNames, "\x00") + "\x01" + m.SubscribedTopicRegex
}

// sameSubscription reports whether a and b subscribe alike (a may be nil).
func sameSubscription(a, b *Member) bool {
	return a != nil && a.SubscribedTopicRegex == b.SubscribedTopicRegex &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames)
}

// subscriptionOf is the metadata of every existing topic some member
// subscribes to.
func subscriptionOf(members map[string]*Member, regexes map[string]RegexResolution, img *Image) map[string]SubscribedTopic {
	out := map[string]SubscribedTopic{}
	done := map[string]bool{}
	var last *Member
	for _, m := range members {
		if sameSubscription(last, m) {
			continue
		}
		last = m
		k := subKey(m)
		if done[k] {
			continue
		}
		done[k] = true
		for _, name := range topicsOf(m, regexes) {
			if t, ok := img.Topics[name]; ok {
				out[name] = SubscribedTopic{ID: t.ID, Name: name, Partitions: t.Partitions}
			}
		}
	}
	return out
}

// resolveRegexes resolves the regexes the members use against img,
// keeping the topics canDescribe allows (nil: all): a record for each
// resolution that changed and a tombstone for each regex
// no member uses any more. changed reports whether some member's topics
// may have changed. Without resolveNew a regex the group has no
// resolution for is left out (unresolved reports one): a RegexTimer
// resolves it.
func resolveRegexes(g *Group, members map[string]*Member, img *Image, now time.Time, canDescribe func(string) bool, resolveNew bool) (out map[string]RegexResolution, records []Record, changed, unresolved bool) {
	used := map[string]bool{}
	for _, m := range members {
		if m.SubscribedTopicRegex != "" {
			used[m.SubscribedTopicRegex] = true
		}
	}
	out = map[string]RegexResolution{}
	for _, re := range slices.Sorted(maps.Keys(used)) {
		old, had := g.Regexes[re]
		if had && old.Version == img.Version {
			out[re] = old
			continue
		}
		if !had && !resolveNew {
			unresolved = true
			continue
		}
		c, err := compileRegex(re)
		var topics []string
		if err == nil {
			for name := range img.Topics {
				if c.MatchString(name) && (canDescribe == nil || canDescribe(name)) {
					topics = append(topics, name)
				}
			}
			slices.Sort(topics)
		}
		res := RegexResolution{Topics: topics, Version: img.Version, Timestamp: now.UnixMilli()}
		if had && slices.Equal(old.Topics, topics) {
			out[re] = old
			continue
		}
		out[re] = res
		changed = true
		records = append(records, Record{Key{Type: TypeRegularExpression, Group: g.ID, Regex: re},
			&RegularExpressionValue{Topics: topics, Version: res.Version, Timestamp: res.Timestamp}})
	}
	for _, re := range slices.Sorted(maps.Keys(g.Regexes)) {
		if !used[re] {
			records = append(records, Record{Key: Key{Type: TypeRegularExpression, Group: g.ID, Regex: re}})
		}
	}
	return out, records, changed, unresolved
}

// hasRegex reports whether regexes holds a resolution of re.
func hasRegex(regexes map[string]RegexResolution, re string) bool {
	_, ok := regexes[re]
	return ok
}

// refreshRegexes is a RegexTimer firing (Kafka's asynchronous regex
// refresh and handleRegularExpressionsResult): every regex the members
// use is resolved against img, and the subscription metadata and the
// group epoch follow if a member's topics changed; the next heartbeat
// computes the new target assignment.
func (mgr *Manager) refreshRegexes(now time.Time, img *Image, g *Group, canDescribe func(string) bool) Result {
	regexes, records, changed, _ := resolveRegexes(g, g.Members, img, now, canDescribe, true)
	sub := subscriptionOf(g.Members, regexes, img)
	if !maps.Equal(sub, g.Subscription) {
		records = append(records, partitionMetadataRecord(g.ID, sub))
		changed = true
	}
	if changed {
		records = append(records, Record{Key{Type: TypeGroupMetadata, Group: g.ID}, &GroupMetadataValue{Epoch: g.Epoch + 1}})
	}
	if len(records) == 0 {
		return Result{}
	}
	mgr.apply(records)
	if ng := mgr.groups[g.ID]; ng != nil {
		ng.imageVersion = img.Version
	}
	return Result{Records: records}
}

// specOf is the assignor's input.
func specOf(members map[string]*Member, targets map[string]Assignment, regexes map[string]RegexResolution, sub map[string]SubscribedTopic) AssignmentSpec {
	spec := AssignmentSpec{Members: make(map[string]MemberSpec, len(members)), Partitions: map[TopicID]int32{}}
	resolved := map[string][]TopicID{}
	var last *Member
	var lastIDs []TopicID
	for id, m := range members {
		if sameSubscription(last, m) {
			spec.Members[id] = MemberSpec{InstanceID: m.InstanceID, Subscribed: lastIDs, Target: targets[id]}
			continue
		}
		k := subKey(m)
		ids, ok := resolved[k]
		if !ok {
			for _, name := range topicsOf(m, regexes) {
				if t, ok := sub[name]; ok {
					ids = append(ids, t.ID)
					spec.Partitions[t.ID] = t.Partitions
				}
			}
			resolved[k] = ids
		}
		last, lastIDs = m, ids
		spec.Members[id] = MemberSpec{InstanceID: m.InstanceID, Subscribed: ids, Target: targets[id]}
	}
	return spec
}

func memberMetadataRecord(group string, m *Member) Record {
	return Record{Key{Type: TypeMemberMetadata, Group: group, Member: m.ID}, &MemberMetadataValue{
		InstanceID:           ptr(m.InstanceID),
		RackID:               ptr(m.RackID),
		ClientID:             m.ClientID,
		ClientHost:           m.ClientHost,
		SubscribedTopicNames: slices.Clone(m.SubscribedTopicNames),
		SubscribedTopicRegex: ptr(m.SubscribedTopicRegex),
		RebalanceTimeoutMs:   m.RebalanceTimeoutMs,
		ServerAssignor:       ptr(m.ServerAssignor),
		Classic:              m.Classic.clone(),
	}}
}

func targetMemberRecord(group, member string, a Assignment) Record {
	return Record{Key{Type: TypeTargetAssignmentMember, Group: group, Member: member},
		&TargetAssignmentMemberValue{TopicPartitions: a.toTopicPartitions()}}
}

func currentAssignmentRecord(group string, m *Member) Record {
	return Record{Key{Type: TypeCurrentMemberAssignment, Group: group, Member: m.ID}, &CurrentMemberAssignmentValue{
		MemberEpoch:                 m.Epoch,
		PreviousMemberEpoch:         m.PreviousEpoch,
		State:                       int8(m.State),
		AssignedPartitions:          m.Assigned.toTopicPartitions(),
		PartitionsPendingRevocation: m.PendingRevocation.toTopicPartitions(),
	}}
}

func partitionMetadataRecord(group string, sub map[string]SubscribedTopic) Record {
	v := &PartitionMetadataValue{}
	for _, name := range slices.Sorted(maps.Keys(sub)) {
		t := sub[name]
		v.Topics = append(v.Topics, TopicMetadata{TopicID: t.ID, TopicName: name, NumPartitions: t.Partitions})
	}
	return Record{Key{Type: TypePartitionMetadata, Group: group}, v}
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
