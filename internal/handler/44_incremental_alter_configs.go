package handler

// IncrementalAlterConfigs, versions 0-1 (KIP-339): SET, DELETE, APPEND and
// SUBTRACT on individual configs of a topic, a BROKER resource (dynamic
// broker configs, KIP-226: "" the cluster default, else this broker's id)
// or a GROUP resource (group configs, KIP-848). A null value other than
// for DELETE is INVALID_REQUEST, as a resource named twice.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) incrementalAlterConfigs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	dup := duplicateResources(len(req.Resources), func(i int) [2]string {
		return [2]string{strconv.Itoa(int(req.Resources[i].ResourceType)), req.Resources[i].ResourceName}
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var ops []broker.ConfigOp
		var nulls []string
		for _, c := range rr.Configs {
			op := broker.ConfigOp{Name: c.Name, Op: int8(c.Op)}
			if c.Value != nil {
				op.Value = *c.Value
			} else if c.Op != kmsg.IncrementalAlterConfigOpDelete {
				nulls = append(nulls, c.Name)
			}
			ops = append(ops, op)
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
				err = h.alterResource(int8(rr.ResourceType), rr.ResourceName, ops, false, req.ValidateOnly)
			}
		case rr.ResourceType != resourceTopic:
			err = kerr.InvalidRequest
		case !h.allowedTopic(r, rr.ResourceName, acl.OpAlterConfigs):
			err = kerr.TopicAuthorizationFailed
		default:
			err = h.b.AlterTopicConfigs(rr.ResourceName, ops, false, req.ValidateOnly)
		}
		sr.ErrorCode = code(err)
		sr.ErrorMessage = message(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return protocol.Reply{Resp: resp}
}
