package handler

// IncrementalAlterConfigs, versions 0-1 (KIP-339): SET, DELETE, APPEND and
// SUBTRACT on individual topic configs. Broker resources get
// INVALID_REQUEST (broker configs are static).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) incrementalAlterConfigs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		// ALTER_CONFIGS on the topic or the cluster
		// (KafkaApis.handleAlterConfigsRequest).
		switch {
		case rr.ResourceType == resourceBroker && !h.allowedCluster(r, acl.OpAlterConfigs):
			err = kerr.ClusterAuthorizationFailed
		case rr.ResourceType != resourceTopic:
			err = kerr.InvalidRequest
		case !h.allowedTopic(r, rr.ResourceName, acl.OpAlterConfigs):
			err = kerr.TopicAuthorizationFailed
		default:
			var ops []broker.ConfigOp
			for _, c := range rr.Configs {
				op := broker.ConfigOp{Name: c.Name, Op: int8(c.Op)}
				if c.Value != nil {
					op.Value = *c.Value
				}
				ops = append(ops, op)
			}
			err = h.b.AlterTopicConfigs(rr.ResourceName, ops, false, req.ValidateOnly)
		}
		sr.ErrorCode = code(err)
		sr.ErrorMessage = message(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return protocol.Reply{Resp: resp}
}
