package handler

// ShareAcknowledge, versions 1-2 (KIP-932; v2 adds KIP-1222's IsRenewAck
// and AcquisitionLockTimeoutMillis in the response).
//
// Acknowledges records a share-group member acquired with ShareFetch,
// without fetching more: accept, release, reject, gap, and renew (which
// extends the lock) when IsRenewAck. The request rides on the member's
// share session: epoch 0 is INVALID_SHARE_SESSION_EPOCH (only ShareFetch
// opens sessions), -1 closes the session after the acknowledgements and
// releases the member's remaining locks, any other epoch must be the
// session's (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND). Each
// partition's ErrorCode is its outcome: 0 once the new state is durable
// in the persister, INVALID_RECORD_STATE for records the member does not
// hold (never acquired, acquired by another member, or its lock expired),
// INVALID_REQUEST for malformed batches, UNKNOWN_TOPIC_ID,
// TOPIC_AUTHORIZATION_FAILED (READ on the topic), NOT_LEADER_OR_FOLLOWER
// with CurrentLeader and the leader's endpoint in NodeEndpoints. The
// group needs READ (GROUP_AUTHORIZATION_FAILED); a member id that is not
// a Uuid is INVALID_REQUEST.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
)

func (h *Handlers) shareAcknowledge(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(c int16, msg *string) protocol.Reply {
		resp.ErrorCode, resp.ErrorMessage = c, msg
		return protocol.Reply{Resp: resp}
	}
	group, member, err := shareIdentity(req.GroupID, req.MemberID)
	if err != nil {
		return fail(code(err), message(err))
	}
	if !h.allowedGroup(r, group, acl.OpRead) {
		return fail(groupDenied, nil)
	}
	parts, closed, err := h.share.sessions.Acknowledge(share.SessionKey{Group: group, Member: member}, req.ShareSessionEpoch)
	if err != nil {
		return fail(code(err), message(err))
	}
	cfg := h.shareConfig(group)
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(min(cfg.part.LockDuration/time.Millisecond, 1<<31-1))
	}
	return protocol.Reply{Await: func() kmsg.Response {
		allowed := map[string]bool{}
		lookup := h.b.LookupDeadline()
		var leaders []int32
		var acking []shareAcking
		for _, t := range req.Topics {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				tp := share.TopicPartition{TopicID: t.TopicID, Partition: p.Partition}
				var acks []share.AckBatch
				for _, b := range p.AcknowledgementBatches {
					acks = append(acks, share.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
				}
				part := h.resolveShare(r, tp, lookup, allowed)
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition = p.Partition
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
				acking = append(acking, h.shareAckStart(group, member, part, cfg, acks, req.IsRenewAck))
				if part.err == kerr.NotLeaderForPartition.Code {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = part.leader, part.epoch
					leaders = append(leaders, part.leader)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		// The partitions' writes run side by side.
		res := h.shareAckWaitAll(acking)
		k := 0
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				rp := &resp.Topics[i].Partitions[j]
				rp.ErrorCode, rp.ErrorMessage = res[k].code, res[k].msg
				k++
			}
		}
		for _, e := range h.shareEndpoints(r, leaders) {
			ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
			ne.NodeID, ne.Host, ne.Port, ne.Rack = e.id, e.host, e.port, e.rack
			resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
		}
		if closed {
			h.releaseShareMember(group, member, parts)
		}
		return resp
	}}
}
