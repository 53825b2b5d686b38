package handler

// Authorization of the group APIs (KafkaApis): JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup and OffsetCommit need READ on the group
// (OffsetCommit also READ on each topic); OffsetFetch DESCRIBE on the
// group and on each topic; FindCoordinator DESCRIBE on the group
// (DESCRIBE on the transactional id for a transaction key); DescribeGroups
// DESCRIBE and DeleteGroups DELETE on each group; OffsetDelete DELETE on
// the group and READ on each topic; ListGroups lists every group with
// DESCRIBE on the cluster, else the groups the principal may DESCRIBE.
// Refusals are GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED and
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a refused request changes
// nothing.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/protocol"
)

var groupDenied = kerr.GroupAuthorizationFailed.Code

// groupGate wraps a membership API: without READ on the group the answer
// is GROUP_AUTHORIZATION_FAILED and the coordinator is not called.
func (g *groupAPI) groupGate(groupOf func(kmsg.Request) string, fail func(kmsg.Request) kmsg.Response, serve protocol.HandlerFunc) protocol.HandlerFunc {
	return func(r *protocol.Request) protocol.Reply {
		if !g.h.allowedGroup(r, groupOf(r.Body), acl.OpRead) {
			return protocol.Reply{Resp: fail(r.Body)}
		}
		return serve(r)
	}
}

func (g *groupAPI) joinGroupAuthz(r *protocol.Request) protocol.Reply {
	return g.groupGate(func(q kmsg.Request) string { return q.(*kmsg.JoinGroupRequest).Group },
		func(q kmsg.Request) kmsg.Response {
			resp := q.(*kmsg.JoinGroupRequest).ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = groupDenied, -1
			return resp
		}, g.joinGroup)(r)
}

func (g *groupAPI) syncGroupAuthz(r *protocol.Request) protocol.Reply {
	return g.groupGate(func(q kmsg.Request) string { return q.(*kmsg.SyncGroupRequest).Group },
		func(q kmsg.Request) kmsg.Response {
			resp := q.(*kmsg.SyncGroupRequest).ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = groupDenied
			return resp
		}, g.syncGroup)(r)
}

func (g *groupAPI) heartbeatAuthz(r *protocol.Request) protocol.Reply {
	return g.groupGate(func(q kmsg.Request) string { return q.(*kmsg.HeartbeatRequest).Group },
		func(q kmsg.Request) kmsg.Response {
			resp := q.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = groupDenied
			return resp
		}, g.heartbeat)(r)
}

func (g *groupAPI) leaveGroupAuthz(r *protocol.Request) protocol.Reply {
	return g.groupGate(func(q kmsg.Request) string { return q.(*kmsg.LeaveGroupRequest).Group },
		func(q kmsg.Request) kmsg.Response {
			resp := q.(*kmsg.LeaveGroupRequest).ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = groupDenied
			return resp
		}, g.leaveGroup)(r)
}

// offsetCommitAuthz commits the partitions of the topics the principal
// may READ, if it may READ the group; the others are answered
// TOPIC_AUTHORIZATION_FAILED (or all GROUP_AUTHORIZATION_FAILED).
func (g *groupAPI) offsetCommitAuthz(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	if g.h.auth == nil {
		return g.offsetCommit(r)
	}
	groupOK := g.h.allowedGroup(r, req.Group, acl.OpRead)
	var denied []kmsg.OffsetCommitResponseTopic
	var kept []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		c := kerr.TopicAuthorizationFailed.Code
		switch {
		case !groupOK:
			c = groupDenied
		case g.h.allowedTopic(r, t.Topic, acl.OpRead):
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, c
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if len(kept) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return protocol.Reply{Resp: resp}
	}
	req.Topics = kept
	res := g.c.OffsetCommit(req)
	merge := func(resp *kmsg.OffsetCommitResponse) *kmsg.OffsetCommitResponse {
		resp.Topics = append(resp.Topics, denied...)
		return resp
	}
	if res.Wait == nil {
		return protocol.Reply{Resp: merge(res.Resp)}
	}
	return protocol.Reply{Await: func() kmsg.Response { return merge(res.Wait()) }}
}

// offsetFetchAuthz answers GROUP_AUTHORIZATION_FAILED for a group the
// principal may not DESCRIBE; of the others' offsets, a topic it may not
// DESCRIBE is TOPIC_AUTHORIZATION_FAILED when named, left out when every
// topic was asked for.
func (g *groupAPI) offsetFetchAuthz(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	if g.h.auth == nil {
		return g.offsetFetch(r)
	}
	topicOK := func(t string) bool { return g.h.allowedTopic(r, t, acl.OpDescribe) }
	if req.Version >= 8 {
		var kept []kmsg.OffsetFetchRequestGroup
		var refused []string
		for _, rg := range req.Groups {
			if g.h.allowedGroup(r, rg.Group, acl.OpDescribe) {
				kept = append(kept, rg)
			} else {
				refused = append(refused, rg.Group)
			}
		}
		all := map[string]bool{}
		for _, rg := range kept {
			all[rg.Group] = rg.Topics == nil
		}
		req.Groups = kept
		return replyMap(g.c.OffsetFetch(req), func(resp *kmsg.OffsetFetchResponse) *kmsg.OffsetFetchResponse {
			return filterBatchFetch(resp, all, refused, topicOK)
		})
	}
	if !g.h.allowedGroup(r, req.Group, acl.OpDescribe) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 2 {
			resp.ErrorCode = groupDenied
			return protocol.Reply{Resp: resp}
		}
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, groupDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return protocol.Reply{Resp: resp}
	}
	all := req.Topics == nil
	return replyMap(g.c.OffsetFetch(req), func(resp *kmsg.OffsetFetchResponse) *kmsg.OffsetFetchResponse {
		return filterFetch(resp, all, topicOK)
	})
}

