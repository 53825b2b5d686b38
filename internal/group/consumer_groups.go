package group

// KIP-848 consumer groups on the group coordinator's shards: each shard
// (one __consumer_offsets partition) holds, next to its classic groups, a
// consumer.Manager with the partition's consumer groups. A group id is of
// one type per partition, as in Kafka's GroupMetadataManager: a consumer
// group when the Manager has it, else classic. The committed offsets of a
// consumer group are kept by an Empty classic Group of the same id (the
// offsets' holder, as Kafka's OffsetMetadataManager keeps offsets apart
// from groups); it never has members while the consumer group exists.

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/coord"
	"github.com/sluice-io/sluice/internal/group/consumer"
	"github.com/sluice-io/sluice/internal/metadata"
)

// ConsumerConfig reads the KIP-848 settings from the broker configuration
// (group.consumer.*; Kafka's GroupCoordinatorConfig).
func ConsumerConfig(b *config.Broker) consumer.Config {
	ms := func(name string, def int64) time.Duration {
		return time.Duration(b.Int(name, def)) * time.Millisecond
	}
	cfg := consumer.Config{
		SessionTimeout:    ms("group.consumer.session.timeout.ms", 45000),
		HeartbeatInterval: ms("group.consumer.heartbeat.interval.ms", 5000),
	}
	if n := b.Int("group.consumer.max.size", 0); n > 0 && n < 1<<31-1 {
		cfg.MaxSize = int(n)
	}
	if v, ok := b.Get("group.consumer.migration.policy"); ok {
		cfg.Migration, _ = consumer.ParseMigrationPolicy(v)
	}
	if n := b.Int("group.max.size", 0); n > 0 && n < 1<<31-1 {
		cfg.ClassicMaxSize = int(n)
	}
	if v, ok := b.Get("group.consumer.assignors"); ok {
		for _, name := range strings.Split(v, ",") {
			switch strings.TrimSpace(strings.ToLower(name)) {
			case "uniform", "org.apache.kafka.coordinator.group.assignor.uniformassignor":
				cfg.Assignors = append(cfg.Assignors, consumer.UniformAssignor{})
			case "range", "org.apache.kafka.coordinator.group.assignor.rangeassignor":
				cfg.Assignors = append(cfg.Assignors, consumer.RangeAssignor{})
			}
		}
	}
	return cfg
}

// consumerEnabled reports whether group.coordinator.rebalance.protocols
// lists "consumer" (Kafka 4's default: classic,consumer).
func consumerEnabled(b *config.Broker) bool {
	v, ok := b.Get("group.coordinator.rebalance.protocols")
	if !ok {
		return true
	}
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(strings.ToLower(p)) == "consumer" {
			return true
		}
	}
	return false
}

// ConsumerEnabled reports whether the coordinator serves KIP-848 consumer
// groups (group.coordinator.rebalance.protocols lists consumer).
func (c *Coordinator) ConsumerEnabled() bool { return c.consumerOn }

// newConsumerManager returns an empty Manager with the coordinator's
// settings and the per-group overrides of the metadata image.
func (c *Coordinator) newConsumerManager() *consumer.Manager {
	return consumer.NewManager(c.consumerConfig())
}

func (c *Coordinator) consumerConfig() consumer.Config {
	cfg := c.ccfg
	cfg.GroupOverrides = func(group string) consumer.GroupSettings {
		set := c.b.Image().GroupConfigs[group]
		var s consumer.GroupSettings
		if v, ok := set["consumer.session.timeout.ms"]; ok {
			s.SessionTimeout = parseMillis(v)
		}
		if v, ok := set["consumer.heartbeat.interval.ms"]; ok {
			s.HeartbeatInterval = parseMillis(v)
		}
		return s
	}
	return cfg
}

func parseMillis(v string) time.Duration {
	var n int64
	for _, r := range strings.TrimSpace(v) {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int64(r-'0')
	}
	return time.Duration(n) * time.Millisecond
}

// imageCache holds the consumer.Image of the last metadata image seen.
type imageCache struct {
	src *metadata.Image
	img *consumer.Image
}

