package group

// KIP-932 share groups on the group coordinator's shards: each shard (one
// __consumer_offsets partition) holds, next to its classic and consumer
// groups, a sharegroup.Manager with the partition's share groups. A group
// id is of one type, as in Kafka's GroupMetadataManager: a
// ShareGroupHeartbeat for a consumer group or a classic group in use
// answers GROUP_ID_NOT_FOUND ("Group %s is not a share group."), a
// ConsumerGroupHeartbeat for a share group GROUP_ID_NOT_FOUND, a JoinGroup
// INCONSISTENT_GROUP_PROTOCOL.

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/config"
	sharegroup "github.com/sluice-io/sluice/internal/group/share"
	"github.com/sluice-io/sluice/internal/share"
)

// ShareConfig reads the share-group settings from the broker configuration
// (group.share.*; Kafka's GroupCoordinatorConfig and ShareGroupConfig).
func ShareConfig(b *config.Broker) sharegroup.Config {
	ms := func(name string, def int64) time.Duration {
		return time.Duration(b.Int(name, def)) * time.Millisecond
	}
	cfg := sharegroup.Config{
		SessionTimeout:    ms("group.share.session.timeout.ms", 45000),
		HeartbeatInterval: ms("group.share.heartbeat.interval.ms", 5000),
		MaxSize:           int(b.Int("group.share.max.size", 200)),
	}
	// group.share.assignors can only name the simple assignor (its
	// config.Def checks), the Manager's default.
	return cfg
}

// shareConfig is the coordinator's share-group settings with the
// per-group overrides of the metadata image.
func (c *Coordinator) shareConfig() sharegroup.Config {
	cfg := c.scfg
	cfg.GroupOverrides = func(group string) sharegroup.GroupSettings {
		set := c.b.Image().GroupConfigs[group]
		var s sharegroup.GroupSettings
		if v, ok := set["share.session.timeout.ms"]; ok {
			s.SessionTimeout = parseMillis(v)
		}
		if v, ok := set["share.heartbeat.interval.ms"]; ok {
			s.HeartbeatInterval = parseMillis(v)
		}
		return s
	}
	return cfg
}

// SetSharePersister sets the store of share-partition state whose entries
// DeleteGroups removes with a share group (the share coordinator); nil,
// the default, deletes none. Call it before serving requests.
func (c *Coordinator) SetSharePersister(p share.Persister) { c.persister.Store(&p) }

func (c *Coordinator) sharePersister() share.Persister {
	if p := c.persister.Load(); p != nil {
		return *p
	}
	return nil
}

// encodeShare turns the Manager's records into records to append.
func encodeShare(recs []sharegroup.Record) []record {
	out := make([]record, len(recs))
	for i, r := range recs {
		out[i].key, out[i].value = r.Encode()
	}
	return out
}

// notShareGroup reports whether group id is used by a consumer group or a
// classic group with members (owner).
func notShareGroup(st *shardState, id string) bool {
	return st.shares.Group(id) == nil && (st.consumers.Group(id) != nil || classicBusy(st.groups[id]))
}

