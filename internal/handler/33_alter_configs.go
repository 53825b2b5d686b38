package handler

// AlterConfigs, versions 0-2 (legacy: the request's values replace every
// config set on the resource, as Kafka's ConfigurationControlManager.
// legacyAlterConfigs does). Topic resources; BROKER resources (dynamic
// broker configs, KIP-226: "" the cluster default, else this broker's id);
// GROUP resources (group configs, KIP-848). A null value is
// INVALID_REQUEST, as a resource named twice.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) alterConfigs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	dup := duplicateResources(len(req.Resources), func(i int) [2]string {
		return [2]string{strconv.Itoa(int(req.Resources[i].ResourceType)), req.Resources[i].ResourceName}
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var ops []broker.ConfigOp
		var nulls []string
		for _, c := range rr.Configs {
			if c.Value == nil {
				nulls = append(nulls, c.Name)
				continue
			}
			ops = append(ops, broker.ConfigOp{Name: c.Name, Op: 0, Value: *c.Value})
		}
		var err error
		// ALTER_CONFIGS on the topic, the group or the cluster
		// (ControllerApis.authorizeAlterResource).
		switch {
		case dup[i]:
			err = errDuplicateResource
		case rr.ResourceType == resourceBroker && !h.allowedCluster(r, acl.OpAlterConfigs):
			err = kerr.ClusterAuthorizationFailed
		case rr.ResourceType == resourceGroup && !h.allowedGroup(r, rr.ResourceName, acl.OpAlterConfigs):
			err = kerr.GroupAuthorizationFailed
		case rr.ResourceType == resourceBroker || rr.ResourceType == resourceGroup:
			if err = nullValues(nulls); err == nil {
				err = h.alterResource(int8(rr.ResourceType), rr.ResourceName, ops, true, req.ValidateOnly)
			}
		case rr.ResourceType != resourceTopic:
			err = kerr.InvalidRequest
		case !h.allowedTopic(r, rr.ResourceName, acl.OpAlterConfigs):
			err = kerr.TopicAuthorizationFailed
		default:
			err = h.b.AlterTopicConfigs(rr.ResourceName, ops, true, req.ValidateOnly)
		}
		sr.ErrorCode = code(err)
		sr.ErrorMessage = message(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return protocol.Reply{Resp: resp}
}