// consumerImage returns the topics of the broker's metadata image as the
// Manager sees them; Version is the metadata offset, so a group re-checks
// its subscription (and bumps its epoch if a subscribed topic was
// created, deleted or grew) at its next heartbeat after a metadata change,
// as Kafka's onNewMetadataImage marks groups for a refresh.
func (c *Coordinator) consumerImage() *consumer.Image {
	src := c.b.Image()
	if ic, _ := c.cimg.Load().(*imageCache); ic != nil && ic.src == src {
		return ic.img
	}
	img := &consumer.Image{Version: src.Offset, Topics: make(map[string]consumer.TopicImage, len(src.Topics))}
	for name, t := range src.Topics {
		img.Topics[name] = consumer.TopicImage{ID: consumer.TopicID(t.ID), Partitions: int32(len(t.Partitions))}
	}
	c.cimg.Store(&imageCache{src: src, img: img})
	return img
}

// encodeConsumer turns the Manager's records into records to append.
func encodeConsumer(recs []consumer.Record) []record {
	out := make([]record, len(recs))
	for i, r := range recs {
		out[i].key, out[i].value = r.Encode()
	}
	return out
}

// classicBusy reports whether a classic group id is in use by members
// (so it cannot become a consumer group).
func classicBusy(g *Group) bool {
	return g != nil && (g.state != Empty || len(g.members) > 0 || len(g.pending) > 0)
}

// ConsumerGroupHeartbeat serves ConsumerGroupHeartbeat: a write event of
// the group's shard whose records are appended and answered once
// committed; if the append fails the group is put back as it was.
// canDescribe (nil: everything) filters the topics a regular expression
// resolved for this heartbeat may match by the principal's DESCRIBE right.
func (c *Coordinator) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, canDescribe func(topic string) bool) Result[*kmsg.ConsumerGroupHeartbeatResponse] {
	fail := func(e *kerr.Error, msg string) Result[*kmsg.ConsumerGroupHeartbeatResponse] {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return ready(resp)
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID, "The group id must not be empty.")
	}
	var res Result[*kmsg.ConsumerGroupHeartbeatResponse]
	if err := c.run(req.Group, func(s *shard) {
		st := s.State()
		mgr := st.consumers
		if isShareGroup(s, req.Group) {
			res = fail(kerr.GroupIDNotFound, "Group "+req.Group+" is not a consumer group.")
			return
		}
		restore := mgr.Snapshot(req.Group)
		var upRecs []record
		var upTimers []consumer.Timer
		if cg := st.groups[req.Group]; mgr.Group(req.Group) == nil && classicBusy(cg) {
			// A classic group with members converts online when a
			// joining member may upgrade it (Kafka's
			// getOrMaybeCreateConsumerGroup and validateOnlineUpgrade);
			// otherwise it is not a consumer group.
			if req.MemberEpoch != consumer.JoinEpoch {
				res = fail(kerr.GroupIDNotFound, "Group "+req.Group+" is not a consumer group.")
				return
			}
			if e := mgr.Validate(req); e != nil {
				res = fail(kerr.ErrorForCode(e.Code).(*kerr.Error), e.Message)
				return
			}
			recs, timers, undo, e := c.upgrade(s, cg)
			if e != nil {
				res = fail(kerr.ErrorForCode(e.Code).(*kerr.Error), e.Message)
				return
			}
			upRecs, upTimers = recs, timers
			restore = undo
		}
		resp, r := mgr.Heartbeat(c.clock.Now(), c.consumerImage(), consumer.Client{ID: clientID, Host: clientHost, CanDescribe: canDescribe}, req)
		if len(upRecs) > 0 {
			if resp.ErrorCode != 0 {
				// The heartbeat failed: the group stays classic.
				restore()
				res = ready(resp)
				return
			}
			r.Timers = append(upTimers, r.Timers...)
		}
		if len(r.Records) == 0 && len(upRecs) == 0 {
			c.consumerTimers(s, r.Timers)
			res = ready(resp)
			return
		}
		recs, undoDowngrade := c.consumerRecords(s, r)
		recs = append(upRecs, recs...)
		answer := make(chan *kmsg.ConsumerGroupHeartbeatResponse, 1)
		_, aerr := c.appendRecords(s, recs, func() { undoDowngrade(); restore() }, func(err error) {
			if err != nil {
				answer <- fail(appendError(err), "").Resp
				return
			}
			c.consumerTimers(s, r.Timers)
			answer <- resp
		})
		if aerr != nil {
			res = fail(kerr.CoordinatorNotAvailable, "")
			return
		}
		res = waitOn(answer)
	}); err != nil {
		return fail(err, "")
	}
	return res
}