// filterFetch drops from resp (OffsetFetch v0-v7) the topics the
// principal may not DESCRIBE when all were asked for, and answers
// TOPIC_AUTHORIZATION_FAILED for those named.
func filterFetch(resp *kmsg.OffsetFetchResponse, all bool, topicOK func(string) bool) *kmsg.OffsetFetchResponse {
	var topics []kmsg.OffsetFetchResponseTopic
	for _, t := range resp.Topics {
		if !topicOK(t.Topic) {
			if all {
				continue
			}
			for j := range t.Partitions {
				t.Partitions[j].Offset, t.Partitions[j].ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
			}
		}
		topics = append(topics, t)
	}
	resp.Topics = topics
	return resp
}

// filterBatchFetch is filterFetch for OffsetFetch v8+ (all says which
// groups asked for every topic), with the groups the principal may not
// DESCRIBE (refused) answered GROUP_AUTHORIZATION_FAILED.
func filterBatchFetch(resp *kmsg.OffsetFetchResponse, all map[string]bool, refused []string, topicOK func(string) bool) *kmsg.OffsetFetchResponse {
	for i := range resp.Groups {
		rg := &resp.Groups[i]
		var topics []kmsg.OffsetFetchResponseGroupTopic
		for _, t := range rg.Topics {
			if !topicOK(t.Topic) {
				if all[rg.Group] {
					continue
				}
				for j := range t.Partitions {
					t.Partitions[j].Offset, t.Partitions[j].ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
				}
			}
			topics = append(topics, t)
		}
		rg.Topics = topics
	}
	for _, name := range refused {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = name, groupDenied
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// describeGroupsAuthz describes the groups the principal may DESCRIBE.
func (g *groupAPI) describeGroupsAuthz(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	if g.h.auth == nil {
		return g.describeGroups(r)
	}
	var kept, refused []string
	for _, name := range req.Groups {
		if g.h.allowedGroup(r, name, acl.OpDescribe) {
			kept = append(kept, name)
		} else {
			refused = append(refused, name)
		}
	}
	req.Groups = kept
	res := group.Result[*kmsg.DescribeGroupsResponse]{Resp: req.ResponseKind().(*kmsg.DescribeGroupsResponse)}
	if len(kept) > 0 {
		res = g.c.DescribeGroups(req)
	}
	return replyMap(res, func(resp *kmsg.DescribeGroupsResponse) *kmsg.DescribeGroupsResponse {
		g.groupAuthorizedOps(r, req, resp)
		for _, name := range refused {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	})
}

// listGroupsAuthz lists every group with DESCRIBE on the cluster, else
// only those the principal may DESCRIBE.
func (g *groupAPI) listGroupsAuthz(r *protocol.Request) protocol.Reply {
	resp := g.c.ListGroups(r.Body.(*kmsg.ListGroupsRequest))
	if g.h.auth == nil || g.h.allowedCluster(r, acl.OpDescribe) {
		return protocol.Reply{Resp: resp}
	}
	var kept []kmsg.ListGroupsResponseGroup
	for _, lg := range resp.Groups {
		if g.h.allowedGroup(r, lg.Group, acl.OpDescribe) {
			kept = append(kept, lg)
		}
	}
	resp.Groups = kept
	return protocol.Reply{Resp: resp}
}

// deleteGroupsAuthz deletes the groups the principal may DELETE.
func (g *groupAPI) deleteGroupsAuthz(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	if g.h.auth == nil {
		return g.deleteGroups(r)
	}
	var kept, refused []string
	for _, name := range req.Groups {
		if g.h.allowedGroup(r, name, acl.OpDelete) {
			kept = append(kept, name)
		} else {
			refused = append(refused, name)
		}
	}
	merge := func(resp *kmsg.DeleteGroupsResponse) *kmsg.DeleteGroupsResponse {
		for _, name := range refused {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, groupDenied
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	if len(kept) == 0 {
		return protocol.Reply{Resp: merge(req.ResponseKind().(*kmsg.DeleteGroupsResponse))}
	}
	req.Groups = kept
	return replyMap(g.c.DeleteGroups(req), merge)
}

// offsetDeleteAuthz needs DELETE on the group and READ on each topic.
func (g *groupAPI) offsetDeleteAuthz(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	if g.h.auth == nil {
		return g.offsetDelete(r)
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !g.h.allowedGroup(r, req.Group, acl.OpDelete) {
		resp.ErrorCode = groupDenied
		return protocol.Reply{Resp: resp}
	}
	var kept []kmsg.OffsetDeleteRequestTopic
	var denied []kmsg.OffsetDeleteResponseTopic
	for _, t := range req.Topics {
		if g.h.allowedTopic(r, t.Topic, acl.OpRead) {
			kept = append(kept, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	merge := func(resp *kmsg.OffsetDeleteResponse) *kmsg.OffsetDeleteResponse {
		resp.Topics = append(resp.Topics, denied...)
		return resp
	}
	if len(kept) == 0 && len(denied) > 0 {
		return protocol.Reply{Resp: merge(resp)}
	}
	req.Topics = kept
	return replyMap(g.c.OffsetDelete(req), merge)
}

// replyMap is reply with fn applied to the response.
func replyMap[T kmsg.Response](r group.Result[T], fn func(T) T) protocol.Reply {
	if r.Wait == nil {
		return protocol.Reply{Resp: fn(r.Resp)}
	}
	return protocol.Reply{Await: func() kmsg.Response { return fn(r.Wait()) }}
}
