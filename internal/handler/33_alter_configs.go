package handler

// AlterConfigs, versions 0-2 (legacy: the request's values replace every
// config set on the topic). Topic resources only; broker configs are static
// (set in server.properties) and a broker resource gets INVALID_REQUEST.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) alterConfigs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
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
				if c.Value == nil {
					continue
				}
				ops = append(ops, broker.ConfigOp{Name: c.Name, Op: 0, Value: *c.Value})
			}
			err = h.b.AlterTopicConfigs(rr.ResourceName, ops, true, req.ValidateOnly)
		}
		sr.ErrorCode = code(err)
		sr.ErrorMessage = message(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return protocol.Reply{Resp: resp}
}