// appendError maps a failed append or commit to the answer's error.
func appendError(err error) *kerr.Error {
	if err == coord.ErrNotCoordinator {
		return kerr.NotCoordinator
	}
	if ke, ok := err.(*kerr.Error); ok && ke == kerr.NotCoordinator {
		return ke
	}
	return kerr.CoordinatorNotAvailable
}

// consumerTimers schedules or cancels the Manager's timers (owner).
func (c *Coordinator) consumerTimers(s *shard, timers []consumer.Timer) {
	if s.Gone() {
		return
	}
	for _, t := range timers {
		if t.Cancel {
			s.Cancel(t.Key())
			continue
		}
		if _, armed := s.TimerAt(t.Key()); armed && t.IfAbsent {
			continue
		}
		s.Schedule(t.Key(), t.At, func(s *shard) { c.expireConsumer(s, t) })
	}
}

// expireConsumer is a session or rebalance timer of a consumer-group
// member firing (owner): the member is fenced if the timer still applies.
func (c *Coordinator) expireConsumer(s *shard, t consumer.Timer) {
	if !c.owns(s.Partition()) {
		s.Unload()
		return
	}
	mgr := s.State().consumers
	restore := mgr.Snapshot(t.Group)
	r := mgr.Expire(c.clock.Now(), c.consumerImage(), t)
	if len(r.Records) == 0 {
		c.consumerTimers(s, r.Timers)
		return
	}
	recs, undoDowngrade := c.consumerRecords(s, r)
	_, _ = c.appendRecords(s, recs, func() { undoDowngrade(); restore() }, func(err error) {
		if err == nil {
			c.consumerTimers(s, r.Timers)
		}
	})
}

// ConsumerGroupDescribe serves ConsumerGroupDescribe: each group is
// described on its shard, from its committed state (readCommitted); a
// group led elsewhere answers NOT_COORDINATOR, a classic one
// GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) Result[*kmsg.ConsumerGroupDescribeResponse] {
	parts := make([]Result[kmsg.ConsumerGroupDescribeResponseGroup], 0, len(req.Groups))
	for _, id := range req.Groups {
		fail := func(code int16) kmsg.ConsumerGroupDescribeResponseGroup {
			out := kmsg.NewConsumerGroupDescribeResponseGroup()
			out.Group, out.ErrorCode = id, code
			return out
		}
		var res Result[kmsg.ConsumerGroupDescribeResponseGroup]
		if err := c.run(id, func(s *shard) {
			res = readCommitted(s, func(s *shard) kmsg.ConsumerGroupDescribeResponseGroup {
				out := s.State().consumers.DescribeGroup(c.consumerImage(), id, req.Version)
				if out.ErrorCode == kerr.GroupIDNotFound.Code && (isShareGroup(s, id) || s.State().groups[id] != nil && len(s.State().groups[id].members) > 0) {
					msg := "Group " + id + " is not a consumer group."
					out.ErrorMessage = &msg
				}
				return out
			}, fail)
		}); err != nil {
			res = ready(fail(err.Code))
		}
		parts = append(parts, res)
	}
	return gather(parts, func(got []kmsg.ConsumerGroupDescribeResponseGroup) *kmsg.ConsumerGroupDescribeResponse {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		resp.Groups = got
		return resp
	})
}

// loadedConsumers arms the timers of the consumer groups of a loaded shard
// (Kafka's onLoaded) and counts them.
func (c *Coordinator) loadedConsumers(s *shard) {
	c.consumerTimers(s, s.State().consumers.LoadedTimers(c.clock.Now()))
}