// ShareGroupHeartbeat serves ShareGroupHeartbeat: a write event of the
// group's shard whose records are appended and answered once committed;
// if the append fails the group is put back as it was.
func (c *Coordinator) ShareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) Result[*kmsg.ShareGroupHeartbeatResponse] {
	fail := func(e *kerr.Error, msg string) Result[*kmsg.ShareGroupHeartbeatResponse] {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return ready(resp)
	}
	if strings.TrimSpace(req.GroupID) == "" {
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	}
	var res Result[*kmsg.ShareGroupHeartbeatResponse]
	if err := c.run(req.GroupID, func(s *shard) {
		st := s.State()
		if notShareGroup(st, req.GroupID) {
			res = fail(kerr.GroupIDNotFound, "Group "+req.GroupID+" is not a share group.")
			return
		}
		mgr := st.shares
		restore := mgr.Snapshot(req.GroupID)
		resp, r := mgr.Heartbeat(c.clock.Now(), c.consumerImage(), sharegroup.Client{ID: clientID, Host: clientHost}, req)
		if len(r.Records) == 0 {
			c.shareTimers(s, r.Timers)
			res = ready(resp)
			return
		}
		answer := make(chan *kmsg.ShareGroupHeartbeatResponse, 1)
		_, aerr := c.appendRecords(s, encodeShare(r.Records), restore, func(err error) {
			if err != nil {
				answer <- fail(appendError(err), "").Resp
				return
			}
			c.shareTimers(s, r.Timers)
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

// shareTimers schedules or cancels the Manager's timers (owner).
func (c *Coordinator) shareTimers(s *shard, timers []sharegroup.Timer) {
	if s.Gone() {
		return
	}
	for _, t := range timers {
		if t.Cancel {
			s.Cancel(t.Key())
			continue
		}
		s.Schedule(t.Key(), t.At, func(s *shard) { c.expireShare(s, t) })
	}
}

// expireShare is a share-group member's session timer firing (owner):
// the member is fenced if it is still in the group.
func (c *Coordinator) expireShare(s *shard, t sharegroup.Timer) {
	if !c.owns(s.Partition()) {
		s.Unload()
		return
	}
	mgr := s.State().shares
	restore := mgr.Snapshot(t.Group)
	r := mgr.Expire(c.consumerImage(), t)
	if len(r.Records) == 0 {
		return
	}
	c.log.Info("share group member session expired", "group", t.Group, "member", t.Member)
	_, _ = c.appendRecords(s, encodeShare(r.Records), restore, func(err error) {
		if err == nil {
			c.shareTimers(s, r.Timers)
		}
	})
}

// loadedShares arms the session timers of the share groups of a loaded
// shard (Kafka's onLoaded).
func (c *Coordinator) loadedShares(s *shard) {
	c.shareTimers(s, s.State().shares.LoadedTimers(c.clock.Now()))
}

// ShareGroupDescribe serves ShareGroupDescribe: each group is described on
// its shard, from its committed state (readCommitted); a group led
// elsewhere answers NOT_COORDINATOR, one of another type or unknown
// GROUP_ID_NOT_FOUND.
func (c *Coordinator) ShareGroupDescribe(req *kmsg.ShareGroupDescribeRequest) Result[*kmsg.ShareGroupDescribeResponse] {
	parts := make([]Result[kmsg.ShareGroupDescribeResponseGroup], 0, len(req.GroupIDs))
	for _, id := range req.GroupIDs {
		fail := func(code int16) kmsg.ShareGroupDescribeResponseGroup {
			out := kmsg.NewShareGroupDescribeResponseGroup()
			out.GroupID, out.ErrorCode = id, code
			return out
		}
		var res Result[kmsg.ShareGroupDescribeResponseGroup]
		if err := c.run(id, func(s *shard) {
			res = readCommitted(s, func(s *shard) kmsg.ShareGroupDescribeResponseGroup {
				out := s.State().shares.DescribeGroup(c.consumerImage(), id)
				if notShareGroup(s.State(), id) || s.State().consumers.Group(id) != nil {
					msg := "Group " + id + " is not a share group."
					out.ErrorMessage = &msg
				}
				return out
			}, fail)
		}); err != nil {
			res = ready(fail(err.Code))
		}
		parts = append(parts, res)
	}
	return gather(parts, func(got []kmsg.ShareGroupDescribeResponseGroup) *kmsg.ShareGroupDescribeResponse {
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		resp.Groups = got
		return resp
	})
}

// deleteShareGroup deletes an empty share group as Kafka's
// GroupCoordinatorService.deleteGroups does for share groups: the state
// of its share partitions is deleted first (share.Persister.Delete, when a
// persister is set), then the group's tombstones are written and the
// answer waits for their commit. A member joining meanwhile makes it
// NON_EMPTY_GROUP.
func (c *Coordinator) deleteShareGroup(id string) (wait func() error, code int16) {
	var parts []sharegroup.SharePartition
	if err := c.run(id, func(s *shard) {
		g := s.State().shares.Group(id)
		switch {
		case g == nil:
			code = kerr.GroupIDNotFound.Code
		case len(g.Members) > 0:
			code = kerr.NonEmptyGroup.Code
		default:
			parts = g.StatePartitionList()
		}
	}); err != nil {
		return nil, err.Code
	}
	if code != 0 {
		return nil, code
	}
	if p := c.sharePersister(); p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, sp := range parts {
			if err := p.Delete(ctx, share.Key{Group: id, TopicID: sp.TopicID, Partition: sp.Partition}); err != nil {
				c.log.Warn("deleting share group state", "group", id, "topic", sp.Topic, "partition", sp.Partition, "err", err)
				if ke, ok := err.(*kerr.Error); ok {
					return nil, ke.Code
				}
				return nil, kerr.UnknownServerError.Code
			}
		}
	}
	if err := c.run(id, func(s *shard) {
		mgr := s.State().shares
		restore := mgr.Snapshot(id)
		recs, _, e := mgr.DeleteGroup(id)
		if e != nil {
			code = e.Code
			return
		}
		done, w := durable()
		if _, aerr := c.appendRecords(s, encodeShare(recs), nil, done); aerr != nil {
			restore()
			code = kerr.CoordinatorNotAvailable.Code
			return
		}
		wait = w
	}); err != nil {
		return nil, err.Code
	}
	return wait, code
}

// isShareGroup reports whether group id is a share group (owner).
func isShareGroup(s *shard, id string) bool { return s.State().shares.Group(id) != nil }

// describeShareAsClassic answers a share group in a DescribeGroups as
// Kafka's GroupMetadataManager.describeGroups does for any group that is
// not classic: Dead, and from v6 GROUP_ID_NOT_FOUND with its message.
func describeShareAsClassic(id string, version int16, rg kmsg.DescribeGroupsResponseGroup) kmsg.DescribeGroupsResponseGroup {
	rg.State = Dead.String()
	if version >= 6 {
		msg := "Group " + id + " is not a classic group."
		rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
	}
	return rg
}

// shareSummary is a share group's Summary (owner).
func (c *Coordinator) shareSummary(mgr *sharegroup.Manager, g *sharegroup.Group) Summary {
	img := c.consumerImage()
	names := make(map[sharegroup.TopicID]string, len(img.Topics))
	for name, t := range img.Topics {
		names[t.ID] = name
	}
	tps := func(a sharegroup.Assignment) []TopicPartition {
		var out []TopicPartition
		for _, tp := range a.TPs() {
			if name, ok := names[tp.Topic]; ok {
				out = append(out, TopicPartition{Topic: name, Partition: tp.Partition})
			}
		}
		return out
	}
	s := Summary{ID: g.ID, Type: "share", GroupEpoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch,
		Assignor: mgr.AssignorName(), State: g.State(), ProtocolType: "share", Generation: g.Epoch,
		Members: []MemberSummary{}, Offsets: []CommittedOffset{}}
	for _, m := range g.SortedMembers() {
		s.Members = append(s.Members, MemberSummary{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assigned: tps(m.Assigned), MemberEpoch: m.Epoch, Target: tps(g.Target[m.ID])})
	}
	return s
}

// ShareGroupState reports whether share group id has no members and
// whether it exists, for AlterShareGroupOffsets and
// DeleteShareGroupOffsets (Kafka's GroupCoordinatorService checks the
// group before re-initializing its share partitions). A group id held by
// a classic or consumer group counts as existing and not empty, so its
// offsets are never altered as a share group's. On a node that is not the
// group's coordinator err is NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE
// while its shard loads), so that clients look the coordinator up again.
func (c *Coordinator) ShareGroupState(id string) (empty, exists bool, err *kerr.Error) {
	empty = true
	if err := c.run(id, func(s *shard) {
		if notShareGroup(s.State(), id) || s.State().consumers.Group(id) != nil {
			empty, exists = false, true
			return
		}
		if g := s.State().shares.Group(id); g != nil {
			empty, exists = len(g.Members) == 0, true
		}
	}); err != nil {
		return true, false, err
	}
	return empty, exists, nil
}

// EnsureShareGroup creates share group id, empty, if it does not exist and
// records parts among its initialized share partitions, answering once
// that is committed: AlterShareGroupOffsets calls it before re-initializing
// the partitions' state. A group id held by another group type is
// GROUP_ID_NOT_FOUND, a share group with members NON_EMPTY_GROUP.
func (c *Coordinator) EnsureShareGroup(id string, parts []sharegroup.SharePartition) *kerr.Error {
	var res Result[*kerr.Error]
	if err := c.run(id, func(s *shard) {
		st := s.State()
		if notShareGroup(st, id) || st.consumers.Group(id) != nil {
			res = ready(kerr.GroupIDNotFound)
			return
		}
		if g := st.shares.Group(id); g != nil && len(g.Members) > 0 {
			res = ready(kerr.NonEmptyGroup)
			return
		}
		restore := st.shares.Snapshot(id)
		recs := st.shares.EnsureGroup(id, parts)
		if len(recs) == 0 {
			res = ready[*kerr.Error](nil)
			return
		}
		answer := make(chan *kerr.Error, 1)
		if _, aerr := c.appendRecords(s, encodeShare(recs), restore, func(err error) {
			if err != nil {
				answer <- appendError(err)
				return
			}
			answer <- nil
		}); aerr != nil {
			res = ready(kerr.CoordinatorNotAvailable)
			return
		}
		res = waitOn(answer)
	}); err != nil {
		return err
	}
	if res.Wait != nil {
		return res.Wait()
	}
	return res.Resp
}
