package handler

// FindCoordinator, versions 0-6 (v4: a batch of CoordinatorKeys; v6:
// share coordinator keys).
//
// The coordinator of a group is the leader of its __consumer_offsets
// partition, abs(javaHashCode(groupId)) % partitions, so clients and tools
// that compute it agree with Kafka. The topic is created on the first
// request (offsets.topic.num.partitions, replication factor
// min(offsets.topic.replication.factor, live brokers)). The coordinator of
// a transactional id (key type 1) is the leader of its __transaction_state
// partition, computed the same way; that topic is created on the first
// such request (transaction.state.log.*). The coordinator of a share
// partition (key type 2, v6+, "groupId:topicId:partition") is the leader
// of its __share_group_state partition (share.coordinator.state.topic.*);
// only brokers ask for it (CLUSTER_ACTION on the cluster), and a key not
// of that form is INVALID_REQUEST. Any other key type gets
// INVALID_REQUEST. The coordinator is given by its endpoint on the
// listener the request came in on; one without that listener is
// COORDINATOR_NOT_AVAILABLE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/sharecoord"
)

func (g *groupAPI) findCoordinator(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key = key
		var err *kerr.Error
		switch {
		case req.CoordinatorType == 2 && req.Version >= 6:
			err = g.shareCoordinator(r, key, &rc)
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			err = kerr.InvalidRequest
		case req.CoordinatorType == 0 && !g.h.allowedGroup(r, key, acl.OpDescribe):
			// DESCRIBE on the group, or on the transactional id
			// (KafkaApis.handleFindCoordinatorRequest).
			err = kerr.GroupAuthorizationFailed
		case req.CoordinatorType == 1 && !g.h.allowed(r, acl.ResourceTransactionalID, key, acl.OpDescribe):
			err = kerr.TransactionalIDAuthorizationFailed
		case req.CoordinatorType == 1:
			rc.NodeID, err = g.h.txns.Coordinator(key)
			if err == nil {
				err = g.endpointOf(r, &rc)
			}
		default:
			rc.NodeID, rc.Host, rc.Port, err = g.c.Coordinator(key)
			if err == nil {
				err = g.endpointOf(r, &rc)
			}
		}
		if err != nil {
			rc.NodeID, rc.Host, rc.Port = -1, "", -1
			rc.ErrorCode = err.Code
			msg := err.Message
			rc.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	}
	return protocol.Reply{Resp: resp}
}

// endpointOf fills rc's host and port with its node's endpoint on r's
// listener; COORDINATOR_NOT_AVAILABLE if it has none.
func (g *groupAPI) endpointOf(r *protocol.Request, rc *kmsg.FindCoordinatorResponseCoordinator) *kerr.Error {
	br, found := g.h.b.Image().Brokers[rc.NodeID]
	var ok bool
	if rc.Host, rc.Port, ok = endpoint(r, br); !found || !ok {
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// shareCoordinator answers a share coordinator key (Kafka's
// KafkaApis.getCoordinator for CoordinatorType.SHARE).
func (g *groupAPI) shareCoordinator(r *protocol.Request, key string, rc *kmsg.FindCoordinatorResponseCoordinator) *kerr.Error {
	if !g.h.allowedCluster(r, acl.OpClusterAction) {
		return kerr.ClusterAuthorizationFailed
	}
	if !sharecoord.ValidCoordinatorKey(key) {
		return kerr.InvalidRequest
	}
	var err *kerr.Error
	if rc.NodeID, err = g.h.shareState.c.Coordinator(key); err != nil {
		return err
	}
	return g.endpointOf(r, rc)
}