// classicOnly prepares group id for a classic JoinGroup (owner): an empty
// consumer group is converted to a classic group by writing its
// tombstones, as Kafka converts an empty consumer group on a classic
// JoinGroup; a consumer group with members stays (the classic member
// joins it, migration.go).
func (c *Coordinator) classicOnly(s *shard, id string) *kerr.Error {
	if isShareGroup(s, id) {
		// Kafka's classicGroupJoin: a group of another type.
		return kerr.InconsistentGroupProtocol
	}
	mgr := s.State().consumers
	cg := mgr.Group(id)
	if cg == nil || len(cg.Members) > 0 {
		return nil
	}
	restore := mgr.Snapshot(id)
	recs, e := mgr.DeleteGroup(id)
	if e != nil {
		return kerr.InconsistentGroupProtocol
	}
	if _, err := c.appendRecords(s, encodeConsumer(recs), restore, nil); err != nil {
		return kerr.CoordinatorNotAvailable
	}
	c.log.Info("converted empty consumer group to classic", "group", id)
	return nil
}

// describeConsumerAsClassic is a consumer group in a DescribeGroups answer
// (Kafka's ConsumerGroup.asDescribedGroup): protocol type "consumer", the
// group's assignor as its protocol, and each member's current assignment
// in the consumer protocol's encoding.
func (c *Coordinator) describeConsumerAsClassic(cg *consumer.Group, rg kmsg.DescribeGroupsResponseGroup) kmsg.DescribeGroupsResponseGroup {
	img := c.consumerImage()
	names := make(map[consumer.TopicID]string, len(img.Topics))
	for name, t := range img.Topics {
		names[t.ID] = name
	}
	rg.State = cg.State()
	rg.ProtocolType = "consumer"
	rg.Protocol = cg.PreferredAssignor(c.consumerConfig().AssignorName())
	for _, m := range cg.SortedMembers() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID = m.ID
		if m.InstanceID != "" {
			id := m.InstanceID
			rm.InstanceID = &id
		}
		rm.ClientID, rm.ClientHost = m.ClientID, m.ClientHost
		a := kmsg.NewConsumerMemberAssignment()
		for _, tp := range m.Assigned.TPs() {
			name, ok := names[tp.Topic]
			if !ok {
				continue
			}
			if n := len(a.Topics); n > 0 && a.Topics[n-1].Topic == name {
				a.Topics[n-1].Partitions = append(a.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: []int32{tp.Partition}})
		}
		rm.MemberAssignment = a.AppendTo(nil)
		sub := kmsg.NewConsumerMemberMetadata()
		sub.Topics = m.SubscribedTopicNames
		rm.ProtocolMetadata = sub.AppendTo(nil)
		rg.Members = append(rg.Members, rm)
	}
	return rg
}

// consumerSummary is a consumer group's Summary (owner): holder, the
// Empty classic Group keeping its offsets, may be nil.
func (c *Coordinator) consumerSummary(cg *consumer.Group, holder *Group) Summary {
	img := c.consumerImage()
	names := make(map[consumer.TopicID]string, len(img.Topics))
	for name, t := range img.Topics {
		names[t.ID] = name
	}
	tps := func(a consumer.Assignment) []TopicPartition {
		var out []TopicPartition
		for _, tp := range a.TPs() {
			if name, ok := names[tp.Topic]; ok {
				out = append(out, TopicPartition{Topic: name, Partition: tp.Partition})
			}
		}
		return out
	}
	s := Summary{ID: cg.ID, Type: "consumer", GroupEpoch: cg.Epoch, AssignmentEpoch: cg.AssignmentEpoch,
		Assignor: cg.PreferredAssignor(c.ccfg.AssignorName()), State: cg.State(), ProtocolType: "consumer",
		Generation: cg.Epoch, Members: []MemberSummary{}, Offsets: []CommittedOffset{}}
	for _, m := range cg.SortedMembers() {
		s.Members = append(s.Members, MemberSummary{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assigned: tps(m.Assigned), MemberEpoch: m.Epoch, Target: tps(cg.Target[m.ID])})
	}
	if holder != nil {
		s.Offsets = holder.offsetSummaries()
	}
	return s
}
